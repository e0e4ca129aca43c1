"""Atomic file and folder writes: a crash leaves the old version or the new one.

The temporary files and folders get the permissions a plain `open` or `mkdir` would
give under the process umask (`tempfile` makes them owner-only), so that a TF Serving
process running as another user can read an export.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def normal_permissions(path: str, folder: bool) -> None:
    """The mode a plain `open` (files) or `mkdir` (folders) gives under the umask."""
    os.chmod(path, (0o777 if folder else 0o666) & ~current_umask())


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike):
    """Yields a temporary folder beside `path`; on success it replaces `path`.

    Every file and folder in it then has the permissions the umask gives.

    The temporary folder is on the same file system, so the final step is a rename.
    If the body raises, `path` is left as it was and the temporary folder is removed.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    normal_permissions(tmp, folder=True)
    try:
        yield tmp
        for root, dirs, files in os.walk(tmp):  # flush file contents before the rename
            for name in dirs:  # writers such as safetensors make owner-only files
                normal_permissions(os.path.join(root, name), folder=True)
            for name in files:
                normal_permissions(os.path.join(root, name), folder=False)
                with open(os.path.join(root, name), "rb+") as f:
                    os.fsync(f.fileno())
        if os.path.exists(path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
            os.rename(path, os.path.join(old, "x"))
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Opens a temporary file beside `path`; on success it is renamed onto `path`."""
    path = os.path.abspath(os.fspath(path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-",
                               dir=os.path.dirname(path))
    normal_permissions(tmp, folder=False)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def write_json(path: str | os.PathLike, obj, ensure_ascii: bool = False) -> None:
    """Writes `obj` as indented JSON, atomically (`atomic_file`)."""
    import json

    with atomic_file(path) as f:
        json.dump(obj, f, indent=2, ensure_ascii=ensure_ascii)


def read_json(path: str | os.PathLike):
    """Loads a JSON file (a UTF-8 byte-order mark is skipped, as editors on Windows write
    one); malformed JSON is a ValueError naming the file, line and column."""
    import json

    path = os.fspath(path)
    with open(path, encoding="utf-8-sig") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None


def expand_inputs(input_file: str, flag: str = "--input_file") -> list[str]:
    """Comma-separated globs -> the files, in order (each pattern's matches sorted);
    a pattern that matches nothing is a FileNotFoundError naming `flag`."""
    import glob

    files = []
    for pattern in input_file.split(","):
        matches = sorted(glob.glob(pattern))
        if not matches:
            raise FileNotFoundError(f"{flag}: {pattern!r} matches no file")
        files.extend(matches)
    return files
