"""SavedModels for TF Serving: raw strings in, the same answers as the Python pipeline
out, in a fresh process that imports only tensorflow and tensorflow_text."""

import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert import BertConfig, BertEncoder, BertTokenizer, build_vocab
from kbert.export import (UnsupportedOpError, check_ops, export_classifier, export_embeddings,
                          export_squad, missing_ops, read_warmup_requests)
from kbert.export.check import (check, keep_served, run_c_loader, run_fresh, served_results,
                                signatures)
from kbert.tasks import squad
from kbert.tasks.glue import build_classifier
from kbert.tasks.squad.features import convert_examples, feature_arrays
from kbert.tasks.squad.postprocess import postprocess
from kbert.tasks.squad.sample import make_sample

# Accents, CJK, emoji, empty strings, odd whitespace, and texts longer than the model.
HARD_TEXTS = ["Crème brûlée à Zürich, très bien!", "北京是中国的首都。东京呢?", "🙂🙃 emoji 👍🏽 ok",
              "", "  \t odd\u00a0 whitespace\u3000here ", "Ｆｕｌｌ-width ＡＢＣ",
              "a long sentence that goes on " * 30]


def _hard_questions():
    long_context = "The museum in Zürich opened in 1898. " * 25 + "北京 has 🙂 too."
    return [("Where is the museum?", long_context), ("When did it open?", long_context),
            ("北京?", "北京是中国的首都。东京呢?"), ("", ""), ("Nothing here?", ""),
            ("Crème?", "Crème brûlée à Zürich, très bien!"),
            ("why " * 80, "A question longer than the window.")]


@pytest.fixture(scope="module")
def sample_and_tokenizer():
    data = make_sample(30, seed=5, version_2=True)
    texts = [p["context"] for a in data["data"] for p in a["paragraphs"]]
    texts += [q["question"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    texts += HARD_TEXTS
    return data, BertTokenizer(build_vocab(texts, vocab_size=700, min_count=1), seq_length=48)


def _encoder(tokenizer, max_len=64):
    return BertEncoder(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=24,
                                  num_layers=2, num_heads=2, intermediate_size=40,
                                  max_position_embeddings=max_len))


SQUAD = dict(max_seq_length=64, doc_stride=16, max_query_length=20, n_best_size=5,
             max_answer_length=12)


@pytest.mark.subprocess
@pytest.mark.parametrize("version_2", [False, True])
def test_squad_export_matches_python_pipeline_in_fresh_process(tmp_path, sample_and_tokenizer,
                                                               version_2):
    data, tokenizer = sample_and_tokenizer
    keras.utils.set_random_seed(7)
    model = squad.build_model(_encoder(tokenizer))
    examples = squad.read_squad(data, strict=True)
    examples += [squad.SquadExample(f"hard{i}", q, c, []) for i, (q, c) in
                 enumerate(_hard_questions())]
    # The Python pipeline: features, model.predict, postprocess. (It refuses the
    # over-long question; the SavedModel cuts it, so that one is compared alone.)
    kept = [e for e in examples if e.qid != "hard6"]
    features = convert_examples(kept, tokenizer, **{k: SQUAD[k] for k in (
        "max_seq_length", "doc_stride", "max_query_length")})
    arrays = feature_arrays(features)
    logits = model.predict({k: arrays[k] for k in ("token_ids", "segment_ids",
                                                   "padding_mask")}, verbose=0)
    expected = postprocess(kept, features, logits["start_logits"], logits["end_logits"],
                           SQUAD["n_best_size"], SQUAD["max_answer_length"], version_2)

    # token_ids: the windows' own inputs in, start and end logits out, as model.predict
    # (every request after one load by each loader: the C++ loader's is the exporter's
    # own, `keep_served`; the Python loader's a fresh process)
    window = {k: arrays[k][:2].tolist() for k in ("token_ids", "segment_ids", "padding_mask")}
    batch = [{"question": [e.question for e in examples],
              "context": [e.context for e in examples]}]
    singles = [{"question": [e.question], "context": [e.context]} for e in examples[:3]]
    requests, names = [window] + batch + singles, ["token_ids"] + ["serving_default"] * 4
    export_dir = tmp_path / "serving" / "squad" / "3"
    with keep_served(also=list(zip(names, requests))):
        export_squad(model, tokenizer, str(export_dir), version_2_with_negative=version_2,
                     **SQUAD)
        del model  # nothing of the source is needed at load time
        report = run_fresh(str(export_dir), requests, signature=names)
    assert sorted(os.listdir(export_dir / "assets")) == ["vocab.txt"]
    assert (export_dir / "assets.extra" / "tf_serving_warmup_requests").exists()
    assert report["modules"] == []
    raw = report["results"].pop(0)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(np.reshape(raw[name]["value"], raw[name]["shape"]),
                                   logits[name][:2], rtol=1e-5, atol=1e-5)
    out = report["results"][0]
    assert out["answer"]["shape"] == [len(examples)]
    assert out["start_char"]["dtype"] == "int64" and out["score"]["dtype"] == "float32"
    if version_2:
        assert out["has_answer"]["dtype"] == "bool"
    by_id = {e.qid: i for i, e in enumerate(examples)}
    for e in kept:
        i = by_id[e.qid]
        answer = out["answer"]["value"][i]
        start, end = out["start_char"]["value"][i], out["end_char"]["value"][i]
        assert answer == expected.answers[e.qid], e.qid
        assert (start, end) == tuple(expected.spans[e.qid]), e.qid
        assert answer == (e.context[start:end] if start >= 0 else "")
        chosen = [c for c in expected.nbest[e.qid] if c["text"] == answer]
        if answer:
            want = chosen[0]["start_logit"] + chosen[0]["end_logit"]
            np.testing.assert_allclose(out["score"]["value"][i], want, rtol=1e-5, atol=1e-5)
        if version_2:
            assert out["has_answer"]["value"][i] == bool(answer)
    # Batches of 1 give what the batch gave.
    for j, single in enumerate(report["results"][1:]):
        assert single["answer"]["value"] == [out["answer"]["value"][j]]
        np.testing.assert_allclose(single["score"]["value"], [out["score"]["value"][j]],
                                   rtol=1e-5, atol=1e-5)
    # The over-long question is cut, not refused; its answer is still a substring.
    i = by_id["hard6"]
    start, end = out["start_char"]["value"][i], out["end_char"]["value"][i]
    assert out["answer"]["value"][i] == (examples[i].context[start:end] if start >= 0 else "")


def _tiny_classifier(tokenizer, labels, regression=False):
    keras.utils.set_random_seed(3)
    return build_classifier(_encoder(tokenizer), len(labels), regression=regression)


@pytest.mark.subprocess
def test_bfloat16_export_of_a_task_folder(tmp_path, sample_and_tokenizer):
    """`export_from_folder(..., dtype="bfloat16")`: bfloat16 variables (the head's output
    layer float32, as under mixed precision), answers through TF Serving's C++ loader
    close to the float32 export's, and the same `token_ids` signature."""
    from kbert.export.folder import export_from_folder, save_task_folder

    _, tokenizer = sample_and_tokenizer
    labels = ["no", "maybe", "yes"]
    save_task_folder(str(tmp_path / "run"), _tiny_classifier(tokenizer, labels), tokenizer,
                     "classifier", labels=labels, pair=False, seq_length=32)
    paths, out = {}, {}
    texts = [t for t in HARD_TEXTS if t] + ["yes", "no way"]
    for dtype in ("float32", "bfloat16"):
        with keep_served(also=[{"text": texts}]):  # answered in the exporter's C++ load
            paths[dtype] = export_from_folder(str(tmp_path / "run"), "classifier",
                                              str(tmp_path / dtype / "1"), dtype=dtype)
            out[dtype] = served_results(paths[dtype], [{"text": texts}])[0]
    reader = tf.train.load_checkpoint(os.path.join(paths["bfloat16"], "variables",
                                                   "variables"))
    dtypes = {k: v for k, v in reader.get_variable_to_dtype_map().items()
              if not k.startswith("_CHECKPOINTABLE")}
    floats = [k for k, v in dtypes.items() if v == tf.float32]
    assert sum(v == tf.bfloat16 for v in dtypes.values()) >= 20 and len(floats) == 2, floats
    np.testing.assert_allclose(out["bfloat16"]["probabilities"]["value"],
                               out["float32"]["probabilities"]["value"], atol=0.02)
    assert set(signatures(paths["bfloat16"])) == set(signatures(paths["float32"]))


LABELS = ["négatif", "neutral", "positive"]


@pytest.fixture(scope="module")
def classifier_exports(sample_and_tokenizer, tmp_path_factory):
    """{pair: (model, export dir, the tokenized inputs of the texts, `run_fresh`'s
    report)}: a tiny classifier's export for one text and for pairs, with 70 texts (and
    70 second texts), the first alone, their tf.Examples (`classify`) and their ids
    (`token_ids`) answered in both loaders; other tests share the exports."""
    _, tokenizer = sample_and_tokenizer
    root = tmp_path_factory.mktemp("classifiers")
    out = {}
    for pair in (False, True):
        model = _tiny_classifier(tokenizer, LABELS)
        export_dir = root / f"pair_{pair}" / "1"
        texts = HARD_TEXTS * 10  # 70 rows
        texts_b = (HARD_TEXTS[::-1] * 10) if pair else None
        inputs = tokenizer(texts, texts_b, seq_length=48)
        request = {"text": texts} | ({"text_b": texts_b} if pair else {})
        one = {"text": texts[:1]} | ({"text_b": texts_b[:1]} if pair else {})
        examples = [_example(text=a, **({"text_b": b} if pair else {}))
                    for a, b in zip(texts, texts_b or texts)]
        # Every signature after one load by each loader (the C++ loader's: the
        # exporter's).
        requests = [request, one, {"inputs": examples},
                    {k: v.numpy().tolist() for k, v in inputs.items()}]
        names = ["serving_default", "serving_default", "classify", "token_ids"]
        with keep_served(also=list(zip(names, requests))):
            export_classifier(model, tokenizer, str(export_dir), LABELS, pair=pair,
                              seq_length=48)
            report = run_fresh(str(export_dir), requests, signature=names)
        out[pair] = model, export_dir, inputs, report
    return out


@pytest.mark.subprocess
@pytest.mark.parametrize("pair", [False, True])
def test_classifier_export_matches_python(classifier_exports, pair):
    labels = LABELS
    model, export_dir, inputs, report = classifier_exports[pair]
    texts = HARD_TEXTS * 10
    want = tf.nn.softmax(model.predict(inputs, verbose=0)["logits"]).numpy()
    out = report["results"][0]
    probs = np.array(out["probabilities"]["value"]).reshape(out["probabilities"]["shape"])
    np.testing.assert_allclose(probs, want, rtol=1e-5, atol=1e-5)
    assert out["label_id"]["value"] == want.argmax(-1).tolist()
    assert out["label"]["value"] == [labels[k] for k in want.argmax(-1)]
    np.testing.assert_allclose(report["results"][1]["probabilities"]["value"], want[0],
                               rtol=1e-5, atol=1e-5)
    inputs_sig = signatures(str(export_dir))["serving_default"]["inputs"]
    assert inputs_sig == ({"text": ("string", [None]), "text_b": ("string", [None])} if pair
                          else {"text": ("string", [None])})
    # TF Serving's Classify API: serialized tf.Examples in, classes and scores out,
    # the same scores as serving_default's probabilities.
    assert _method_names(export_dir) == {"serving_default": "tensorflow/serving/predict",
                                         "classify": "tensorflow/serving/classify",
                                         "token_ids": "tensorflow/serving/predict"}
    classified = report["results"][2]
    assert classified["classes"]["shape"] == [len(texts), 3]
    assert classified["classes"]["value"] == labels * len(texts)
    np.testing.assert_allclose(np.reshape(classified["scores"]["value"], probs.shape), probs,
                               rtol=1e-6, atol=1e-6)
    # token_ids: the model's own inputs in, its logits out
    raw = report["results"][3]["logits"]
    logits = model.predict(inputs, verbose=0)["logits"]
    assert raw["shape"] == list(logits.shape)
    np.testing.assert_allclose(np.reshape(raw["value"], logits.shape), logits, rtol=1e-5,
                               atol=1e-5)


class _LengthProbe(keras.Model):
    """A stand-in classifier whose logits [0, log L] tell the length L it runs at:
    label 1's probability over label 0's is L."""

    def call(self, inputs, training=False):
        ids = inputs["token_ids"]
        length = tf.cast(tf.shape(ids)[1], tf.float32)
        return tf.stack([tf.zeros(tf.shape(ids)[:1]),
                         tf.fill(tf.shape(ids)[:1], tf.math.log(length))], axis=-1)


@pytest.mark.subprocess
def test_a_request_runs_at_its_longest_text_rounded_up_not_at_seq_length(
        classifier_exports, sample_and_tokenizer, tmp_path):
    """#51 item 3: the classifier export pads a request to its longest text rounded up to
    `trim_padding` (8) tokens, at most seq_length, through TF Serving's C++ loader; with
    trim_padding=0 to seq_length. The tiny classifier answers the same either way."""
    _, tokenizer = sample_and_tokenizer
    short, medium = "hello", "a long sentence that goes on " * 2
    long = medium * 15
    lengths = [int(tokenizer([t], seq_length=48)["padding_mask"][0].numpy().sum())
               for t in (short, medium)]
    assert lengths[0] <= 8 < lengths[1] <= 16, lengths
    requests = [{"text": [short]}, {"text": [short, medium]}, {"text": [medium, long]}]
    ran_at = {}
    for trim in (8, 0):
        path = str(tmp_path / f"probe_{trim}" / "1")
        with keep_served(also=requests):
            export_classifier(_LengthProbe(name="length_probe"), tokenizer, path, ["a", "b"],
                              seq_length=48, trim_padding=trim)
            served = served_results(path, requests)
        ran_at[trim] = [sorted({round(p[1] / p[0]) for p in np.reshape(
            r["probabilities"]["value"], r["probabilities"]["shape"])}) for r in served]
    assert ran_at == {8: [[8], [16], [48]], 0: [[48], [48], [48]]}
    # A real (tiny) classifier: the trimmed export's answers equal the untrimmed one's
    # (the fixture's export trims, by default).
    model, trimmed, _, _ = classifier_exports[False]
    request = {"text": [short, medium, HARD_TEXTS[0], HARD_TEXTS[3]]}
    path = str(tmp_path / "clf_0" / "1")
    with keep_served(also=[request]):
        export_classifier(model, tokenizer, path, LABELS, seq_length=48, trim_padding=0)
        answers = {0: served_results(path, [request])[0]}
    answers[8] = served_results(str(trimmed), [request])[0]
    np.testing.assert_allclose(answers[8]["probabilities"]["value"],
                               answers[0]["probabilities"]["value"], rtol=1e-5, atol=1e-6)
    assert answers[8]["label"]["value"] == answers[0]["label"]["value"]


def _example(**features) -> dict:
    """A serialized tf.Example with bytes features, as TF Serving's REST API carries
    bytes: {"b64": ...}."""
    import base64

    example = tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode("utf-8")]))
        for name, value in features.items()}))
    return {"b64": base64.b64encode(example.SerializeToString()).decode("ascii")}


def _method_names(export_dir) -> dict:
    from kbert import internals

    sm = internals.read_saved_model_proto(str(export_dir / "saved_model.pb"))
    return {name: sig.method_name for name, sig in sm.meta_graphs[0].signature_def.items()
            if not name.startswith("__")}


@pytest.mark.subprocess
def test_regression_and_embeddings_exports(tmp_path, sample_and_tokenizer):
    _, tokenizer = sample_and_tokenizer
    model = _tiny_classifier(tokenizer, ["score"], regression=True)
    texts = HARD_TEXTS
    requests = [{"text": texts, "text_b": texts[::-1]},
                {"inputs": [_example(text=a, text_b=b) for a, b in zip(texts, texts[::-1])]}]
    with keep_served(also=list(zip(["serving_default", "regress"], requests))):
        export_classifier(model, tokenizer, str(tmp_path / "reg" / "1"), pair=True,
                          regression=True, seq_length=32)
        reg = run_fresh(str(tmp_path / "reg" / "1"), requests,
                        signature=["serving_default", "regress"])
    keras.utils.set_random_seed(4)
    encoder = _encoder(tokenizer)
    with keep_served(also=[{"text": texts}]):  # answered in the exporter's C++ load
        export_embeddings(encoder, tokenizer, str(tmp_path / "emb" / "1"), seq_length=40)
        emb = served_results(str(tmp_path / "emb" / "1"), [{"text": texts}])[0]
    want = model.predict(tokenizer(texts, texts[::-1], seq_length=32), verbose=0)["score"]
    out = reg["results"][0]["score"]
    assert out["shape"] == [len(texts)]
    np.testing.assert_allclose(out["value"], want, rtol=1e-5, atol=1e-5)
    assert _method_names(tmp_path / "reg" / "1")["regress"] == "tensorflow/serving/regress"
    regressed = reg["results"][1]["outputs"]
    np.testing.assert_allclose(regressed["value"], out["value"], rtol=1e-6, atol=1e-6)

    inputs = tokenizer(texts, seq_length=40)
    ref = encoder(inputs)
    assert emb["sequence_output"]["shape"] == [len(texts), 40, 24]
    np.testing.assert_allclose(np.reshape(emb["pooled_output"]["value"], (len(texts), 24)),
                               ref["pooled_output"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        np.reshape(emb["sequence_output"]["value"], (len(texts), 40, 24)),
        ref["sequence_output"], rtol=1e-5, atol=1e-5)
    assert emb["padding_mask"]["value"] == inputs["padding_mask"].numpy().reshape(-1).tolist()


def test_op_check_names_py_function_and_newer_text_ops(tmp_path):
    class PyFn(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, text):
            return {"n": tf.py_function(lambda t: tf.strings.length(t), [text], tf.int32)}

    m = PyFn()
    tf.saved_model.save(m, str(tmp_path / "py"), signatures={"serving_default": m.serve})
    with pytest.raises(UnsupportedOpError, match="EagerPyFunc"):
        check_ops(str(tmp_path / "py"))

    import tensorflow_text as tf_text

    class Trim(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
        def serve(self, a, b):
            ids_a = tf.strings.bytes_split(a)
            ids_b = tf.strings.bytes_split(b)
            out = tf_text.RoundRobinTrimmer(8).trim([ids_a, ids_b])
            return {"n": out[0].row_lengths() + out[1].row_lengths()}

    t = Trim()
    tf.saved_model.save(t, str(tmp_path / "rr"), signatures={"serving_default": t.serve})
    assert "TFText>RoundRobinTrim" in missing_ops(str(tmp_path / "rr"), "2.19")
    assert missing_ops(str(tmp_path / "rr"), "2.20") == {}
    # The exporter refuses to leave such a model behind.
    lines = []
    assert not check(str(tmp_path / "py"), out=lines.append)
    assert any("MISSING EagerPyFunc" in line for line in lines)
    # Op types are listed with verbose only (every export printed 80-100 names); the
    # missing ones always.
    def op_lines(report):
        return [line.strip() for line in report if line.startswith("    ")
                and not line.strip().startswith(("input ", "output "))]

    assert op_lines(lines) == ["MISSING EagerPyFunc"]
    everything = []
    check(str(tmp_path / "py"), out=everything.append, verbose=True)
    assert len(op_lines(everything)) > 1 and "MISSING EagerPyFunc" in op_lines(everything)


def _newer_op_export(path, op):
    """A SavedModel using `op` ("RaggedFillEmptyRows" or "SegmentMaxV2", both new in
    TensorFlow 2.13), with its warmup request."""
    from kbert.export.warmup import write_warmup_requests

    class Newer(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, text):
            n = tf.strings.length(text)
            if op == "SegmentMaxV2":
                top = tf.raw_ops.SegmentMaxV2(data=n, segment_ids=tf.zeros_like(n),
                                              num_segments=1)
                return {"longest": tf.broadcast_to(top, tf.shape(n))}
            rows = tf.range(tf.size(n, tf.int64))
            filled = tf.raw_ops.RaggedFillEmptyRows(
                value_rowids=rows, values=n, nrows=tf.size(n, tf.int64) + 1,
                default_value=tf.constant(0))
            return {"length": filled.output_values[:-1]}

    m = Newer()
    tf.saved_model.save(m, str(path), signatures={"serving_default": m.serve})
    write_warmup_requests(str(path), "newer", [{"text": ["ab", "abc"]}])
    return str(path)


@pytest.mark.subprocess
def test_check_refuses_an_op_the_target_release_does_not_register(tmp_path):
    """The op tables are the releases' own registries: an op new in TensorFlow 2.13
    passes for 2.21 and is refused for 2.12 (exit 1, one line naming it). (SegmentMaxV2,
    the other example, has no CPU kernel in TF 2.21 at all: only XLA's.)"""
    from kbert.export.ops import core_ops, read_table

    export = _newer_op_export(tmp_path / "newer" / "1", "RaggedFillEmptyRows")
    for op in ("RaggedFillEmptyRows", "SegmentMaxV2"):
        assert op not in core_ops("2.12") and op in core_ops("2.13")
    assert missing_ops(export, "2.21") == {}
    assert set(missing_ops(export, "2.12")) == {"RaggedFillEmptyRows"}
    segment = _newer_op_export(tmp_path / "segment" / "1", "SegmentMaxV2")
    assert set(missing_ops(segment, "2.12")) == {"SegmentMaxV2"}
    with pytest.raises(UnsupportedOpError, match=r"2\.12 .*: SegmentMaxV2 \(in "):
        check_ops(segment, "2.12")
    command = [sys.executable, "-m", "kbert.export", "check", export, "--serving_version"]
    proc = subprocess.run(command + ["2.21"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    proc = subprocess.run(command + ["2.12"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    errors = [line for line in proc.stdout.splitlines() if "ERROR" in line]
    assert errors == ["  ERROR: not in the stock tensorflow_model_server 2.12: "
                      f"RaggedFillEmptyRows (used by {export})"]
    # The tables are what the releases register, not the running TensorFlow's list.
    assert len(read_table("tensorflow-2.12")) > 1000
    assert "DisableCopyOnRead" in read_table("tensorflow-2.12")
    assert "TFText>RoundRobinTrim" not in read_table("tensorflow-text-2.12.1")
    assert "TFText>RoundRobinTrim" in read_table("tensorflow-text-2.21.1")


def test_check_refuses_xla_ops_outside_a_function_xla_compiles(tmp_path):
    """XLA's own ops (here `XlaDynamicUpdateSlice`, what Keras' `ops.slice_update` is)
    run in a plain graph only by compiling them with XLA on demand, which a stock
    tensorflow_model_server disables: refused outside a `jit_compile=True` function,
    named with the function; inside one (the loops of `export_generate(...,
    jit_compile=True)`), passed."""
    import tensorflow as tf
    from keras import ops

    from kbert.export.ops import xla_only_ops

    def write(x, t):
        return ops.slice_update(x, (0, t), tf.ones([2, 1]))

    for name, jit in (("plain", False), ("compiled", True)):
        inner = tf.function(write, jit_compile=jit)
        module = tf.Module()
        module.f = tf.function(lambda x, t: inner(x, t) * 2.0, input_signature=[
            tf.TensorSpec([2, 4], tf.float32), tf.TensorSpec([], tf.int32)])
        tf.saved_model.save(module, str(tmp_path / name), signatures=module.f)
    plain, compiled = str(tmp_path / "plain"), str(tmp_path / "compiled")
    assert set(xla_only_ops(plain)) == {"XlaDynamicUpdateSlice"}
    assert xla_only_ops(compiled) == {}
    with pytest.raises(UnsupportedOpError, match=r"without --xla_cpu_compilation_enabled "
                       r"refuses to run: XlaDynamicUpdateSlice \(in __inference_write"):
        check_ops(plain, "2.21")
    assert "XlaDynamicUpdateSlice" in check_ops(compiled, "2.21")


def test_the_2_21_tables_are_the_running_tensorflows_registry():
    """The checked-in tables of the release kbert runs on equal what this process
    registers (core ops, then tensorflow-text's), attrs included: the generator reads
    what it says it reads."""
    import importlib

    importlib.import_module("tensorflow_text")  # registers its ops

    from kbert import internals
    from kbert.export.ops import read_table

    assert tf.__version__.startswith("2.21.")
    registered = internals.registered_op_names()
    core, text = read_table("tensorflow-2.21"), read_table("tensorflow-text-2.21.1")
    assert set(core) | set(text) == registered
    ops = internals.registered_op_defs()
    assert all(core[name] == frozenset(a.name for a in ops[name].attr) for name in core)


def test_the_exporter_refuses_an_op_its_target_lacks(tmp_path, sample_and_tokenizer,
                                                      monkeypatch, capsys):
    """Through export_classifier and `python -m kbert.export`: an op the target server's
    table lacks (taken out of the table here) stops the export, names the op, and leaves
    no version folder."""
    from kbert.export import __main__ as export_main
    from kbert.export import ops as ops_lib
    from kbert.export.folder import save_task_folder

    _, tokenizer = sample_and_tokenizer
    model = _tiny_classifier(tokenizer, ["no", "yes"])
    real = ops_lib.read_table

    def without_wordpiece(name):
        table = dict(real(name))
        table.pop("FastWordpieceTokenizeWithOffsets", None)
        return table

    monkeypatch.setattr(ops_lib, "read_table", without_wordpiece)
    target = tmp_path / "cls" / "1"
    with pytest.raises(UnsupportedOpError, match=r"tensorflow_model_server 2\.21 \(TensorFl"
                       r"ow 2\.21, tensorflow-text 2\.21\.1\): FastWordpieceTokenizeWithOffsets"):
        export_classifier(model, tokenizer, str(target), labels=["no", "yes"],
                          seq_length=24)
    assert not target.exists() and os.listdir(tmp_path / "cls") == []
    save_task_folder(str(tmp_path / "run"), model, tokenizer, "classifier",
                     labels=["no", "yes"], pair=False, seq_length=24)
    target = tmp_path / "cli" / "1"
    with pytest.raises(SystemExit) as exit_:
        export_main.main(["--model_dir", str(tmp_path / "run"), "--task", "classifier",
                          "--export_dir", str(target)])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {target}: not in the stock ")
    assert "FastWordpieceTokenizeWithOffsets (in " in err[0]
    assert not target.exists()


@pytest.mark.subprocess
def test_bad_requests_fail_clearly_without_killing_the_process(classifier_exports):
    export_dir = classifier_exports[False][1]
    script = r"""
import sys, tensorflow as tf, tensorflow_text
fn = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
for bad in ({}, {"text": tf.constant([1, 2])}, {"txt": tf.constant(["x"])}):
    try:
        fn(**bad)
        print("ACCEPTED", list(bad))
    except (TypeError, ValueError, tf.errors.InvalidArgumentError) as e:
        print("REJECTED", type(e).__name__, str(e).splitlines()[0][:200])
print("STILL ALIVE", fn(text=tf.constant(["ok"]))["label"].numpy().tolist())
"""
    proc = subprocess.run([sys.executable, "-c", script, str(export_dir)],
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [line.split()[0] for line in lines] == ["REJECTED"] * 3 + ["STILL"]
    assert "text" in lines[0] or "argument" in lines[0]
    assert "string" in lines[1].lower() or "dtype" in lines[1].lower()


@pytest.mark.subprocess
def test_warmup_requests_and_cli(tmp_path, sample_and_tokenizer, capsys):
    from kbert.export.__main__ import main as export_main
    from tests.conftest import run_cli

    _, tokenizer = sample_and_tokenizer
    model = _tiny_classifier(tokenizer, ["no", "yes"])
    from kbert.export.folder import save_task_folder

    save_task_folder(str(tmp_path / "run"), model, tokenizer, "classifier",
                     labels=["no", "yes"], pair=False, seq_length=24)
    export_dir = tmp_path / "base" / "mymodel" / "7"
    code, stdout, stderr = run_cli(export_main, [
        "--model_dir", tmp_path / "run", "--task", "classifier", "--export_dir", export_dir,
        "--serving_version", "2.19"], capsys)
    assert code == 0, stderr[-3000:]
    # Every signature is warmed (#51 item 5): serving_default's six requests, then a
    # Classify request of tf.Examples and a token_ids request, all through both loaders.
    assert "OK: 8 warmup requests answered" in stdout
    from kbert.export.warmup import read_warmup_requests

    warm = read_warmup_requests(str(export_dir), with_signatures=True)
    assert [name for name, _ in warm] == ["serving_default"] * 6 + ["classify", "token_ids"]
    assert len(warm[6][1]["inputs"]) == len(warm[5][1]["text"])  # the batch, as Examples
    assert tf.train.Example.FromString(warm[6][1]["inputs"][0]).features.feature[
        "text"].bytes_list.value == [warm[5][1]["text"][0]]
    assert set(warm[7][1]) == {"token_ids", "segment_ids", "padding_mask"}
    assert "warmup request (classify), batch 5" in stdout
    # A check checks: no batching file unless asked for (#50: it always wrote one).
    assert not (tmp_path / "base" / "mymodel" / "batching_parameters.txt").exists()
    # The ops are checked against 2.19's own registry (read from its wheel), with no
    # warning: an export of TF 2.21 runs on TF Serving 2.19 when its ops are there.
    assert ("has 0 of them" not in stdout and "(read from TensorFlow 2.19 and "
            "tensorflow-text 2.12.1)" in stdout and "WARNING" not in stdout)
    from kbert.export.ops import saved_model_ops, serving_ops, strip_for_release

    # TF 2.21's exports call DisableCopyOnRead in their restore functions; TensorFlow
    # 2.12's registry has it (op_tables/tensorflow-2.12.txt). What 2.12 lacks is the
    # `debug_name` attr TF 2.15 gave VarHandleOp: an export for 2.19 keeps it, so the
    # check for 2.12 refuses it, naming the attr and the way out.
    assert "DisableCopyOnRead" in saved_model_ops(str(export_dir))
    assert "DisableCopyOnRead" in serving_ops("2.12")
    assert set(missing_ops(str(export_dir), "2.12")) == {"VarHandleOp.debug_name"}
    code, stdout, _ = run_cli(export_main, ["check", export_dir, "--serving_version", "2.12"],
                              capsys)
    assert code == 1 and "VarHandleOp.debug_name" in stdout
    assert "export again with --serving_version 2.12" in stdout
    # What the exporter does for --serving_version 2.12 (the same model, the attr left
    # out): the check for 2.12 passes, warmup replay through the C++ loader included,
    # with no word of DisableCopyOnRead.
    for_2_12 = tmp_path / "base" / "mymodel" / "8"
    shutil.copytree(export_dir, for_2_12)
    assert strip_for_release(str(for_2_12), "2.12") == ["VarHandleOp.debug_name"]
    assert missing_ops(str(for_2_12), "2.12") == {}
    code, stdout, _ = run_cli(export_main, ["check", for_2_12, "--serving_version", "2.12",
                                            "--batching_file"], capsys)
    assert code == 0, stdout[-3000:]
    assert "DisableCopyOnRead" not in stdout and "WARNING" not in stdout
    # Asked with --batching_file, the check wrote TF Serving's batching parameters,
    # beside the versions.
    batching_file = tmp_path / "base" / "mymodel" / "batching_parameters.txt"
    params = _parse_batching_parameters(batching_file.read_text())
    assert params.max_batch_size.value == params.allowed_batch_sizes[-1] >= 1
    assert list(params.allowed_batch_sizes) == [
        2 ** i for i in range(len(params.allowed_batch_sizes))]
    assert params.batch_timeout_micros.value >= 100 and params.num_batch_threads.value >= 1
    assert f"--enable_batching --batching_parameters_file={batching_file}" in stdout
    # An existing version folder is refused (TF Serving would not reload it).
    again = ["--model_dir", tmp_path / "run", "--task", "classifier", "--export_dir",
             export_dir, "--no_check"]
    code, _, stderr = run_cli(export_main, again, capsys)
    assert code == 2 and stderr.strip().splitlines()[-1] == (
        f"error: --export_dir {export_dir}: exists already (TF Serving would not load a "
        "changed model under a version it has); use a new version number or --overwrite")
    code, _, stderr = run_cli(export_main, again + ["--overwrite"], capsys)
    assert code == 0, stderr[-3000:]
    # The wrong task for the folder is refused by name.
    code, _, stderr = run_cli(export_main, ["--model_dir", tmp_path / "run", "--task",
                                            "squad", "--export_dir", tmp_path / "x" / "1"],
                              capsys)
    assert code != 0 and "'classifier' model cannot be exported" in stderr
    assert not (tmp_path / "x" / "1").exists()
    shutil.rmtree(tmp_path / "run")  # the export needs nothing of the run folder
    out = run_c_loader(str(export_dir), [{"text": ["é 北京 🙂", ""]}])["results"][0]
    assert out["label"]["value"][0] in ("no", "yes") and out["label"]["shape"] == [2]
    requests = read_warmup_requests(str(export_dir))
    assert len(requests) == 8 and set(requests[0]) == {"text"}
    from tensorflow_serving.apis import prediction_log_pb2

    record = next(iter(tf.data.TFRecordDataset(
        str(export_dir / "assets.extra" / "tf_serving_warmup_requests"))))
    log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
    assert log.predict_log.request.model_spec.name == "mymodel"
    assert log.predict_log.request.model_spec.signature_name == "serving_default"


@pytest.mark.subprocess  # the export replays its warmup through the C loader
def test_pair_requests_of_different_batch_sizes_fail_clearly(classifier_exports):
    fn = tf.saved_model.load(str(classifier_exports[True][1])).signatures["serving_default"]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="text and text_b must have the same batch size"):
        fn(text=tf.constant(["a"]), text_b=tf.constant(["b", "c"]))
    assert fn(text=tf.constant(["a", "x"]), text_b=tf.constant(["b", "c"]))[
        "label"].shape == (2,)


def _parse_batching_parameters(text: str):
    """`text` parsed as TF Serving's BatchingParameters message, built here from the
    fields of tensorflow/serving's `session_bundle_config.proto` (the message is not in
    the tensorflow-serving-api wheel): an unknown field or a wrong type fails."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from google.protobuf import text_format, wrappers_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    f = descriptor_pb2.FileDescriptorProto(name="batching.proto", package="tensorflow.serving",
                                           dependency=["google/protobuf/wrappers.proto"])
    m = f.message_type.add(name="BatchingParameters")
    F = descriptor_pb2.FieldDescriptorProto
    for number, name, wrapper in ((1, "max_batch_size", "Int64Value"),
                                  (2, "batch_timeout_micros", "Int64Value"),
                                  (3, "max_enqueued_batches", "Int64Value"),
                                  (4, "num_batch_threads", "Int64Value"),
                                  (5, "thread_pool_name", "StringValue")):
        m.field.add(name=name, number=number, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=f".google.protobuf.{wrapper}")
    m.field.add(name="allowed_batch_sizes", number=6, type=F.TYPE_INT64,
                label=F.LABEL_REPEATED)
    m.field.add(name="pad_variable_length_inputs", number=7, type=F.TYPE_BOOL,
                label=F.LABEL_OPTIONAL)
    pool.Add(f)
    cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))
    return text_format.Parse(text, cls())


def test_batching_parameters_follow_the_sweep():
    from kbert.export import batching

    # ms per call at 1, 2, 4, 8, 16 -> per example 10, 6, 4, 3.75, 3.6: doubling from 4
    # to 8 buys 7% (< 10%), so 4 is the largest batch worth waiting for.
    times = {1: 0.010, 2: 0.012, 4: 0.016, 8: 0.030, 16: 0.058}
    params = batching.choose(times, cpus=2)
    assert params == {"max_batch_size": 4, "batch_timeout_micros": 2500,
                      "max_enqueued_batches": 100, "num_batch_threads": 2,
                      "allowed_batch_sizes": [1, 2, 4], "pad_variable_length_inputs": True}
    parsed = _parse_batching_parameters(batching.to_text(params))
    assert parsed.max_batch_size.value == 4 and list(parsed.allowed_batch_sizes) == [1, 2, 4]
    assert parsed.pad_variable_length_inputs
    # Batching that buys nothing: batch 1 only.
    assert batching.choose({1: 0.01, 2: 0.02, 4: 0.04}, cpus=1)["max_batch_size"] == 1
