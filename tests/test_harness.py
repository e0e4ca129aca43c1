"""Every class in `kbert.layers`, every model class and the task heads through the
shared harness (tests/harness.py); ScalarMix against NumPy."""

import numpy as np
import pytest

import kbert
import kbert.layers
from kbert.layers import masks
from kbert.models.elmo.lm import ELMoLanguageModel
from kbert.tasks.glue.model import ClassifierHead
from kbert.tasks.squad.model import SpanHead
from tests import harness
from tests.harness import Case

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 5, 12)).astype("float32")
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
IDS = np.array([[1, 5, 10, 2, 0], [3, 3, 7, 0, 0]], "int32")
ELMO = dict(lstm_dim=10, projection_dim=6, num_layers=2, char_embedding_dim=4,
            filters=((1, 3), (2, 5)), num_highway=1, max_characters_per_token=7)
CHARS = np.random.default_rng(1).integers(1, 262, size=(2, 5, 7)).astype("int32")
GPT = dict(vocab_size=13, hidden_size=12, num_layers=2, num_heads=3, intermediate_size=17,
           max_position_embeddings=9, dropout=0.0, embedding_dropout=0.0,
           attention_dropout=0.0, end_token_id=12)
BERT = dict(vocab_size=13, hidden_size=12, num_layers=2, num_heads=3, intermediate_size=17,
            max_position_embeddings=9, type_vocab_size=2, dropout=0.0, attention_dropout=0.0)


def _block(norm_first):
    return Case(kbert.layers.TransformerBlock,
                dict(hidden_size=12, num_heads=3, intermediate_size=17, dropout=0.0,
                     attention_dropout=0.0, norm_first=norm_first),
                {"x": X, "mask": MASK},
                lambda layer, i: layer(i["x"], attention_mask=masks.key_mask(i["mask"]),
                                       causal=norm_first),
                (2, 5, 12), golden=GOLDEN[f"TransformerBlock-{norm_first}"])


# Sum of all outputs and the first three values, with `harness.deterministic_weights`.
# Recorded from this implementation, whose numbers the NumPy and reference-parity
# tests check: a change of any of them is a change of the layer's function.
GOLDEN = {
    "MultiHeadAttention": (-9.69475, (0.0358877, -0.21805, -0.442476)),
    "TransformerBlock-False": (-13.3851, (1.16436, 0.993023, 2.00823)),
    "TransformerBlock-True": (23.9361, (-0.0223026, -0.075293, 0.89439)),
    "TokenEmbedding": (3.45214, (0.398283, 0.262022, 0.0902981)),
    "PositionEmbedding": (0.675122, (-0.481565, -0.49762, -0.446324)),
    "BertEmbeddings": (19.7289, (2.48402, 2.47927, 2.08736)),
    "ScalarMix": (13.0651, (0.74102, 0.317248, 0.761864)),
    "BertEncoder": (48.9014, (2.48402, 2.47927, 2.08736)),
    "GPTDecoder": (-3.68893, (0.912412, 0.848155, 0.669105)),
    "GPTLanguageModel": (-7.29315, (-2.80245, 5.53188, -0.174069)),
    "ELMo": (29.9171, (0.361594, 0.412092, 0.406815)),
    "BertPretrainer": (8.89043, (1.21161, 3.41301, -2.61361)),
    "ELMoLanguageModel": (-1.39474, (0.0108427, 0.00217283, -0.00679114)),
    "ClassifierHead": (9.41995, (2.03823, 1.91229, 1.52753)),
    "SpanHead": (-5.05309, (-1.4311, -0.893343, 1.03856)),
}

CASES = [
    Case(kbert.layers.MultiHeadAttention, dict(hidden_size=12, num_heads=3,
                                                attention_dropout=0.0),
         {"x": X, "mask": MASK},
         lambda layer, i: layer(i["x"], attention_mask=masks.key_mask(i["mask"])),
         (2, 5, 12), golden=GOLDEN["MultiHeadAttention"]),
    _block(norm_first=False),
    _block(norm_first=True),
    Case(kbert.layers.TokenEmbedding, dict(input_dim=13, output_dim=6), {"ids": IDS},
         lambda layer, i: layer(i["ids"]), (2, 5, 6), golden=GOLDEN["TokenEmbedding"]),
    Case(kbert.layers.PositionEmbedding, dict(max_length=9, hidden_size=6), {"x": X},
         lambda layer, i: layer(i["x"], start_index=2), (5, 6),
         golden=GOLDEN["PositionEmbedding"]),
    Case(kbert.layers.BertEmbeddings,
         dict(vocab_size=13, hidden_size=12, max_position_embeddings=9, type_vocab_size=2,
              dropout=0.0),
         {"ids": IDS, "segments": (IDS % 2).astype("int32")},
         lambda layer, i: layer(i["ids"], i["segments"]), (2, 5, 12),
         golden=GOLDEN["BertEmbeddings"]),
    Case(kbert.layers.ScalarMix, dict(num_layers=3),
         {"a": X, "b": 2 * X, "c": X[:, ::-1].copy()},
         lambda layer, i: layer([i["a"], i["b"], i["c"]]), (2, 5, 12),
         golden=GOLDEN["ScalarMix"]),
    Case(kbert.BertEncoder, dict(config=BERT),
         {"token_ids": IDS, "segment_ids": (IDS % 2).astype("int32"), "padding_mask": MASK},
         lambda model, i: model(dict(i)),
         {"sequence_output": (2, 5, 12), "pooled_output": (2, 12),
          "hidden_states": [(2, 5, 12)] * 3}, golden=GOLDEN["BertEncoder"]),
    Case(kbert.GPTDecoder, dict(config=GPT), {"token_ids": IDS, "padding_mask": MASK},
         lambda model, i: model(dict(i)),
         {"sequence_output": (2, 5, 12), "hidden_states": [(2, 5, 12)] * 3},
         golden=GOLDEN["GPTDecoder"]),
    Case(kbert.GPTLanguageModel, dict(decoder=GPT), {"token_ids": IDS, "padding_mask": MASK},
         lambda model, i: model(dict(i)), {"logits": (2, 5, 13)},
         golden=GOLDEN["GPTLanguageModel"], mixed_dtype="float32"),
    Case(kbert.ELMo, dict(config=ELMO), {"char_ids": CHARS * MASK[:, :, None],
                                          "padding_mask": MASK},
         lambda model, i: model(dict(i))["hidden_states"], [(2, 5, 12)] * 3,
         golden=GOLDEN["ELMo"], mixed_dtype="float32"),
    Case(kbert.BertPretrainer, dict(encoder=BERT),
         {"token_ids": IDS, "segment_ids": (IDS % 2).astype("int32"), "padding_mask": MASK,
          "masked_lm_positions": np.array([[1, 2], [0, 2]], "int32")},
         lambda model, i: model(dict(i)), {"mlm_logits": (2, 2, 13), "nsp_logits": (2, 2)},
         golden=GOLDEN["BertPretrainer"], mixed_dtype="float32"),
    Case(ELMoLanguageModel, dict(elmo=ELMO, vocab_size=11, bos_id=1, eos_id=0),
         {"char_ids": CHARS * MASK[:, :, None], "padding_mask": MASK},
         lambda model, i: [model(dict(i))["forward"], model(dict(i))["backward"]],
         [(2, 7, 6), (2, 7, 6)], golden=GOLDEN["ELMoLanguageModel"], mixed_dtype="float32"),
    Case(ClassifierHead, dict(num_outputs=3, dropout=0.0), {"pooled": X[:, 0]},
         lambda layer, i: layer(i["pooled"]), (2, 3), golden=GOLDEN["ClassifierHead"],
         mixed_dtype="float32"),
    Case(SpanHead, dict(), {"x": X}, lambda layer, i: layer(i["x"]), [(2, 5), (2, 5)],
         golden=GOLDEN["SpanHead"], mixed_dtype="float32"),
]
IDS_ = [c.id + ("-pre_ln" if c.kwargs.get("norm_first") else "-post_ln"
                if "norm_first" in c.kwargs else "") for c in CASES]


def test_every_public_layer_and_model_class_has_a_case():
    layer_classes = {getattr(kbert.layers, n) for n in kbert.layers.__all__
                     if isinstance(getattr(kbert.layers, n), type)}
    model_classes = {kbert.BertEncoder, kbert.BertPretrainer, kbert.GPTDecoder,
                     kbert.GPTLanguageModel, kbert.ELMo, ELMoLanguageModel}
    covered = {c.cls for c in CASES}
    assert layer_classes | model_classes <= covered, (layer_classes | model_classes) - covered


@pytest.mark.parametrize("case", CASES, ids=IDS_)
def test_config_round_trip(case):
    harness.check_config(case)


@pytest.mark.parametrize("case", CASES, ids=IDS_)
def test_output_shapes_and_dtypes(case):
    harness.check_calls(case)


@pytest.mark.parametrize("case", CASES, ids=IDS_)
def test_keras_save_load_is_exact(case, tmp_path):
    harness.check_keras_save_load(case, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=IDS_)
def test_mixed_precision(case):
    harness.check_mixed_precision(case)


@pytest.mark.parametrize("case", CASES, ids=IDS_)
def test_golden_numbers(case):
    harness.check_golden(case)


def test_scalar_mix_equals_numpy():
    layer = kbert.layers.ScalarMix(3)
    layers = [RNG.normal(size=(2, 4, 6)).astype("float32") for _ in range(3)]
    layer(layers)
    w, gamma = np.array([0.3, -1.2, 0.7], "float32"), 1.7
    layer.scalars.assign(w)
    layer.gamma.assign(gamma)
    softmax = np.exp(w) / np.exp(w).sum()
    want = gamma * sum(s * x for s, x in zip(softmax, layers))
    np.testing.assert_allclose(np.asarray(layer(layers)), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"ScalarMix\(3\) got 2 layers"):
        layer(layers[:2])


def test_scalar_mix_as_bilm_tf_weight_layers():
    """do_layer_norm (masked statistics over the whole tensor), the L2 penalty,
    use_top_only and dropout, against NumPy."""
    import keras

    layers = [RNG.normal(size=(2, 4, 6)).astype("float32") * (k + 1) + k for k in range(3)]
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], "int32")
    w, gamma = np.array([0.3, -1.2, 0.7], "float32"), 1.7
    softmax = np.exp(w) / np.exp(w).sum()

    def layer_norm(x):
        m = mask[:, :, None].astype("float64")
        n = m.sum() * x.shape[-1]
        mean = (x * m).sum() / n
        var = (((x * m - mean) * m) ** 2).sum() / n
        return (x - mean) / np.sqrt(var + 1e-12)

    mix = kbert.layers.ScalarMix(3, do_layer_norm=True, l2_coef=0.001)
    mix(layers, padding_mask=mask)
    mix.scalars.assign(w)
    mix.gamma.assign(gamma)
    want = gamma * sum(s * layer_norm(x) for s, x in zip(softmax, layers))
    np.testing.assert_allclose(np.asarray(mix(layers, padding_mask=mask)), want, atol=1e-5)
    # The penalty, in the model's losses.
    inputs = [keras.Input((4, 6)) for _ in range(3)]
    model = keras.Model(inputs, mix(inputs))
    model(layers)
    np.testing.assert_allclose(float(sum(model.losses)), 0.001 * float((w ** 2).sum()),
                               rtol=1e-6)
    top = kbert.layers.ScalarMix(3, use_top_only=True)
    top(layers)
    top.gamma.assign(gamma)
    np.testing.assert_allclose(np.asarray(top(layers)), gamma * layers[2], rtol=1e-6)
    dropped = kbert.layers.ScalarMix(3, dropout=0.5)
    out = np.asarray(dropped(layers, training=True))
    assert 0.3 < (out == 0).mean() < 0.7
    np.testing.assert_allclose(np.asarray(dropped(layers)),
                               sum(x / 3 for x in layers), rtol=1e-5)
