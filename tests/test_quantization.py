"""int8 quantization through Keras' own `model.quantize("int8")`: every kbert `Dense`
kernel and token table (the tied output layer included) becomes int8, or the call
fails loudly; the real MiniLM's token vectors stay close to float32's; a quantized
model round-trips through `.keras` and `save_pretrained`; its embeddings export keeps
int8 variables."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

import kbert
from kbert.layers.dense import Dense
from kbert.layers.embeddings import TokenEmbedding

# A varied corpus: lengths, casing, punctuation, numbers, accents, CJK, emoji.
CORPUS = ["The quick brown fox jumps over the lazy dog.",
          "In 1898 the conservatory bought a new organ for 2,400 dollars!",
          "naïve café résumé — déjà vu", "数字 and émoji 🙂 in one line",
          "Short.", "What is the capital of France? Paris, of course.",
          "x " * 40, "BERT, GPT and ELMo started transfer learning in NLP (2018)."]


def _quantized_layers(model):
    layers = [layer for layer in model._flatten_layers()
              if isinstance(layer, (Dense, TokenEmbedding))]
    assert layers
    return {layer.path: layer.quantization_mode for layer in layers}


def _int8_weights(model):
    """Every Dense kernel and token table is an int8 variable."""
    for w in model.weights:
        if w.path.endswith("/kernel") or w.path.endswith("token_embedding/embeddings") or (
                w.path.endswith("word_embeddings/embeddings")):
            assert w.dtype == "int8", w.path


def test_gpt_language_model_quantizes_every_dense_and_the_tied_table(tmp_path):
    keras.utils.set_random_seed(1)
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset("tiny"))
    ids = np.random.RandomState(0).randint(0, 98, (3, 12)).astype("int32")
    inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    before = lm(inputs)["logits"].numpy()
    lm.quantize("int8")
    assert set(_quantized_layers(lm).values()) == {"int8"}
    _int8_weights(lm)
    after = lm(inputs)["logits"].numpy()
    assert np.abs(after - before).max() < 0.02 * np.abs(before).max()
    assert lm.generate_ids(ids, np.ones_like(ids), 4).shape == (3, 4)
    # .keras: saved with its int8 weights, loaded into a quantized model
    lm.save(tmp_path / "lm.keras")
    loaded = keras.saving.load_model(tmp_path / "lm.keras")
    assert loaded.quantization_mode_of_layers() == "int8"
    np.testing.assert_array_equal(loaded(inputs)["logits"].numpy(), after)
    # save_pretrained: kbert's quantized folder, int8 weights and scales, loaded back
    # quantized with the same logits; Hugging Face refuses the folder (no
    # model.safetensors, no model_type) rather than read int8 tensors as floats.
    lm.save_pretrained(tmp_path / "folder")
    dtypes = {str(v.dtype) for v in safetensors.numpy.load_file(
        str(tmp_path / "folder" / "kbert_quantized.safetensors")).values()}
    assert dtypes == {"int8", "float32"}
    again = kbert.GPTLanguageModel.from_pretrained(tmp_path / "folder", load_tokenizer=False)
    assert again.quantization_mode_of_layers() == "int8"
    np.testing.assert_array_equal(again(inputs)["logits"].numpy(), after)
    import transformers

    with pytest.raises((OSError, ValueError)):
        transformers.AutoModel.from_pretrained(str(tmp_path / "folder"))
    with pytest.raises(ValueError, match="loads as it was saved; no dtype"):
        kbert.GPTDecoder.from_pretrained(tmp_path / "folder", dtype="bfloat16")
    with pytest.raises(ValueError, match="a quantized GPTDecoder, not a BertEncoder"):
        kbert.BertEncoder.from_pretrained(tmp_path / "folder")
    with pytest.raises(ValueError, match="left 1 layer.s. unquantized .e.g. token_embedding.: "
                       "token_embedding: quantize.'int4'. is not supported for a token table"):
        kbert.GPTLanguageModel(kbert.GPTConfig.preset("tiny")).quantize("int4")


def test_minilm_int8_token_vectors_stay_close_to_float(minilm_dir):
    """The real MiniLM: every Dense kernel and the word table int8, token vectors'
    cosine to float32's at least 0.99 on average over a varied corpus."""
    tokenizer = kbert.BertTokenizer.from_pretrained(minilm_dir)
    inputs = tokenizer(CORPUS, seq_length=64)
    encoder = kbert.BertEncoder.from_pretrained(minilm_dir)
    before = encoder(inputs)["sequence_output"].numpy()
    encoder.quantize("int8")
    assert set(_quantized_layers(encoder).values()) == {"int8"}
    _int8_weights(encoder)
    after = encoder(inputs)["sequence_output"].numpy()
    real = inputs["padding_mask"].numpy().astype(bool)
    a, b = before[real], after[real]
    cosine = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    assert cosine.mean() >= 0.99, cosine.mean()
    assert cosine.min() >= 0.95, cosine.min()


def test_minilm_bfloat16_token_vectors_stay_close_to_float(minilm_dir):
    """`--dtype bfloat16` (`cast_model`) on the real MiniLM: every variable bfloat16, the
    token vectors' cosine to float32's at least 0.99 on average over the corpus, in a
    graph (as the export runs it)."""
    from kbert.export.folder import cast_model

    tokenizer = kbert.BertTokenizer.from_pretrained(minilm_dir)
    inputs = tokenizer(CORPUS, seq_length=64)
    encoder = kbert.BertEncoder.from_pretrained(minilm_dir)
    before = encoder(inputs)["sequence_output"].numpy()
    cast = cast_model(encoder, "bfloat16")
    assert {w.dtype for w in cast.weights} == {"bfloat16"}
    assert encoder.weights[0].dtype == "float32"  # a copy: the model itself stays
    after = tf.function(lambda x: cast(x))(inputs)["sequence_output"]
    assert after.dtype == tf.bfloat16
    after = tf.cast(after, tf.float32).numpy()
    real = inputs["padding_mask"].numpy().astype(bool)
    a, b = before[real], after[real]
    cosine = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    assert cosine.mean() >= 0.99, cosine.mean()
    with pytest.raises(ValueError, match="the model is quantized; give --dtype or "
                                         "--quantize, not both"):
        encoder.quantize("int8")
        cast_model(encoder, "bfloat16")


def test_roberta_quantizes_and_elmo_refuses(tmp_path):
    keras.utils.set_random_seed(2)
    roberta = kbert.RobertaEncoder(kbert.RobertaConfig.preset("tiny"))
    roberta.quantize("int8")
    assert set(_quantized_layers(roberta).values()) == {"int8"}
    _int8_weights(roberta)
    roberta.save_pretrained(tmp_path / "roberta")  # kbert's quantized folder
    again = kbert.RobertaEncoder.from_pretrained(tmp_path / "roberta")
    ids = np.array([[0, 5, 6, 7, 2]], "int32")
    inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    np.testing.assert_array_equal(again(inputs)["sequence_output"].numpy(),
                                  roberta(inputs)["sequence_output"].numpy())
    masked_lm = kbert.RobertaMaskedLM(roberta)
    with pytest.raises(ValueError, match="the model is quantized .int8.; its folder holds "
                                         "float weights"):
        masked_lm.save_pretrained(tmp_path / "mlm")
    from tests.conftest import write_untrained_elmo

    elmo = kbert.ELMo.from_pretrained(write_untrained_elmo(tmp_path / "elmo"))
    with pytest.raises(NotImplementedError, match="biLSTM layers have no Keras quantization"):
        elmo.quantize("int8")


@pytest.mark.slow  # two MiniLM exports with their loader checks: 4 minutes in the suite
def test_int8_embeddings_export_is_a_third_of_float(tmp_path, minilm_dir):
    from kbert.export.check import run_fresh, variables_size

    tokenizer = kbert.BertTokenizer.from_pretrained(minilm_dir)
    encoder = kbert.BertEncoder.from_pretrained(minilm_dir)
    kbert.export.export_embeddings(encoder, tokenizer, str(tmp_path / "f32" / "1"),
                                   seq_length=32)
    float32 = encoder(tokenizer(CORPUS, seq_length=32))["sequence_output"].numpy()
    encoder.quantize("int8")
    kbert.export.export_embeddings(encoder, tokenizer, str(tmp_path / "int8" / "1"),
                                   seq_length=32)
    small = variables_size(str(tmp_path / "int8" / "1"))
    big = variables_size(str(tmp_path / "f32" / "1"))
    assert small <= big / 3, (small, big)
    served = run_fresh(str(tmp_path / "int8" / "1"), [{"text": CORPUS}])["results"][0]
    # Keras' int8 Dense answers a little otherwise eagerly than in a graph (0.01 on
    # MiniLM's pooled vectors, TF 2.21 / Keras 3.15): the export is the graph's.
    inputs = tokenizer(CORPUS, seq_length=32)
    want = tf.function(lambda x: encoder(x))(inputs)["sequence_output"].numpy()
    got = np.reshape(served["sequence_output"]["value"], want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    real = inputs["padding_mask"].numpy().astype(bool)
    a, b = float32[real], got[real]
    cosine = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    assert cosine.mean() >= 0.99, cosine.mean()


def test_quantizing_runs_one_garbage_collection_not_one_per_kernel(tmp_path, monkeypatch):
    """Keras' `Layer.__delattr__` runs a full `gc.collect()` for each variable a layer
    drops (each float kernel, when quantizing); kbert's quantize paths run one for the
    whole model (`internals.one_gc_collect`), and `gc.collect` is Python's own again
    afterwards. The float kernels are still freed at once (reference counting)."""
    import gc
    import weakref

    calls = []

    def counting(generation=2):
        calls.append(generation)
        return 0

    monkeypatch.setattr(gc, "collect", counting)
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset("tiny"))
    dense = [layer for layer in lm._flatten_layers() if isinstance(layer, Dense)]
    assert len(dense) > 4
    floats = [weakref.ref(layer._kernel) for layer in dense]
    lm.quantize("int8")
    assert calls == [2]  # one full collection, at the end
    assert gc.collect is counting
    assert all(ref() is None for ref in floats)
    # Keras' own path, for comparison: a collection per dropped kernel.
    keras_dense = keras.layers.Dense(3)
    keras_dense.build((None, 4))
    keras_dense.quantize("int8")
    assert calls == [2, 2]
    # Loading with quantize="int8" (kernels quantized as they load): one for the load.
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset("tiny"))
    lm.save_pretrained(tmp_path / "float")
    del calls[:]
    loaded = kbert.GPTLanguageModel.from_pretrained(tmp_path / "float", load_tokenizer=False,
                                                    quantize="int8")
    assert loaded.quantization_mode_of_layers() == "int8"
    assert calls == [2]
