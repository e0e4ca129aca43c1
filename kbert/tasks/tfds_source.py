"""TensorFlow Datasets as a data source of the task commands (`--tfds`).

`load` is `tfds.load` with the commands' error handling: a dataset that cannot be
loaded (no network and no prepared copy, for one) is one error line saying what to
download or which folder to pass, and the TFDS data directory is left as it was (the
download's half-written folders are removed).
"""

from __future__ import annotations

import os
import shutil


def default_data_dir() -> str:
    """TFDS's own default: $TFDS_DATA_DIR, else ~/tensorflow_datasets."""
    return os.environ.get("TFDS_DATA_DIR") or os.path.join(os.path.expanduser("~"),
                                                            "tensorflow_datasets")


def _paths(root: str, dataset: str) -> set[str]:
    """Every path under the dataset's folder and under downloads/ (what a failed
    download_and_prepare can leave)."""
    out = set()
    for top in (os.path.join(root, dataset), os.path.join(root, "downloads")):
        if not os.path.exists(top):
            continue
        out.add(top)
        for folder, dirs, files in os.walk(top):
            out.update(os.path.join(folder, name) for name in dirs + files)
    return out


def _restore(root: str, dataset: str, before: set[str], root_existed: bool) -> None:
    """Removes what was created under `root` since `before` was taken (deepest first)."""
    for path in sorted(_paths(root, dataset) - before, key=len, reverse=True):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)
    if not root_existed and os.path.isdir(root) and not os.listdir(root):
        os.rmdir(root)


def load(name: str, split, data_dir: str | None = None, advice: str = ""):
    """(dataset or list of datasets, DatasetInfo) of `tfds.load(name, split=split,
    with_info=True)`. On failure: SystemExit with one line naming the dataset, the
    TFDS data directory, the cause and `advice`; the data directory as it was."""
    import tensorflow_datasets as tfds

    root = data_dir or default_data_dir()
    dataset = name.split("/")[0]
    root_existed = os.path.isdir(root)
    before = _paths(root, dataset)
    try:
        return tfds.load(name, split=split, data_dir=data_dir, with_info=True)
    except Exception as e:  # no network, no prepared copy, a broken one
        _restore(root, dataset, before, root_existed)
        cause = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160]}" if str(e) \
            else type(e).__name__
        raise SystemExit(f"TFDS could not load {name} into {root} ({cause}); {advice}"
                         .rstrip("; ")) from None
