"""Exports run as tensorflow_model_server runs them: TensorFlow's C++ SavedModel loader
(`TF_LoadSessionFromSavedModel`, the saver's restore op, the init op) and
`Session::Run` on the SignatureDef's tensor names, from a process that imports no
TensorFlow Python (`kbert/export/c_loader.py`).

Every other export test goes through `kbert.export.check.run_fresh`, which runs both
that loader and `tf.saved_model.load` and fails when they answer differently; the
tests here cover what those cannot: a SavedModel saved the way kbert saved them before
(a `tf.Module` holding the Keras model), which `tf.saved_model.load` runs and the C++
loader does not, and an export written in the process that trained the model."""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert import BertConfig, BertEncoder, BertTokenizer
from kbert.export import export_classifier, export_embeddings, write_warmup_requests
from kbert.export import c_loader
from kbert.export.check import (C_LOADER, ServingLoaderError, _python_fresh, compare_results,
                                run_c_loader, run_fresh)
from kbert.tasks.glue import build_classifier

from tests.conftest import TINY_VOCAB

pytestmark = pytest.mark.subprocess

TEXTS = ["hello world", "the cat sat on the mat", "", "北京 wa runn ##ing", "unwanted , !"]


def _encoder(seed=0):
    keras.utils.set_random_seed(seed)
    return BertEncoder(BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=16, num_layers=2,
                                  num_heads=2, intermediate_size=24,
                                  max_position_embeddings=32))


def _old_style_export(encoder, tokenizer, path):
    """What kbert's exporters wrote before: a tf.Module that holds the Keras model."""

    class Old(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = encoder
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, text):
            out = encoder.features(tokenizer(text, seq_length=16), training=False)
            return {"pooled_output": tf.cast(out["pooled_output"], tf.float32)}

    module = Old()
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    write_warmup_requests(path, "old", [{"text": ["hello world"]}])


def test_an_export_saved_the_old_way_fails_the_c_loader_and_check_names_the_variable(
        tmp_path, capsys):
    tokenizer = BertTokenizer(TINY_VOCAB)
    path = str(tmp_path / "old" / "1")
    _old_style_export(_encoder(), tokenizer, path)
    # tf.saved_model.load restores through the object graph and answers ...
    python = _python_fresh(path, [{"text": ["hello world"]}], 300)
    assert python["results"][0]["pooled_output"]["shape"] == [1, 16]
    # ... TF Serving's loader restores by the saver's restore op, which misses them.
    with pytest.raises(ServingLoaderError, match=r"variable '[\w/]+' is not restored by the "
                                                 "SavedModel's restore op"):
        run_c_loader(path, [{"text": ["hello world"]}])
    from kbert.export.__main__ import main as export_main
    from tests.conftest import run_cli

    code, stdout, stderr = run_cli(export_main, ["check", path], capsys)
    assert code == 1, stdout + stderr
    errors = [line for line in stdout.splitlines() if "ERROR" in line]
    assert len(errors) == 1, stdout
    assert re.search(r"TF Serving's C\+\+ loader cannot run this export: variable "
                     r"'(pooler|transformer_layer_\d|embeddings)/[\w/]+' is not restored",
                     errors[0]), errors[0]


@pytest.fixture(scope="module")
def embeddings_export(tmp_path_factory):
    tokenizer = BertTokenizer(TINY_VOCAB)
    encoder = _encoder()
    path = str(tmp_path_factory.mktemp("emb") / "new" / "1")
    export_embeddings(encoder, tokenizer, path, seq_length=16)
    return encoder, tokenizer, path


def test_the_same_model_exported_by_kbert_runs_in_the_c_loader(embeddings_export):
    encoder, tokenizer, path = embeddings_export
    report = run_fresh(path, [{"text": TEXTS}, {"text": TEXTS[:1]}])
    want = encoder.features(tokenizer(TEXTS, seq_length=16))
    got = report["results"][0]
    np.testing.assert_allclose(np.reshape(got["pooled_output"]["value"], (5, 16)),
                               want["pooled_output"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(report["results"][1]["pooled_output"]["value"],
                               want["pooled_output"][0], rtol=1e-5, atol=1e-5)
    # The C++ loader's own reading of the MetaGraphDef it was handed: the same tensor
    # names, dtypes and shapes as saved_model.pb read with TensorFlow's protobuf classes.
    from kbert import internals

    proto = internals.read_saved_model_proto(os.path.join(path, "saved_model.pb"))
    sig = proto.meta_graphs[0].signature_def["serving_default"]
    served = run_c_loader(path, [])["signatures"]["serving_default"]
    for kind, tensors in (("inputs", sig.inputs), ("outputs", sig.outputs)):
        assert {k: (v["name"], v["dtype"], v["shape"]) for k, v in served[kind].items()} == {
            k: (t.name, tf.as_dtype(t.dtype).name,
                [d.size if d.size >= 0 else None for d in t.tensor_shape.dim])
            for k, t in tensors.items()}
    assert served["method_name"] == "tensorflow/serving/predict"


def test_the_c_loader_process_imports_no_tensorflow_python(embeddings_export, tmp_path):
    path = embeddings_export[2]
    requests, out = tmp_path / "r.json", tmp_path / "o.json"
    requests.write_text(json.dumps([{"text": ["a"]}]))
    # -X importtime lists every module the interpreter imported.
    proc = subprocess.run([sys.executable, "-X", "importtime", C_LOADER, path, str(requests),
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert not {m for m in imported if m.split(".")[0] in
                ("tensorflow", "tensorflow_text", "numpy", "google", "kbert", "keras")}
    assert json.loads(out.read_text())["python_modules"] == []


def test_one_python_loader_answers_export_after_export_as_fresh_processes(
        embeddings_export, tmp_path):
    """`shared_python_loader` (every test session's, tests/conftest.py): one process
    answers each export as a process of its own would, with only tensorflow and
    tensorflow_text imported; an export it cannot load is one error, and the next
    request is answered (by a new process if that one died); a request past its
    timeout stops the process."""
    from kbert.export import check as check_lib

    path = embeddings_export[2]
    requests = [{"text": TEXTS}, {"text": TEXTS[:1]}]
    token = check_lib._SHARED_PYTHON.set(None)  # not the session's loader: this test's
    try:
        alone = _python_fresh(path, requests, 300)  # a process of its own
        with check_lib.shared_python_loader():
            shared = check_lib._SHARED_PYTHON.get()
            first = _python_fresh(path, requests, 300)
            with pytest.raises(RuntimeError, match="(?s)the Python loader failed:.*"
                               "SavedModel file does not exist"):
                _python_fresh(str(tmp_path / "nothing"), requests, 300)
            pid = shared.proc.pid
            again = _python_fresh(path, requests[1:], 300)
            assert shared.proc.pid == pid and shared.jobs == 3  # one process, three loads
            shared.proc.kill()  # a process that died is started again
            shared.proc.wait()
            assert _python_fresh(path, requests[1:], 300) == again
            assert shared.proc.pid != pid
            with pytest.raises(subprocess.TimeoutExpired):
                _python_fresh(path, requests, 0.001)
            assert shared.proc is None
        assert check_lib._SHARED_PYTHON.get() is None
    finally:
        check_lib._SHARED_PYTHON.reset(token)
    assert first == alone and first["modules"] == []
    assert again["results"] == alone["results"][1:]


def test_an_export_written_in_the_process_that_trained_the_model(tmp_path):
    """The docs' example: model.fit, then export_classifier in the same process. The
    export answers through the C++ loader as the trained model does and carries no
    optimizer state: the same variables as an export of an untrained copy."""
    tokenizer = BertTokenizer(TINY_VOCAB)
    model = build_classifier(_encoder(3), 2)
    model.compile(keras.optimizers.Adam(1e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    inputs = tokenizer(TEXTS * 4, seq_length=16)
    model.fit(inputs, np.array([0, 1, 0, 1, 1] * 4), epochs=2, verbose=0)
    assert model.optimizer.variables  # Adam's slots exist in this process
    trained = str(tmp_path / "trained" / "1")
    export_classifier(model, tokenizer, trained, ["neg", "pos"], seq_length=16)
    report = run_fresh(trained, [{"text": TEXTS}, {"text": TEXTS[2:3]}])
    want = tf.nn.softmax(model.predict(tokenizer(TEXTS, seq_length=16), verbose=0)["logits"])
    got = report["results"][0]
    np.testing.assert_allclose(np.reshape(got["probabilities"]["value"], (5, 2)), want,
                               rtol=1e-5, atol=1e-5)
    assert got["label"]["value"] == [["neg", "pos"][k] for k in np.argmax(want, -1)]
    np.testing.assert_allclose(report["results"][1]["probabilities"]["value"], want[2],
                               rtol=1e-5, atol=1e-5)
    keys = [name for name, _ in tf.train.list_variables(os.path.join(trained, "variables",
                                                                     "variables"))]
    assert not [k for k in keys if "optimizer" in k]
    fresh = build_classifier(_encoder(3), 2)
    untrained = str(tmp_path / "untrained" / "1")
    export_classifier(fresh, tokenizer, untrained, ["neg", "pos"], seq_length=16)
    assert sorted(tf.train.list_variables(os.path.join(untrained, "variables",
                                                       "variables"))) == \
        sorted(tf.train.list_variables(os.path.join(trained, "variables", "variables")))


def test_compare_results_catches_differences():
    a = [{"x": {"dtype": "float32", "shape": [2], "value": [1.0, 2.0]},
          "s": {"dtype": "string", "shape": [1], "value": ["a"]}}]
    near = [{"x": {"dtype": "float32", "shape": [2], "value": [1.0, 2.0 + 1e-6]},
             "s": {"dtype": "string", "shape": [1], "value": ["a"]}}]
    assert compare_results(a, near) == []
    far = [{"x": {"dtype": "float32", "shape": [2], "value": [1.0, 2.001]},
            "s": {"dtype": "string", "shape": [1], "value": ["a"]}}]
    assert compare_results(a, far) == ["request 0, x[1]: 2.0 (tf.saved_model.load) != 2.001 "
                                       "(C++ loader)"]
    other = [{"x": a[0]["x"], "s": {"dtype": "string", "shape": [1], "value": ["b"]}}]
    assert len(compare_results(a, other)) == 1
    assert compare_results(a, other, values=False) == []
    shaped = [{"x": {"dtype": "float32", "shape": [1, 2], "value": [1.0, 2.0]},
               "s": a[0]["s"]}]
    assert "float32 [2] != float32 [1, 2]" in compare_results(a, shaped)[0]
    # Per request (a batch of several signatures' requests): values compared where true.
    assert compare_results(a + a, other + other, values=[False, True]) == [
        "request 1, s[0]: 'a' (tf.saved_model.load) != 'b' (C++ loader)"]


def test_one_signature_name_for_all_requests_or_one_per_request():
    from kbert.export.check import _signature_names

    assert _signature_names("classify", [{}, {}]) == "classify"
    assert _signature_names(["a", "serving_default"], [{}, {}]) == "a,serving_default"
    with pytest.raises(ValueError, match="^1 signature names for 2 requests$"):
        _signature_names(["a"], [{}, {}])


def test_the_wire_format_reader_reads_nested_maps_and_unknown_dims():
    def varint(n):
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out

    def field(number, payload):
        if isinstance(payload, int):
            return varint(number << 3) + varint(payload)
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    dim = lambda size: field(2, field(1, size & (2 ** 64 - 1)))  # noqa: E731
    info = field(1, b"in:0") + field(2, 7) + field(3, dim(-1) + dim(16))
    sig = field(1, field(1, b"text") + field(2, info)) + field(3, b"tensorflow/serving/predict")
    meta = field(5, field(1, b"serving_default") + field(2, sig))
    assert c_loader.signature_defs(meta) == {"serving_default": {
        "inputs": {"text": {"name": "in:0", "dtype": "string", "shape": [None, 16]}},
        "outputs": {}, "method_name": "tensorflow/serving/predict"}}


def _export_with(tmp_path, extra):
    """save_export of an encoder's pooled output plus `extra(text)` (outputs), to
    tmp_path/m/1; returns that path."""
    from kbert.export.base import ServingModule, save_export

    tokenizer = BertTokenizer(TINY_VOCAB)
    encoder = _encoder()
    module = ServingModule(encoder, tokenizer)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        out = encoder.features(tokenizer(text, seq_length=8), training=False)
        return {"pooled_output": out["pooled_output"], **extra(text)}

    module.serve = serve
    export_dir = tmp_path / "m" / "1"
    save_export(module, serve, str(export_dir), [{"text": ["a"]}], "2.21")
    return export_dir


def test_an_export_whose_warmup_replay_fails_leaves_no_version_folder(tmp_path):
    """The exporter replays the warmup requests through the C++ loader inside the
    temporary folder; a failing request leaves nothing at `export_dir`."""
    def failing(text):
        fail = tf.debugging.assert_less(tf.size(text), 0, message="refused by the test")
        with tf.control_dependencies([fail]):
            return {"n": tf.size(text)}

    with pytest.raises(ServingLoaderError, match="refused by the test"):
        _export_with(tmp_path, failing)
    assert not (tmp_path / "m" / "1").exists() and os.listdir(tmp_path / "m") == []


def test_an_export_whose_op_check_fails_leaves_no_version_folder(tmp_path):
    """An op the server lacks (a Python function here) is found before the export is
    moved into place: UnsupportedOpError naming it, nothing at `export_dir`."""
    from kbert.export import UnsupportedOpError

    def python_op(text):
        return {"n": tf.py_function(lambda t: tf.strings.length(t), [text], tf.int32)}

    with pytest.raises(UnsupportedOpError, match="EagerPyFunc"):
        _export_with(tmp_path, python_op)
    assert not (tmp_path / "m" / "1").exists() and os.listdir(tmp_path / "m") == []


def test_check_served_takes_the_exporters_answers_and_names_the_rows_that_differ(
        monkeypatch):
    """A task command's check of its export (`check_served`) takes the answers that the
    exporter's own C++ load gave to the check's request (`keep_served(also=...)`)
    instead of loading the export again, and still names the rows that differ."""
    from kbert.export import check as check_lib

    def no_second_load(*args, **kwargs):
        raise AssertionError("the export was loaded again")

    monkeypatch.setattr(check_lib, "run_c_loader", no_second_load)
    request = {"question": ["q1", "q2"], "context": ["c1", "c2"]}
    answers = {"answer": {"dtype": "string", "shape": [2], "value": ["a", "b"]}}
    with check_lib.keep_served(also=[request]):
        assert check_lib.also_served() == [("serving_default", request)]
        check_lib.note_served("/exports/m/1", ["serving_default", "serving_default"],
                              [{"question": ["w"], "context": ["c"]}, request],
                              [{"answer": {"dtype": "string", "shape": [1], "value": ["x"]}},
                               answers])
        check_lib.check_served("/exports/m/1", request, "answer", ["a", "b"], ["id1", "id2"],
                               "Python")
        with pytest.raises(RuntimeError, match=r"answers 1 of 2 requests differently from "
                                               r"Python \(\['id2'\]\)"):
            check_lib.check_served("/exports/m/1", request, "answer", ["a", "c"],
                                   ["id1", "id2"], "Python")
        with pytest.raises(AssertionError, match="loaded again"):  # another request
            check_lib.check_served("/exports/m/1", {"question": ["q3"], "context": ["c"]},
                                   "answer", ["a"], ["id3"], "Python")
    assert check_lib.also_served() == []


def test_a_request_kept_twice_answers_twice_in_order_and_each_keeps_refusals(monkeypatch):
    """The same request sent twice in the exporter's load (fresh randomness: two texts)
    gives its two answers in order, a third asks a load of its own; `each=True` returns
    a refusal as {"error": line} instead of raising it."""
    from kbert.export import check as check_lib

    monkeypatch.setattr(check_lib, "run_c_loader", lambda *a, **k: {"results": ["fresh"]})
    same, bad = {"prompt": ["p"]}, {"prompt": ["p"], "seed": [-2]}
    answers = [{"text": {"value": [t]}} for t in ("a", "b")] + [{"error": "seed: no"}]
    with check_lib.keep_served():
        check_lib.note_served("/exports/g/1", ["generate"] * 3, [same, same, bad], answers)
        assert check_lib.served_results("/exports/g/1", [same, same], "generate") == \
            answers[:2]
        assert check_lib.served_results("/exports/g/1", [same], "generate") == answers[:1]
        assert check_lib.served_results("/exports/g/1", [same] * 3, "generate") == ["fresh"]
        assert check_lib.served_results("/exports/g/1", [bad, same], "generate",
                                        each=True) == [answers[2], answers[0]]
        with pytest.raises(check_lib.ServingLoaderError, match="seed: no"):
            check_lib.served_results("/exports/g/1", [bad], "generate")


def test_kept_requests_nest_name_signatures_and_keep_refusals(tmp_path, monkeypatch):
    """`keep_served` around a command that keeps its own (nested): the exporter runs
    both contexts' requests in its one C++ load; a request the export cannot take is
    refused alone (the export is still written) and `served_results` raises its line;
    a (signature, request) pair is answered by that signature; the answers kept equal a
    fresh load's, and nothing loads the export a second time."""
    from kbert.export import check as check_lib

    def no_second_load(*args, **kwargs):
        raise AssertionError("the export was loaded again")

    good = {"text": ["hello world", ""]}
    wrong = ("serving_default", {"nope": ["x"]})
    with check_lib.keep_served(also=[good]):
        with check_lib.keep_served(also=[wrong, ("token_ids", good)]):
            assert check_lib.also_served() == [("serving_default", good), wrong,
                                               ("token_ids", good)]
            export_dir = _export_with(tmp_path, lambda text: {})
        assert check_lib.also_served() == [("serving_default", good)]
        monkeypatch.setattr(check_lib, "run_c_loader", no_second_load)
        (kept,) = check_lib.served_results(str(export_dir), [good])
        with pytest.raises(check_lib.ServingLoaderError,
                           match=r"m/1: TF Serving's C\+\+ loader failed: signature "
                                 r"'serving_default' takes \['text'\]; got \['nope'\]"):
            check_lib.served_results(str(export_dir), [wrong[1]])
        with pytest.raises(check_lib.ServingLoaderError, match="no signature 'token_ids'"):
            check_lib.served_results(str(export_dir), [good], "token_ids")
    monkeypatch.undo()
    assert kept == check_lib.run_c_loader(str(export_dir), [good])["results"][0]
    assert kept["pooled_output"]["shape"] == [2, 16]
