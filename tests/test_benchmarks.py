"""The benchmarks' own arithmetic (their timings are not tested: see docs/benchmarks.md)."""

import os
import sys

import numpy as np

import kbert

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))


def test_pretraining_model_flops_count_the_pretrainers_parameters():
    """`model_flops_per_step` (the MFU numerator) against a count of the built
    `BertPretrainer`'s own weights: 6 FLOPs per weight per position it is applied to
    (the encoder's at every position, the masked-LM head's and the tied word table's at
    the masked positions, the pooler's and next-sentence head's once a row), no FLOPs for
    the embedding lookups, plus attention's 12 * layers * hidden * seq per token."""
    from bench_pretrain import model_flops_per_step

    config = kbert.BertConfig.preset("tiny")
    kbert.BertPretrainer(kbert.BertEncoder(config))  # the next one's name gets a suffix
    model = kbert.BertPretrainer(kbert.BertEncoder(config))
    batch, seq, predictions = 3, 16, 4
    model({"token_ids": np.ones((batch, seq), "int32"),
           "segment_ids": np.zeros((batch, seq), "int32"),
           "padding_mask": np.ones((batch, seq), "int32"),
           "masked_lm_positions": np.tile(np.arange(predictions, dtype="int32"), (batch, 1))})
    counts = {"layers": 0, "masked_lm": 0, "per_row": 0}
    for w in model.weights:
        n = int(np.prod(w.shape))
        if w.path.startswith("transformer_layer_"):
            counts["layers"] += n
        elif w.path.startswith("pooler/") or "/seq_relationship_" in w.path:
            counts["per_row"] += n
        elif w.path == "embeddings/word_embeddings/embeddings":
            counts["masked_lm"] += n  # the tied output layer
        elif not w.path.startswith("embeddings/"):
            counts["masked_lm"] += n
    expected = batch * (6 * counts["layers"] * seq
                        + 12 * config.num_layers * config.hidden_size * seq * seq
                        + 6 * predictions * counts["masked_lm"] + 6 * counts["per_row"])
    assert model_flops_per_step(config, batch, seq, predictions) == expected
    # BERT-base, sequence 128, 20 predictions, MFLOPs a token: 510.3 for the layers'
    # 85,054,464 weights, 14.2 for attention, 22.6 for the masked-LM head (24.06M
    # weights with the word table, at 20 of 128 positions), 0.03 for the pooler and
    # next-sentence head (once a row).
    base = kbert.BertConfig.preset("base")
    assert round(model_flops_per_step(base, 1, 128, 20) / 128 / 1e6, 1) == 547.1


def test_int8_kernel_ways_compute_the_float_layer():
    """bench_int8_kernels' three ways are the same layer: Keras' int8 `Dense` and
    oneDNN's `QuantizedMatMulWithBiasAndDequantize` with the MIN_FIRST offset compensated
    stay within 5% (of the largest output) of float32's `x @ w + b`; without the
    compensation the oneDNN product is off by far more (the offset times the weights'
    column sums)."""
    import tensorflow as tf

    from bench_int8_kernels import ways

    fns = ways(96, 40)
    x = tf.constant(np.random.default_rng(3).normal(0, 1, (5, 96)).astype("float32"))
    want = fns["float32"](x).numpy()
    for name in ("keras int8", "oneDNN int8"):
        error = np.abs(fns[name](x).numpy() - want).max() / np.abs(want).max()
        assert error < 0.05, (name, error)
    plain = ways(96, 40, compensate=False)["oneDNN int8"](x).numpy()
    assert np.abs(plain - want).max() / np.abs(want).max() > 0.2


def test_matvec_engines_compute_the_same_products():
    """bench_matvec's four engines (XLA, TensorFlow's graph, NumPy, PyTorch) time the
    same sum of one-row products, plain and with the matrices transposed."""
    from bench_matvec import engines

    for transposed in (False, True):
        results = {name: fn() for name, fn in engines(24, 40, 3, transposed).items()}
        want = results.pop("NumPy")
        assert want.shape == (1, 40)
        for name, got in results.items():
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=name)
