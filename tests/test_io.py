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


@pytest.mark.subprocess  # the export replays its warmup through the C loader
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


def test_json_and_text_files_with_a_byte_order_mark(tmp_path):
    """SQuAD JSON and pretraining text saved by an editor that writes a UTF-8 BOM read
    as without; a text file that is not UTF-8 is refused naming the file and line."""
    from kbert.io import read_json
    from kbert.tasks.pretrain.run import read_texts

    (tmp_path / "a.json").write_bytes(b"\xef\xbb\xbf" + b'{"data": [], "version": "1.1"}')
    assert read_json(tmp_path / "a.json") == {"data": [], "version": "1.1"}
    (tmp_path / "t.txt").write_bytes("\ufeffFirst line.\r\nSecond.\n\nThird.\n".encode())
    assert read_texts(str(tmp_path / "t.txt")) == ["First line.", "Second.", "", "Third."]
    (tmp_path / "bad.txt").write_bytes(b"ok\nnot \xff utf-8\n")
    with pytest.raises(ValueError, match=r"--text_file .*bad.txt, line 2: not UTF-8"):
        read_texts(str(tmp_path / "bad.txt"))


def test_create_data_records_honour_the_umask(tmp_path):
    """create_data's TFRecords get the mode a plain open gives (it forced 0o644, world-
    readable under umask 077)."""
    from kbert.models.bert.create_data import Options, write_instances

    old = os.umask(0o077)
    try:
        outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
        assert write_instances([], {}, Options(), outputs) == 0
        for path in outputs:
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    finally:
        os.umask(old)
