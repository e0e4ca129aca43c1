"""Written files and folders have the permissions the umask gives (a TF Serving process
running as another user must read an export), and writes are atomic."""

import os
import stat

import numpy as np
import pytest

import kbert
from kbert.io import atomic_directory, atomic_file


def _modes(root):
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = stat.S_IMODE(os.stat(path).st_mode)
    out["."] = stat.S_IMODE(os.stat(root).st_mode)
    return out


@pytest.fixture(params=[0o022, 0o027], ids=["umask022", "umask027"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _assert_normal(root, mask):
    for rel, mode in _modes(root).items():
        path = os.path.join(root, rel)
        want = (0o777 if os.path.isdir(path) else 0o666) & ~mask
        assert mode == want, f"{rel}: {oct(mode)}, expected {oct(want)}"


def test_atomic_writes_honour_the_umask(tmp_path, umask):
    with atomic_file(tmp_path / "out" / "a.json") as f:
        f.write("{}")
    with atomic_directory(tmp_path / "out" / "folder") as tmp:
        with open(os.path.join(tmp, "x.txt"), "w") as f:
            f.write("x")
    _assert_normal(tmp_path / "out", umask)


def test_save_pretrained_and_exports_honour_the_umask(tmp_path, umask):
    from kbert.export import export_embeddings
    from tests.conftest import TINY_VOCAB

    tokenizer = kbert.BertTokenizer(TINY_VOCAB, seq_length=8)
    encoder = kbert.BertEncoder(kbert.BertConfig.preset("tiny", vocab_size=len(TINY_VOCAB)))
    encoder.save_pretrained(tmp_path / "folder", tokenizer=tokenizer)
    _assert_normal(tmp_path / "folder", umask)
    if umask != 0o027:
        return  # one SavedModel export (seconds) is enough: the stricter umask
    export_embeddings(encoder, tokenizer, str(tmp_path / "serving" / "bert" / "1"),
                      seq_length=8)
    _assert_normal(tmp_path / "serving", umask)
    assert np.isfinite(np.asarray(encoder(tokenizer(["a"]))["pooled_output"])).all()
