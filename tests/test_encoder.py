"""BertEncoder and its layers: values, masking, serialization."""


import keras
import numpy as np
import pytest

from kbert import BertConfig, BertEncoder
from kbert.layers.activations import gelu, gelu_tanh
from tests.conftest import odd_config, random_inputs


def test_config_presets_and_files(tmp_path):
    base = BertConfig.preset("base")
    assert (base.hidden_size, base.num_layers, base.num_heads, base.intermediate_size) == \
        (768, 12, 12, 3072)
    large = BertConfig.preset("large")
    assert (large.hidden_size, large.num_layers, large.num_heads) == (1024, 24, 16)
    assert BertConfig.from_dict(base.to_dict()) == base
    google = tmp_path / "bert_config.json"
    google.write_text('{"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", '
                      '"hidden_dropout_prob": 0.1, "hidden_size": 768, '
                      '"initializer_range": 0.02, "intermediate_size": 3072, '
                      '"max_position_embeddings": 512, "num_attention_heads": 12, '
                      '"num_hidden_layers": 12, "type_vocab_size": 2, "vocab_size": 30522}')
    # Google's modeling.py computes the tanh approximation under the name "gelu".
    assert BertConfig.from_json_file(google) == BertConfig(hidden_act="gelu_tanh")
    hf = tmp_path / "config.json"
    hf.write_text('{"hidden_act": "gelu", "hidden_size": 384, "num_hidden_layers": 6, '
                  '"num_attention_heads": 12, "intermediate_size": 1536, "vocab_size": 30522, '
                  '"layer_norm_eps": 1e-12}')
    assert BertConfig.from_json_file(hf).hidden_act == "gelu"
    hf.write_text('{"hidden_act": "gelu_new", "hidden_size": 384, "num_hidden_layers": 6, '
                  '"num_attention_heads": 12, "intermediate_size": 1536, "vocab_size": 30522}')
    assert BertConfig.from_json_file(hf).hidden_act == "gelu_tanh"
    with pytest.raises(ValueError, match="hidden_act='swish'"):
        BertConfig(hidden_act="swish")
    with pytest.raises(ValueError, match="not a multiple"):
        BertConfig(hidden_size=30, num_heads=4)
    hf.write_text('{"hidden_size": 384,\n "oops"}')
    with pytest.raises(ValueError, match=r"config.json:2"):
        BertConfig.from_json_file(hf)
    with pytest.raises(ValueError, match=r"Unknown BertConfig field\(s\): \['hidden'\]"):
        BertConfig.from_dict({"hidden": 3})


def test_gelu_variants_match_formulas():
    from scipy.special import erf

    x = np.linspace(-6, 6, 101).astype("float32")
    exact = 0.5 * x * (1 + erf(x / np.sqrt(2)))
    tanh = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(np.asarray(gelu(x)), exact, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gelu_tanh(x)), tanh, atol=1e-6)
    assert np.abs(exact - tanh).max() > 1e-4  # the two are distinguishable


def test_gelu_gradient_is_phi_plus_x_pdf():
    import tensorflow as tf
    from scipy.special import erf

    x = tf.constant(np.linspace(-8, 8, 161).astype("float32"))
    grads = []
    for fn in (gelu, lambda t: keras.ops.gelu(t, approximate=False)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        grads.append(tape.gradient(y, x, output_gradients=tf.fill(x.shape, 3.0)).numpy())
    v = x.numpy().astype("float64")
    want = 3.0 * (0.5 * (1 + erf(v / np.sqrt(2))) + v * np.exp(-v * v / 2) / np.sqrt(2 * np.pi))
    np.testing.assert_allclose(grads[0], want, atol=2e-6)
    np.testing.assert_allclose(grads[0], grads[1], atol=2e-6)
    np.testing.assert_array_equal(gelu(x).numpy(), keras.ops.gelu(x, approximate=False).numpy())


def test_gelu_takes_tf_nn_gelu_when_no_tape_records_and_the_product_fuses_it():
    """Under a tape `gelu` is the custom-gradient function (its `IdentityN` in the
    graph); with none it is `tf.nn.gelu`, the same values, which grappler fuses into the
    product before it in a plain graph (#51 item 3): kbert's `Dense` with `gelu` runs
    as one fused product, no separate erfc, matmul or bias addition."""
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)

    from kbert.layers.dense import Dense

    x = tf.constant(np.linspace(-8, 8, 161).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        taped = gelu(x)
    np.testing.assert_array_equal(taped.numpy(), gelu(x).numpy())
    graphs = {}
    for name, under_tape in (("taped", True), ("plain", False)):
        def fn(t, under_tape=under_tape):
            if not under_tape:
                return gelu(t)
            with tf.GradientTape() as inner:
                inner.watch(t)
                return gelu(t)
        graphs[name] = {n.op for n in tf.function(fn).get_concrete_function(
            tf.TensorSpec([None], tf.float32)).graph.as_graph_def().node}
    assert "IdentityN" in graphs["taped"] and "IdentityN" not in graphs["plain"], graphs

    keras.utils.set_random_seed(0)
    layer = Dense(64, activation=gelu)
    h = tf.random.normal([2, 5, 16])
    layer.build(h.shape)
    layer.bias.assign(tf.random.normal([64]))  # a zero bias is folded away
    frozen = convert_variables_to_constants_v2(
        tf.function(lambda t: layer(t)).get_concrete_function(h))
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(frozen.graph.as_graph_def(), name="")
    meta = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(graph=graph) as session:  # grappler runs, as in TF Serving
        out = session.run(frozen.outputs[0].name, {frozen.inputs[0].name: h.numpy()},
                          options=tf.compat.v1.RunOptions(
                              trace_level=config_pb2.RunOptions.FULL_TRACE),
                          run_metadata=meta)
    ran = {s.timeline_label.split(" = ")[1].split("(")[0] for d in meta.step_stats.dev_stats
           for s in d.node_stats if " = " in s.timeline_label}
    assert not ran & {"Erfc", "Erf", "MatMul", "BiasAdd"}, ran  # all in the fused product
    assert any("FusedMatMul" in op for op in ran), ran
    np.testing.assert_allclose(out, keras.layers.Dense.call(layer, h).numpy(), atol=2e-5)


def _numpy_bert(encoder, inputs):
    """A plain NumPy forward pass of BERT from the encoder's weights (the reference math)."""
    from scipy.special import erf

    from kbert.models.bert.checkpoints import variable_map

    w = {k: v.numpy() for k, v in variable_map(encoder).items()}
    cfg = encoder.config

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + cfg.layer_norm_epsilon) * w[p + "/gamma"] + w[p + "/beta"]

    def dense(x, p):
        return x @ w[p + "/kernel"] + w[p + "/bias"]

    ids, seg, mask = inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"]
    t = ids.shape[1]
    x = (w["bert/embeddings/word_embeddings"][ids] + w["bert/embeddings/token_type_embeddings"][seg]
         + w["bert/embeddings/position_embeddings"][:t])
    x = ln(x, "bert/embeddings/LayerNorm")
    n, d = cfg.num_heads, cfg.hidden_size // cfg.num_heads
    bias = (1.0 - mask[:, None, None, :]) * -10000.0
    for i in range(cfg.num_layers):
        p = f"bert/encoder/layer_{i}"
        heads = lambda y: y.reshape(y.shape[0], t, n, d).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = (heads(dense(x, f"{p}/attention/self/{m}")) for m in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
        prob = np.exp(s - s.max(-1, keepdims=True))
        prob /= prob.sum(-1, keepdims=True)
        ctx = (prob @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        x = ln(x + dense(ctx, f"{p}/attention/output/dense"), f"{p}/attention/output/LayerNorm")
        h = dense(x, f"{p}/intermediate/dense")
        h = 0.5 * h * (1 + erf(h / np.sqrt(2)))
        x = ln(x + dense(h, f"{p}/output/dense"), f"{p}/output/LayerNorm")
    pooled = np.tanh(dense(x[:, 0], "bert/pooler/dense"))
    return x, pooled


def test_forward_equals_numpy_reference():
    encoder = BertEncoder(odd_config())
    inputs = random_inputs()
    out = encoder(inputs)
    seq, pooled = _numpy_bert(encoder, inputs)
    m = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(out["sequence_output"].numpy()[m], seq[m], atol=2e-5)
    np.testing.assert_allclose(out["pooled_output"].numpy(), pooled, atol=2e-5)
    assert len(out["hidden_states"]) == 4
    np.testing.assert_array_equal(out["hidden_states"][-1].numpy(), out["sequence_output"].numpy())
    assert out["sequence_output"].shape == (13, 7, 32) and out["pooled_output"].shape == (13, 32)


def test_padding_changes_nothing_on_real_tokens():
    encoder = BertEncoder(odd_config())
    inputs = random_inputs(batch=5, seq=7)
    padded = {k: np.pad(v, ((0, 0), (0, 6))) for k, v in inputs.items()}
    padded["token_ids"][:, 7:] = 17  # garbage under the mask must not leak
    a = encoder(inputs)["sequence_output"].numpy()
    b = encoder(padded)["sequence_output"].numpy()[:, :7]
    m = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(a[m], b[m], atol=1e-5)


def test_dropout_only_in_training():
    encoder = BertEncoder(odd_config(dropout=0.3, attention_dropout=0.3))
    inputs = random_inputs()
    a = encoder(inputs, training=False)["sequence_output"].numpy()
    b = encoder(inputs, training=False)["sequence_output"].numpy()
    c = encoder(inputs, training=True)["sequence_output"].numpy()
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3




def test_keras_save_load_is_exact(tmp_path):
    encoder = BertEncoder(odd_config(), name="my_bert")
    inputs = random_inputs()
    want = encoder(inputs)
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, BertEncoder) and loaded.config == encoder.config
    got = loaded(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(got[key].numpy(), want[key].numpy())
    for a, b in zip(got["hidden_states"], want["hidden_states"]):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.e2e
def test_encoder_inside_a_functional_classifier_trains():
    encoder = BertEncoder(odd_config())
    inputs = {k: keras.Input((None,), dtype="int32", name=k)
              for k in ("token_ids", "segment_ids", "padding_mask")}
    logits = keras.layers.Dense(2)(encoder(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    model.compile(keras.optimizers.Adam(1e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = random_inputs(batch=16, seq=7)
    y = (x["token_ids"][:, 1] % 2).astype("int32")
    hist = model.fit(x, y, epochs=15, batch_size=16, verbose=0)
    assert hist.history["loss"][-1] < 0.5 * hist.history["loss"][0]


def test_too_long_sequence_is_a_clear_error():
    encoder = BertEncoder(odd_config(max_position_embeddings=8))
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_position_embeddings=8"):
        encoder(random_inputs(batch=2, seq=9))


def test_classifier_with_encoder_saves_and_loads(tmp_path):
    encoder = BertEncoder(odd_config())
    pooled = encoder(encoder.input)["pooled_output"]
    model = keras.Model(encoder.input, keras.layers.Dense(3, name="head")(pooled))
    inputs = random_inputs()
    want = model.predict(inputs, verbose=0)
    model.save(tmp_path / "clf.keras")
    got = keras.models.load_model(tmp_path / "clf.keras").predict(inputs, verbose=0)
    np.testing.assert_array_equal(got, want)


def test_sinusoidal_position_init():
    from kbert.models.bert import init_sinusoidal_positions

    encoder = init_sinusoidal_positions(BertEncoder(odd_config()), scale=0.1)
    table = encoder.embeddings.position_embeddings.embeddings.numpy()
    position, width = 7, table.shape[1]
    for i in range(width):
        angle = position / 10000 ** (2 * (i // 2) / width)
        expected = 0.1 * (np.sin(angle) if i % 2 == 0 else np.cos(angle))
        assert table[position, i] == pytest.approx(expected, abs=1e-6)
    assert encoder.embeddings.position_embeddings.trainable


def test_output_range_computes_the_first_positions_and_the_same_gradients():
    import tensorflow as tf

    encoder = BertEncoder(odd_config())
    inputs = random_inputs()
    cls_only, first3 = encoder.with_output_range(1), encoder.with_output_range(3)
    assert all(a is b for a, b in zip(cls_only.weights, encoder.weights))
    full = encoder(inputs)
    out1, out3 = cls_only(inputs), first3(inputs)
    assert out1["sequence_output"].shape == (13, 1, 32) and out3["sequence_output"].shape == (13, 3, 32)
    np.testing.assert_allclose(out1["pooled_output"], full["pooled_output"], atol=1e-6)
    np.testing.assert_allclose(out3["sequence_output"], full["sequence_output"][:, :3], atol=1e-6)
    for a, b in zip(out1["hidden_states"][:-1], full["hidden_states"][:-1]):
        np.testing.assert_array_equal(a, b)

    weights = np.random.default_rng(1).standard_normal((32,)).astype("float32")
    grads = []
    for model in (encoder, cls_only):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(inputs, training=True)["pooled_output"] * weights)
        grads.append(tape.gradient(loss, encoder.trainable_variables))
    assert all(g is not None for g in grads[1])
    for a, b, v in zip(*grads, encoder.trainable_variables):
        np.testing.assert_allclose(tf.convert_to_tensor(b), tf.convert_to_tensor(a),
                                   rtol=1e-5, atol=2e-6, err_msg=v.path)
    with pytest.raises(ValueError, match="output_range=0"):
        encoder.with_output_range(0)


def test_glue_classifier_uses_output_range_and_saves(tmp_path):
    from kbert.tasks.glue import build_classifier

    encoder = BertEncoder(odd_config())
    model = build_classifier(encoder, 3)
    inner = [layer for layer in model.layers if isinstance(layer, BertEncoder)]
    assert len(inner) == 1 and inner[0].output_range == 1
    inputs = random_inputs()
    want = model.predict(inputs, verbose=0)["logits"]
    head = model.get_layer("classifier")
    np.testing.assert_allclose(
        want, head(encoder(inputs)["pooled_output"]).numpy(), atol=1e-6)
    model.save(tmp_path / "clf.keras")
    loaded = keras.models.load_model(tmp_path / "clf.keras")
    assert [layer.output_range for layer in loaded.layers if isinstance(layer, BertEncoder)] == [1]
    np.testing.assert_array_equal(loaded.predict(inputs, verbose=0)["logits"], want)


@pytest.mark.parity
def test_gelu_tanh_is_what_googles_modeling_py_computes():
    """Google's bert_config.json says "gelu"; its modeling.py computes the tanh form,
    which kbert calls gelu_tanh (and loads Google folders with)."""
    import tensorflow as tf

    from tests.references import google_modeling_function

    google_gelu = google_modeling_function("gelu")
    x = np.linspace(-6, 6, 241).astype("float32")
    want = google_gelu(tf.constant(x)).numpy()
    np.testing.assert_allclose(np.asarray(gelu_tanh(x)), want, atol=1e-6)
    assert np.abs(np.asarray(gelu(x)) - want).max() > 1e-4  # the erf form differs


def test_dense_and_attention_read_unknown_dimensions_once():
    """`shapes.dims` reads a tensor's unknown dimensions from one `Shape` and one
    `Unpack`; kbert's `Dense` on [B, T, H] and the attention's head split write no
    `StridedSlice` of a shape (two dozen nodes per layer before: every one traced,
    saved, optimized by grappler and run per request in an export; #54, #51 item 3).
    The values are those of Keras' `Dense` and of the eager call."""
    import tensorflow as tf

    from kbert.layers.attention import MultiHeadAttention
    from kbert.layers.dense import Dense
    from kbert.layers.shapes import dims

    spec = tf.TensorSpec([None, None, 16], tf.float32)
    graph = tf.function(lambda t: dims(t)).get_concrete_function(spec).graph
    ops = [op.type for op in graph.get_operations()]
    assert ops.count("Shape") == 1 and ops.count("Unpack") == 1, ops
    assert dims(tf.zeros([2, 3])) == [2, 3]

    keras.utils.set_random_seed(0)
    layer = Dense(8, activation="relu")
    x = tf.random.normal([2, 5, 16])
    layer.build(x.shape)
    layer.bias.assign(tf.random.normal([8]))
    plain = keras.layers.Dense(8, activation="relu")
    plain.build(x.shape)
    plain.set_weights(layer.get_weights())
    np.testing.assert_allclose(layer(x).numpy(), plain(x).numpy(), rtol=1e-6, atol=1e-6)
    attention = MultiHeadAttention(16, 4)
    want = attention(x).numpy()
    for fn in (lambda t: layer(t), lambda t: attention(t)):
        graph = tf.function(fn).get_concrete_function(spec).graph
        ops = [op.type for op in graph.get_operations()]
        assert "StridedSlice" not in ops, ops
    got = tf.function(lambda t: attention(t)).get_concrete_function(spec)(x)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
