"""bilm-tf's token mode: the dumped `embedding` file holds the character CNN's vector of
each vocabulary word, and the biLM reading word ids through that table computes what it
computes from characters."""

from __future__ import annotations

import h5py
import keras
import numpy as np
import pytest

import kbert
from kbert.models.elmo.lm import WordVocabulary
from kbert.models.elmo.token_mode import (dump_token_embeddings, read_token_embeddings,
                                          token_inputs)

TEXTS = ["the cat sat", "a dog", "the bird sat on the mat"]


@pytest.fixture(scope="module")
def models():
    keras.utils.set_random_seed(4)
    elmo = kbert.ELMo(kbert.ELMoConfig.preset("tiny", dropout=0.0))
    elmo.ensure_built()
    for var in elmo.trainable_variables:  # biases away from zero too
        var.assign(var + np.random.default_rng(1).normal(0, 0.1, var.shape).astype("float32"))
    vocab = WordVocabulary.build(TEXTS)
    return elmo, vocab, elmo.with_token_table(vocab)


def test_dumped_embeddings_are_the_char_cnn_vectors(models, tmp_path):
    elmo, vocab, _ = models
    table = dump_token_embeddings(elmo, vocab, tmp_path / "tokens.hdf5")
    with h5py.File(tmp_path / "tokens.hdf5") as f:
        assert list(f) == ["embedding"] and f["embedding"].shape == (vocab.size, 8)
    np.testing.assert_array_equal(read_token_embeddings(tmp_path / "tokens.hdf5"), table)
    # Each word's row is the token layer ELMo computes for it in a sentence.
    tok = kbert.ELMoCharTokenizer(elmo.config.max_characters_per_token)
    for word in ("cat", "sat", "mat"):
        token_layer = elmo(tok([word]))["hidden_states"][0].numpy()[0, 0, :8]
        np.testing.assert_allclose(table[vocab.index[word]], token_layer, atol=1e-6)
    bounded = kbert.ELMo.from_config({**elmo.get_config(), "keep_boundaries": True})
    bounded.ensure_built()
    bounded.set_weights(elmo.get_weights())
    marks = bounded(tok(["cat"]))["hidden_states"][0].numpy()[0, :, :8]
    np.testing.assert_allclose(table[vocab.bos_id], marks[0], atol=1e-6)
    np.testing.assert_allclose(table[vocab.eos_id], marks[2], atol=1e-6)


def test_token_mode_equals_character_mode(models, tmp_path):
    elmo, vocab, token_elmo = models
    x = token_inputs(vocab, TEXTS)
    assert x["token_ids"].numpy()[1].tolist() == [vocab.index["a"] + 1, vocab.index["dog"] + 1,
                                                  0, 0, 0, 0]
    chars = kbert.ELMoCharTokenizer(elmo.config.max_characters_per_token)(TEXTS)
    for got, want in zip(token_elmo(x)["hidden_states"], elmo(chars)["hidden_states"]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)
    # Unknown words read as <UNK>.
    unknown = token_inputs(vocab, ["the zebra"])
    assert unknown["token_ids"].numpy()[0, 1] == vocab.unk_id + 1
    # .keras round trip keeps the table; the bilm-tf file has the CNN weights too.
    token_elmo.save(tmp_path / "token.keras")
    loaded = keras.saving.load_model(tmp_path / "token.keras")
    for got, want in zip(loaded(x)["hidden_states"], token_elmo(x)["hidden_states"]):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    token_elmo.save_pretrained(tmp_path / "bilm")
    again = kbert.ELMo.from_pretrained(tmp_path / "bilm")
    np.testing.assert_allclose(again(chars)["hidden_states"][-1].numpy(),
                               elmo(chars)["hidden_states"][-1].numpy(), atol=1e-6)


def test_token_mode_checks_its_table(models):
    elmo, vocab, _ = models
    with pytest.raises(ValueError, match=r"token embeddings of shape \(3, 8\): expected"):
        elmo.with_token_table(vocab, np.zeros((3, 8)))
    with pytest.raises(ValueError, match="the vocabulary has no <S>"):
        elmo.with_token_table(["</S>", "x"])


def test_token_mode_is_not_exported(models, tmp_path):
    from kbert.export.elmo_graph import export_elmo

    _, _, token_elmo = models
    with pytest.raises(ValueError, match="export a character-mode ELMo"):
        export_elmo(token_elmo, kbert.ELMoCharTokenizer(12), str(tmp_path / "e" / "1"))
