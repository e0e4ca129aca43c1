"""Training runtime: strategies, precision, XLA, optimizers, resumable checkpoints."""

import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert import training
from kbert.tasks.glue import build_classifier
from tests import train_script

SCRIPT = os.path.join(os.path.dirname(__file__), "train_script.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _train_losses(strategy, steps=6, jit=False, batch=16, dropout=0.0, examples=None,
                  trim=0):
    """Per-step training losses of the tiny BERT classifier under `strategy`."""
    keras.utils.set_random_seed(0)
    examples = train_script.examples() if examples is None else examples
    with strategy.scope():
        model = train_script.build(dropout, max_positions=examples.element_spec[0][
            "token_ids"].shape[0])
        training.compile_model(
            model, training.create_optimizer(1e-3, steps, 2),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
    data = training.finalize_dataset(examples, batch, training=True, seed=0, trim=trim)
    losses = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]))

    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False,
              callbacks=[Record()])
    return np.array(losses), model


# ------------------------------------------------------------------ strategies
def test_resolve_strategy_names():
    assert isinstance(training.resolve_strategy("cpu"), tf.distribute.OneDeviceStrategy)
    mirrored = training.resolve_strategy("mirrored")
    assert training.resolve_strategy("mirrored") is mirrored  # one per process
    assert isinstance(mirrored, tf.distribute.MirroredStrategy)
    assert mirrored.num_replicas_in_sync == 2  # the two logical CPUs of conftest
    assert training.resolve_strategy("auto") is tf.distribute.get_strategy()
    with pytest.raises(ValueError, match="--strategy='gpus'"):
        training.resolve_strategy("gpus")
    if not tf.config.list_logical_devices("GPU"):
        with pytest.raises(ValueError, match="sees no GPU"):
            training.resolve_strategy("gpu")


def test_multi_worker_needs_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs TF_CONFIG"):
        training.resolve_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        training.resolve_strategy("multi_worker")


def _count_fused_updates(monkeypatch):
    """Counts (at trace time) the fused AdamW kernels the optimizer builds."""
    calls = []
    op = tf.raw_ops.ResourceApplyAdam
    monkeypatch.setattr(tf.raw_ops, "ResourceApplyAdam",
                        lambda **kw: calls.append("ResourceApplyAdam") or op(**kw))
    return calls


@pytest.mark.e2e
def test_mirrored_two_replicas_follows_default_strategy(monkeypatch):
    calls = _count_fused_updates(monkeypatch)
    default, _ = _train_losses(tf.distribute.get_strategy())
    mirrored, _ = _train_losses(training.resolve_strategy("mirrored"))
    # Both ran the fused AdamW (one Adam kernel per variable and replica).
    assert calls.count("ResourceApplyAdam") >= 3 * len(train_script.build(0.0).weights)
    assert len(default) == 6
    np.testing.assert_allclose(mirrored[:2], default[:2], rtol=1e-6)
    # Later steps differ in the last bits (the all-reduce sums in another order), and
    # Adam's early updates (about lr * sign(g)) enlarge that a little.
    np.testing.assert_allclose(mirrored, default, rtol=1e-3)


@pytest.mark.e2e
def test_trimmed_batches_train_as_padded_ones_also_on_two_replicas():
    """Six steps on batches cut to their longest row lose as on the padded batches, on
    one replica and on two (which share each cut batch)."""
    lengths = np.random.default_rng(1).integers(2, 20, 256)
    lengths[::24] = 60
    x = _padded_batch(lengths, seq=64)
    y = (x["token_ids"][:, 1] > 25).astype("int32")
    examples = tf.data.Dataset.from_tensor_slices((x, y))
    padded, _ = _train_losses(tf.distribute.get_strategy(), examples=examples)
    trimmed, _ = _train_losses(tf.distribute.get_strategy(), examples=examples, trim=16)
    np.testing.assert_allclose(trimmed, padded, rtol=1e-5)
    # Another model (another size) after the first one under the same process's
    # MirroredStrategy: a fresh MirroredStrategy would fail here (TF #62790).
    _train_losses(training.resolve_strategy("mirrored"), steps=2)
    mirrored, _ = _train_losses(training.resolve_strategy("mirrored"), examples=examples,
                                trim=16)
    np.testing.assert_allclose(mirrored[:2], trimmed[:2], rtol=1e-6)
    np.testing.assert_allclose(mirrored, trimmed, rtol=1e-3)


def test_task_commands_trim_except_on_tpu_and_multi_worker(caplog):
    from kbert.tasks.common import trim_multiple

    assert trim_multiple(16, tf.distribute.get_strategy(), 64) == 16
    assert trim_multiple(16, training.resolve_strategy("mirrored"), 64) == 16
    multi_worker = tf.distribute.MultiWorkerMirroredStrategy.__new__(
        tf.distribute.MultiWorkerMirroredStrategy)  # the type is what is checked
    with caplog.at_level("INFO"):
        assert trim_multiple(16, multi_worker, 64) == 0
    assert "multi_worker: batches keep max_seq_length=64" in caplog.text
    assert trim_multiple(0, multi_worker, 64) == 0


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.mark.subprocess
def test_multi_worker_two_processes_agree(tmp_path):
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for i in range(2):
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster,
                                                      "task": {"type": "worker", "index": i}}),
               "PYTHONPATH": ROOT}
        procs.append(subprocess.Popen(
            [sys.executable, SCRIPT, str(tmp_path / f"w{i}"), "--strategy", "multi_worker",
             "--total_steps", "4", "--steps_per_loop", "2"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
        assert "done" in out
    w0 = np.load(tmp_path / "w0" / "weights.npz")
    w1 = np.load(tmp_path / "w1" / "weights.npz")
    assert len(w0.files) == len(w1.files) > 10
    for name in w0.files:
        np.testing.assert_array_equal(w0[name], w1[name])
    initial = train_script.build(0.0)  # and training moved them
    assert not np.allclose(w0["arr_0"], initial.trainable_variables[0].numpy())


# ------------------------------------------------------------------ XLA, precision
@pytest.mark.e2e
def test_xla_loses_like_the_default_path():
    eager, _ = _train_losses(tf.distribute.get_strategy(), jit=False)
    xla, model = _train_losses(tf.distribute.get_strategy(), jit=True)
    assert model.jit_compile
    np.testing.assert_allclose(xla, eager, atol=1e-4)


@pytest.mark.e2e
def test_bfloat16_mixed_precision_loses_like_float32():
    full, _ = _train_losses(tf.distribute.get_strategy())
    try:
        assert training.set_precision("mixed_bfloat16") == "mixed_bfloat16"
        mixed, model = _train_losses(tf.distribute.get_strategy())
        assert model.layers[-1].compute_dtype == "float32"  # the float32 head
        encoder = model.layers[3]
        assert encoder.compute_dtype == "bfloat16"
        assert all(v.dtype == "float32" for v in model.trainable_variables)
    finally:
        training.set_precision(None)
    np.testing.assert_allclose(mixed, full, atol=0.03)
    assert training.set_precision("auto") in ("mixed_float16", "mixed_bfloat16")
    training.set_precision(None)
    with pytest.raises(ValueError, match="--mixed_precision='fp8'"):
        training.set_precision("fp8")


@pytest.mark.e2e
def test_static_shapes_and_xla_train_step_for_tpu():
    """What a TPU needs, checked on CPU: fixed shapes and an XLA-compiled step."""
    data = training.finalize_dataset(train_script.examples(), 16, training=True, seed=0)
    x_spec, y_spec = data.element_spec
    assert all(s.shape.is_fully_defined() for s in x_spec.values())
    assert y_spec.shape.as_list() == [16]
    model = train_script.build(0.1)
    training.compile_model(model, training.create_optimizer(1e-3, 4),
                           keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                           jit_compile=True, steps_per_execution=2)
    model.fit(data, steps_per_epoch=4, epochs=1, verbose=0, shuffle=False)
    assert model.jit_compile and model.steps_per_execution == 2


def test_compile_model_refuses_silent_xla_fallback():
    class NoJit(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.supports_jit = False

        def call(self, x):
            return x

    inputs = keras.Input((3,))
    model = keras.Model(inputs, NoJit(name="host_only")(keras.layers.Dense(2)(inputs)))
    with pytest.raises(RuntimeError, match=r"XLA off: layers without XLA support: \['host_only'\]"):
        training.compile_model(model, "adam", "mse", jit_compile=True)


def _padded_batch(lengths, seq=128, vocab=50, seed=0):
    """Encoder inputs whose row i has lengths[i] real tokens, then padding (id 0)."""
    rng = np.random.default_rng(seed)
    mask = (np.arange(seq)[None] < np.array(lengths)[:, None]).astype("int32")
    ids = rng.integers(5, vocab, (len(lengths), seq)).astype("int32") * mask
    segments = (np.arange(seq)[None] >= np.array(lengths)[:, None] // 2).astype("int32") * mask
    return {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}


@pytest.mark.parametrize("lengths,kept", [
    ([5, 37, 12], 64), ([1, 2], 32), ([0, 0], 32), ([128, 3], 128), ([96, 64], 96)])
def test_trim_padding_cuts_only_padding_every_row_has(lengths, kept):
    x = dict(_padded_batch(lengths), label_weight=np.ones((len(lengths), 3), "float32"))
    # ELMo's character ids [b, seq, chars] are cut along the sequence too.
    x["char_ids"] = (np.arange(1, 5)[None, None, :] * x["padding_mask"][:, :, None]
                     ).astype("int32")
    got = {k: np.asarray(v) for k, v in training.trim_padding(x, 32).items()}
    assert got["token_ids"].shape == (len(lengths), kept)
    for k in training.ENCODER_INPUTS:
        np.testing.assert_array_equal(got[k], x[k][:, :kept])
        assert not x["padding_mask"][:, kept:].any() and not x[k][:, kept:].any()
    np.testing.assert_array_equal(got["label_weight"], x["label_weight"])  # not a [b, seq] input
    # A real token after a gap (a mask that is not left-aligned) is never cut.
    holed = _padded_batch([3, 3])
    holed["padding_mask"][1, 100] = 1
    assert training.trim_padding(holed, 32)["padding_mask"].shape == (2, 128)
    with pytest.raises(ValueError, match="multiple=0"):
        training.trim_padding(x, 0)
    # The throughput log's tokens per batch are real ones: the mean row length x batch.
    assert training.real_tokens_per_batch(x["padding_mask"], 8) == pytest.approx(
        np.mean(lengths) * 8)


def test_trimmed_batches_give_the_same_outputs_and_gradients():
    """For a [CLS] output, cutting common padding is the same function (no dropout)."""
    keras.utils.set_random_seed(0)
    cfg = kbert.BertConfig(vocab_size=50, hidden_size=16, num_layers=2, num_heads=2,
                           intermediate_size=24, max_position_embeddings=128, dropout=0.0,
                           attention_dropout=0.0)
    model = build_classifier(kbert.BertEncoder(cfg), 3)
    x = _padded_batch([7, 40, 19, 2])
    trimmed = training.trim_padding(x, 32)
    assert trimmed["token_ids"].shape == (4, 64)
    y = tf.constant([0, 2, 1, 1])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def logits_and_gradients(inputs):
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)["logits"]
            value = loss(y, logits)
        return logits, tape.gradient(value, model.trainable_variables)

    full_logits, full_grads = logits_and_gradients(x)
    cut_logits, cut_grads = logits_and_gradients(trimmed)
    np.testing.assert_allclose(cut_logits, full_logits, rtol=1e-5, atol=1e-6)
    for v, a, b in zip(model.trainable_variables, cut_grads, full_grads):
        a, b = tf.convert_to_tensor(a), tf.convert_to_tensor(b)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=v.path)


@pytest.mark.e2e
def test_trimmed_dataset_trains_with_xla():
    """Batches of several lengths through one compiled `fit`, several steps per call
    (XLA compiles each shape)."""
    lengths = np.random.default_rng(0).integers(1, 30, 64)
    lengths[::16] = 100  # a few batches hold a long row
    x = _padded_batch(lengths, seq=128)
    y = (x["token_ids"][:, 1] > 25).astype("int32")
    data = training.finalize_dataset(tf.data.Dataset.from_tensor_slices((x, y)), 8,
                                     training=True, seed=0, trim=32)
    seen = {int(b["token_ids"].shape[1]) for b, _ in data.take(8)}
    assert seen == {32, 128}
    model = train_script.build(0.1, max_positions=128)
    training.compile_model(model, training.create_optimizer(1e-3, 8),
                           keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                           jit_compile=True, steps_per_execution=4)
    history = model.fit(data, steps_per_epoch=8, epochs=1, verbose=0, shuffle=False)
    assert model.jit_compile and np.isfinite(history.history["loss"]).all()


# ------------------------------------------------------------------ optimizers
def test_warmup_linear_decay_formula():
    s = training.WarmupLinearDecay(2e-5, total_steps=1000, warmup_steps=100)
    for step, want in [(0, 0.0), (50, 1e-5), (99, 2e-5 * 99 / 100), (100, 2e-5 * 0.9),
                       (550, 2e-5 * 0.45), (1000, 0.0), (5000, 0.0)]:
        np.testing.assert_allclose(float(s(step)), want, rtol=1e-5, atol=1e-12)
    again = training.WarmupLinearDecay.from_config(s.get_config())
    assert float(again(300)) == float(s(300))
    with pytest.raises(ValueError, match="warmup_steps=20"):
        training.WarmupLinearDecay(1.0, 10, 20)


def test_fused_adamw_equals_keras_adamw(monkeypatch):
    """kbert's AdamW (one fused kernel per variable) follows Keras' AdamW: dense and
    embedding (IndexedSlices) gradients, weight decay with exclusions, the schedule."""
    calls = _count_fused_updates(monkeypatch)
    shapes = {"dense/kernel": (7, 4), "dense/bias": (4,), "word_embeddings/embeddings": (6, 4)}
    schedule = training.WarmupLinearDecay(0.05, 10, 2)

    def train(cls, densify):
        rng = np.random.default_rng(0)
        variables = [keras.Variable(rng.standard_normal(s).astype("float32"),
                                    name=n.split("/")[1]) for n, s in shapes.items()]
        opt = cls(schedule, weight_decay=0.3, epsilon=1e-6)
        opt.exclude_from_weight_decay(var_names=training.NO_DECAY_NAMES)
        opt.build(variables)
        step = tf.function(lambda grads: opt.apply(grads, variables))
        for _ in range(6):
            grads = [tf.constant(rng.standard_normal(s).astype("float32"))
                     for s in list(shapes.values())[:2]]
            grads.append(tf.IndexedSlices(  # token 2 twice, token 5 once
                tf.constant(rng.standard_normal((3, 4)).astype("float32")),
                tf.constant([2, 5, 2]), tf.constant([6, 4])))
            step([tf.convert_to_tensor(g) for g in grads] if densify else grads)
        return [v.numpy() for v in variables + list(opt.variables)]

    want = train(keras.optimizers.AdamW, densify=True)
    got = train(training.AdamW, densify=False)
    assert calls.count("ResourceApplyAdam") == 3
    for keras_value, fused_value in zip(want, got):
        np.testing.assert_allclose(fused_value, keras_value, rtol=1e-5, atol=2e-6)
    assert np.abs(got[0] - np.random.default_rng(0).standard_normal((7, 4))).max() > 0.1
    # Keras' own AdamW, given the IndexedSlices, squares each duplicate row before
    # summing them: the second moment of token 2 is not that of its gradient.
    keras_sparse = train(keras.optimizers.AdamW, densify=False)
    assert np.abs(keras_sparse[2][2] - want[2][2]).max() > 1e-3
    np.testing.assert_allclose(keras_sparse[2][[0, 1, 3, 4, 5]], want[2][[0, 1, 3, 4, 5]],
                               rtol=1e-5, atol=2e-6)


def test_weight_decay_skips_layer_norm_and_bias():
    model = train_script.build(0.0)
    opt = training.create_optimizer(0.1, 10, 0, weight_decay=0.5)
    # A zero loss: Adam's update is 0, so only decoupled weight decay moves weights.
    model.compile(opt, loss=lambda y, p: keras.ops.sum(p) * 0.0)
    before = {v.path: v.numpy() for v in model.trainable_variables}
    x, y = next(iter(training.finalize_dataset(train_script.examples(), 8, True, seed=0)))
    model.train_on_batch(x, y)
    decayed, kept = set(), set()
    for v in model.trainable_variables:
        (kept if np.array_equal(v.numpy(), before[v.path]) else decayed).add(v.path)
        if v.path in decayed:  # by the exact factor 1 - lr * wd at step 0
            np.testing.assert_allclose(v.numpy(), before[v.path] * (1 - 0.1 * 0.5), rtol=1e-6)
    assert kept and decayed
    assert all(p.endswith(("/bias", "/gamma", "/beta")) for p in kept), kept
    assert all(p.endswith(("/kernel", "/embeddings")) for p in decayed), decayed
    layer_norms = [p for p in before if "layer_norm" in p.lower() or "LayerNorm" in p]
    assert layer_norms and not set(layer_norms) & decayed


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_accumulation_equals_a_larger_batch(name):
    data = iter(training.finalize_dataset(train_script.examples(), 8, True, seed=0))
    (x1, y1), (x2, y2) = next(data), next(data)
    x_big = {k: tf.concat([x1[k], x2[k]], 0) for k in x1}
    y_big = tf.concat([y1, y2], 0)
    weights, moments = [], []
    for accumulate in (2, 1):
        keras.utils.set_random_seed(0)
        model = train_script.build(0.0)
        opt = training.create_optimizer(1e-2, 10, 0, optimizer=name, clip_norm=0.5,
                                        gradient_accumulation_steps=accumulate)
        # Adam's first update is about lr * sign(g), which turns float rounding in
        # near-zero gradients into full-size differences; a large epsilon makes the
        # update smooth in g, so the comparison tests accumulation, not rounding.
        opt.epsilon = 1.0
        model.compile(opt, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        if accumulate == 2:
            model.train_on_batch(x1, y1)
            model.train_on_batch(x2, y2)
        else:
            model.train_on_batch(x_big, y_big)
        assert int(opt.iterations.numpy()) == 1  # one update either way
        weights.append([v.numpy() for v in model.trainable_variables])
        # First moments after one update: (1 - beta_1) * the clipped mean gradient.
        moments.append([v.numpy() for v in opt.variables if v.path.endswith("_momentum")])
    assert len(moments[0]) == len(weights[0]) > 10
    for a, b in zip(*moments):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-8)
    assert max(np.abs(m).max() for m in moments[0]) > 1e-4
    if name == "adamw":
        # LAMB rescales each variable's update to lr * |w| (the trust ratio), so a
        # variable whose gradient is only rounding noise moves by a full step in a
        # noise direction; its weights are compared through the moments above.
        for a, b in zip(*weights):
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_clipping_uses_the_true_norm_of_embedding_gradients():
    """A token seen twice gives two gradient rows; clipping must use their sum's norm."""
    grad = tf.IndexedSlices(tf.constant([[3.0, 0.0], [3.0, 0.0], [0.0, 4.0]]),
                            tf.constant([1, 1, 2]), tf.constant([5, 2]))
    dense = tf.convert_to_tensor(grad)  # rows summed: norm sqrt(36 + 16), not sqrt(34)
    var = keras.Variable(np.zeros((5, 2), "float32"))
    for clip_norm, want in [(100.0, dense.numpy()), (1.0, dense.numpy() / np.sqrt(52.0))]:
        opt = training.create_optimizer(1.0, 10, clip_norm=clip_norm)
        opt.build([var])
        clipped = opt._clip_gradients([grad])[0]
        np.testing.assert_allclose(tf.convert_to_tensor(clipped).numpy(), want, rtol=1e-6)


def test_clipping_equals_keras_and_leaves_small_gradients_alone():
    rng = np.random.default_rng(0)
    variables = [keras.Variable(np.zeros(s, "float32")) for s in [(5, 3), (3,)]]
    opt = training.create_optimizer(1.0, 10, clip_norm=2.0)
    opt.build(variables)
    for size in (0.1, 10.0):  # global norm below, then above the clip norm
        grads = [tf.constant(rng.standard_normal(v.shape).astype("float32") * size)
                 for v in variables]
        want = keras.optimizers.AdamW(global_clipnorm=2.0)._clip_gradients(grads)
        got = opt._clip_gradients(grads + [None])
        assert got[-1] is None
        for g, w, raw in zip(got, want, grads):
            np.testing.assert_allclose(g, w, rtol=1e-6)
            if size < 1:
                np.testing.assert_array_equal(g, raw)
        assert float(tf.linalg.global_norm(got[:2])) == pytest.approx(min(
            2.0, float(tf.linalg.global_norm(grads))), rel=1e-6)
    bad = [tf.constant([[np.inf, 1.0, 0.0]] * 5), tf.constant([1.0, 2.0, 3.0])]
    assert all(np.isnan(g.numpy()).all() for g in opt._clip_gradients(bad))


@pytest.mark.xla
def test_xla_step_of_a_wide_classifier_with_clipping():
    """XLA needs the row count of an embedding gradient as a constant. From this width
    on (not for the tiny models above), the gradient that leaves the clipping cond
    no longer has it, and the step failed to compile ("must be a compile-time
    constant"); the optimizer now takes it from the variable's static shape."""
    from kbert import BertConfig, BertEncoder
    from kbert.tasks.glue import build_classifier

    config = BertConfig(vocab_size=50, hidden_size=512, num_layers=1, num_heads=8,
                        intermediate_size=2048, max_position_embeddings=16)
    classifier = build_classifier(BertEncoder(config), 2)
    model = keras.Model(classifier.input, classifier.output["logits"])
    training.compile_model(model, training.create_optimizer(1e-3, 10),
                           keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                           jit_compile=True)
    x, y = next(iter(training.finalize_dataset(train_script.examples(), 8, True, seed=0)))
    before = model.trainable_variables[0].numpy()
    assert np.isfinite(model.train_on_batch(x, y))
    assert np.abs(model.trainable_variables[0].numpy() - before).max() > 0


def test_unknown_optimizer():
    with pytest.raises(ValueError, match="optimizer='sgd'"):
        training.create_optimizer(1e-3, 10, optimizer="sgd")


# ------------------------------------------------------------------ checkpoints
def _run_script(out, *args, **popen):
    return subprocess.Popen([sys.executable, SCRIPT, str(out), *args],
                            env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen)


@pytest.mark.subprocess
def test_killed_run_resumes_at_the_same_step_exactly(tmp_path):
    common = ["--total_steps", "12", "--steps_per_loop", "3", "--dropout", "0.1"]
    ref = _run_script(tmp_path / "ref", *common)
    out = ref.communicate(timeout=300)[0]
    assert ref.returncode == 0, out[-3000:]

    ckpt = tmp_path / "ckpt"
    victim = _run_script(tmp_path / "victim", *common, "--checkpoint_dir", str(ckpt),
                         "--step_sleep", "0.3")
    deadline = time.time() + 240
    while (training.latest_step(str(ckpt)) or 0) < 6:
        assert victim.poll() is None and time.time() < deadline, victim.communicate()[0][-3000:]
        time.sleep(0.1)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed_at = training.latest_step(str(ckpt))
    assert 6 <= killed_at < 12
    # Every checkpoint the index lists is complete and readable.
    state = tf.train.get_checkpoint_state(str(ckpt))
    for path in state.all_model_checkpoint_paths:
        reader = tf.train.load_checkpoint(path)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)

    resumed = _run_script(tmp_path / "victim", *common, "--checkpoint_dir", str(ckpt))
    out = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, out[-3000:]
    assert f"at step {killed_at}" in out
    losses = (tmp_path / "victim" / "losses.txt").read_text().split()
    assert len(losses) == 12 - killed_at
    want = np.load(tmp_path / "ref" / "weights.npz")
    got = np.load(tmp_path / "victim" / "weights.npz")
    for name in want.files:
        np.testing.assert_allclose(got[name], want[name], atol=1e-6)
    assert training.latest_step(str(ckpt)) == 12
    assert len(state.all_model_checkpoint_paths) <= 3  # keep-last-N


def test_completed_run_is_not_repeated(tmp_path):
    model = train_script.build(0.0)
    training.compile_model(model, training.create_optimizer(1e-3, 4),
                           keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = training.finalize_dataset(train_script.examples(), 16, True, seed=0)
    history = training.fit(model, data, 4, 2, checkpoint_dir=str(tmp_path), verbose=0,
                           examples_per_step=16, tokens_per_step=16 * 12,
                           tensorboard_dir=str(tmp_path / "tb"))
    assert len(history.history["loss"]) == 2
    assert os.listdir(tmp_path / "tb")
    assert training.fit(model, data, 4, 2, checkpoint_dir=str(tmp_path), verbose=0) is None


def test_runtime_flags_resolve_and_build():
    import argparse

    parser = argparse.ArgumentParser()
    training.add_runtime_flags(parser)
    args = parser.parse_args(["--strategy", "cpu", "--jit_compile",
                              "--steps_per_execution", "3"])
    runtime = training.Runtime.from_flags(args)
    assert runtime.precision == "float32" and runtime.strategy.num_replicas_in_sync == 1
    model = runtime.build(lambda: train_script.build(0.0),
                          lambda: training.create_optimizer(1e-3, 4), "mse")
    assert model.jit_compile and model.steps_per_execution == 3
    assert model.distribute_strategy is runtime.strategy
    assert parser.parse_args(["--mixed_precision"]).mixed_precision == "auto"
    with pytest.raises(SystemExit):
        parser.parse_args(["--strategy", "horovod"])


def test_mirrored_with_xla_is_a_clear_error():
    """Keras XLA-compiles the cross-replica update too, which fails on other devices'
    variables (keras-hub #949, keras #18110): refuse up front, naming the cause."""
    with pytest.raises(RuntimeError, match="MirroredStrategy over 2 local devices"):
        _train_losses(training.resolve_strategy("mirrored"), jit=True)


def test_total_steps_are_the_steps_asked_for():
    """#50: total steps are no longer rounded up to whole loops (8 epochs of `make demo`
    trained 9.09: 1,408 steps became 1,600); only to whole executions."""
    assert training.whole_loops(1013, 200) == (1013, 200)  # 1013 is prime: 6 loops
    assert training.whole_loops(600, 200) == (600, 200)
    assert training.whole_loops(7, 200) == (7, 7)
    # An execution is whole: 7 steps at 4 per execution train 8.
    assert training.whole_loops(7, 200, multiple=4) == (8, 8)
    assert training.whole_loops(1013, 200, multiple=8) == (1016, 200)
    with pytest.raises(ValueError, match="steps_per_loop=6 is not a multiple of "
                                         "steps_per_execution=4"):
        training.whole_loops(100, 6, multiple=4)
    import argparse

    # ceil(epochs x examples / batch): 3 epochs of 56 rows at 32 are 5.25 -> 6 steps;
    # --max_steps overrides the epochs, as in transformers' run_glue.py.
    args = argparse.Namespace(num_train_epochs=3.0, max_steps=-1)
    assert training.train_steps(args, 56, 32) == 6
    assert training.train_steps(argparse.Namespace(num_train_epochs=2.0, max_steps=-1),
                                64, 32) == 4
    assert training.train_steps(argparse.Namespace(num_train_epochs=3.0, max_steps=5),
                                56, 32) == 5


def test_the_last_loop_is_shorter_and_a_rerun_sees_a_complete_run(tmp_path):
    """7 steps in loops of 3: 3 + 3 + 1 steps trained, checkpoints at 3, 6 and 7."""
    model = train_script.build(0.0)
    training.compile_model(model, training.create_optimizer(1e-3, 7),
                           keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = training.finalize_dataset(train_script.examples(), 4, True, seed=0)
    seen = []

    class Count(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(batch)

    training.fit(model, data, 7, 3, checkpoint_dir=str(tmp_path), verbose=0,
                 keep_checkpoints=5, callbacks=[Count()])
    assert len(seen) == 7 and int(model.optimizer.iterations.numpy()) == 7
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths] == [3, 6, 7]
    assert training.fit(model, data, 7, 3, checkpoint_dir=str(tmp_path), verbose=0) is None


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _fit_with_progress(steps_per_execution, stream, caplog, throughput_every=6):
    from kbert.training.loop import Progress, Throughput

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
    data = tf.data.Dataset.from_tensor_slices(
        (np.ones((8, 3), "float32"), np.ones((8, 1), "float32"))).batch(4).repeat()
    # 24 steps, 8 an epoch (3 epochs), Keras "epochs" (checkpoint loops) of 12 steps.
    progress = Progress(24, 8, every=2, examples_per_step=4, stream=stream)
    throughput = Throughput(4, every=throughput_every)
    with caplog.at_level(logging.INFO, logger="kbert.training.loop"):
        model.fit(data, epochs=2, steps_per_epoch=12, callbacks=[progress, throughput],
                  verbose=0)
    return [r.getMessage() for r in caplog.records], throughput


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_progress_counts_steps_not_executions(steps_per_execution, caplog):
    lines, throughput = _fit_with_progress(steps_per_execution, io.StringIO(), caplog)
    epochs = [x.split("  ")[:2] for x in lines if x.startswith("epoch ")]
    every = max(2, steps_per_execution)  # a line at the first call `every` steps on
    assert epochs[-1] == ["epoch 3.00/3", "step 24/24"]
    assert [int(s.split()[1].split("/")[0]) for _, s in epochs] == list(
        range(every, 25, every))
    # examples/s once 6 steps have passed, at the end of the execution that gets there
    want = ([6, 12, 18, 24] if steps_per_execution == 1 else [8, 16, 24])
    assert [x.split(":")[0] for x in lines if x.startswith("step ")] == [
        f"step {n}" for n in want]
    assert len(throughput.history) == len(want)


def test_progress_on_a_terminal_is_one_bar_an_epoch(caplog):
    terminal = _Terminal()
    _fit_with_progress(1, terminal, caplog, throughput_every=100)
    screen = terminal.getvalue()
    finished = screen.split("\n")[:-1]
    # Three epochs, each ending on its own line as a full bar.
    assert len(finished) == 3
    for epoch, line in enumerate(finished, 1):
        last = line.split("\r")[-1]
        assert last.startswith(f"epoch {epoch}.00/3  [{'=' * 20}]  step {epoch * 8}/24  loss ")
        assert " lr 0.01  " in last and " examples/s  ETA " in last
        # Redrawn in place every step of the epoch.
        assert line.count("\r") == 8
    assert "\repoch 0.12/3  [==                  ]  step 1/24" in screen  # 2.5 -> 2 of 20
    assert not any(x.startswith("epoch ") for x in
                   [r.getMessage() for r in caplog.records])  # the bar, not log lines


def test_progress_rate_and_eta_leave_out_the_first_steps_compilation(monkeypatch):
    """The first step traces and compiles (10 s here), the others take 0.5 s each: the
    rate is that of the later steps, so the ETA is not inflated by the compilation."""
    import types

    import kbert.training.loop as loop_module

    clock = iter([0.0, 10.0, 10.0, 10.5, 11.0])  # begin, step 1 (x2), step 2, step 3
    monkeypatch.setattr(loop_module.time, "perf_counter", lambda: next(clock))
    stream = io.StringIO()
    progress = loop_module.Progress(10, 5, every=1, examples_per_step=8, stream=stream)
    progress.set_model(types.SimpleNamespace(
        optimizer=types.SimpleNamespace(learning_rate=0.5)))
    progress.on_train_begin()
    lines = []
    with monkeypatch.context() as m:
        m.setattr(loop_module.logger, "info", lambda fmt, text: lines.append(text))
        for batch in range(3):
            progress.on_train_batch_end(batch, {"loss": 1.0})
    # Step 1: only the compiled step to go by: no rate yet (#50: it showed 0.8 examples/s,
    # ETA 0:01:30, for a run of 14 s); then 2 steps a second.
    assert lines[0].endswith("-- examples/s  ETA --")
    assert lines[1].endswith("16.0 examples/s  ETA 0:00:04")
    assert lines[2].endswith("16.0 examples/s  ETA 0:00:04")  # 7 steps at 2/s: 3.5 s


def test_a_log_record_ends_the_bar_line_first(capsys):
    import kbert.training.loop as loop_module

    terminal = _Terminal()
    handler = logging.StreamHandler(terminal)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        loop_module._BarLine.draw(terminal, "epoch 0.50/1", done=False)
        logging.getLogger("kbert.test").warning("a record")
        loop_module._BarLine.draw(terminal, "epoch 1.00/1", done=True)
    finally:
        root.removeHandler(handler)
    assert terminal.getvalue() == "\repoch 0.50/1\x1b[K\na record\n\repoch 1.00/1\x1b[K\n"


def test_throughput_is_timed_from_the_end_of_the_first_execution(monkeypatch):
    """The first execution compiles (10 s here); examples/s is that of the later steps,
    as the progress bar's (the summary said 13.5 where the bar said 171.8)."""
    import kbert.training.loop as loop_module

    # Read at the beginning, at the end of step 1, at step 5 (the rate), and to restart.
    clock = iter([0.0, 10.0, 12.0, 12.0])
    monkeypatch.setattr(loop_module.time, "perf_counter", lambda: next(clock))
    throughput = loop_module.Throughput(8, every=5)
    throughput.on_train_begin()
    for batch in range(5):
        throughput.on_train_batch_end(batch, {})
    # 4 steps (2-5) of 8 examples in the 2 s after step 1's end.
    assert throughput.history == [{"examples_per_sec": 16.0}]


def test_progress_shows_a_fraction_of_an_epoch_as_the_step_shows_it():
    """15 examples in batches of 4 for one epoch: 3 whole batches, 0.80 of an epoch,
    shown '0.80/0.80' (it was '0.80/0.8' beside other digits, '0.93/0.9333')."""
    import types

    import kbert.training.loop as loop_module

    progress = loop_module.Progress(3, 15 / 4, every=1, stream=io.StringIO())
    progress.set_model(types.SimpleNamespace(
        optimizer=types.SimpleNamespace(learning_rate=0.5)))
    progress.on_train_begin()
    assert progress._text(3, {}).startswith("epoch 0.80/0.80  ")
    whole = loop_module.Progress(8, 4, every=1, stream=io.StringIO())
    whole.set_model(progress.model)
    whole.on_train_begin()
    assert whole._text(8, {}).startswith("epoch 2.00/2  ")


def test_a_checkpoint_loads_ignoring_other_tensors_in_one_log_line(caplog):
    from kbert.convert.rules import Rule, convert

    tensors = {"w": np.ones((2,), "float32"),
               **{f"cls.predictions.t{i}": np.zeros(1, "float32") for i in range(7)}}
    with caplog.at_level(logging.INFO, logger="kbert.convert.rules"):
        out = convert(tensors, [Rule("w", ("w",))], {"w": (2,)}, "model.safetensors",
                      "BertEncoder", owned=lambda key: not key.startswith("cls."))
    assert list(out) == ["w"]
    assert [r.getMessage() for r in caplog.records] == [
        "model.safetensors: ignoring 7 tensor(s) not part of BertEncoder: "
        "cls.predictions.t0, cls.predictions.t1, cls.predictions.t2, cls.predictions.t3, ..."]
