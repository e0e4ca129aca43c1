"""ELMoConfig from bilm-tf's options.json, and ELMoCharTokenizer against bilm-tf's
`Batcher` convention, written out below from bilm-tf's `UnicodeCharsVocabulary` and
`Batcher` (a port, not bilm-tf run: bilm-tf is not on PyPI, and its package imports its
TF1 model code, which does not run on TensorFlow 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from kbert.models.elmo.config import PUBLISHED_FILTERS, ELMoConfig
from kbert.tokenizers.elmo import ELMoCharTokenizer


def batcher_char_ids(sentences: list[list[str]], length: int = 50) -> np.ndarray:
    """bilm-tf's convention for words (without the sentence marks, which kbert's model
    adds): begin-of-word 258, the UTF-8 bytes cut to length - 2, end-of-word 259,
    padding 260, `<S>`/`</S>` as the marks 256/257, everything + 1, 0 for no word."""
    def word_ids(word):
        if word in ("<S>", "</S>"):
            code = [258, 256 if word == "<S>" else 257, 259] + [260] * (length - 3)
        else:
            data = word.encode("utf-8", "ignore")[:length - 2]
            code = [258] + list(data) + [259] + [260] * (length - 2 - len(data))
        return [c + 1 for c in code]

    width = max([len(s) for s in sentences] + [0])
    out = np.zeros((len(sentences), width, length), np.int32)
    for i, sentence in enumerate(sentences):
        for j, word in enumerate(sentence):
            out[i, j] = word_ids(word)
    return out


TEXTS = ["The cat sat .", "naïve café 数字 🙂", "x" * 60, "a" + "é" * 30, "", "  spaced\tout\n",
         "a\u3000b\u00a0c\u2028d\x1ce", "<S> and </S> words", "nul\x00inside"]


def test_char_ids_equal_bilm_tf_convention():
    tok = ELMoCharTokenizer()
    out = tok(TEXTS)
    want = batcher_char_ids([t.split() for t in TEXTS])
    np.testing.assert_array_equal(out["char_ids"].numpy(), want)
    np.testing.assert_array_equal(out["padding_mask"].numpy(),
                                  (want.sum(-1) > 0).astype("int32"))
    # A word of 60 bytes keeps 48, then the end-of-word mark; "a" + 30 two-byte
    # characters is cut inside the 24th character (its first byte, 0xC3, kept).
    ids = out["char_ids"].numpy()
    assert ids[2, 0, 48] == ord("x") + 1 and ids[2, 0, 49] == 259 + 1
    assert ids[3, 0, 48] == 0xC3 + 1 and ids[3, 0, 49] == 259 + 1


def test_empty_input_and_pre_split_words():
    tok = ELMoCharTokenizer(max_characters_per_token=8)
    empty = tok([""])
    assert empty["char_ids"].shape == (1, 0, 8) and empty["padding_mask"].shape == (1, 0)
    words = tf.ragged.constant([["a b", "c"], []])  # already split: "a b" is one word
    out = tok(words)
    np.testing.assert_array_equal(out["char_ids"].numpy(),
                                  batcher_char_ids([["a b", "c"], []], length=8))


def test_in_graph():
    tok = ELMoCharTokenizer()
    ds = tf.data.Dataset.from_tensor_slices(TEXTS[:4]).batch(2).map(
        lambda t: tok(t)["char_ids"])
    batches = [b.numpy() for b in ds]
    want = batcher_char_ids([t.split() for t in TEXTS[:2]])
    np.testing.assert_array_equal(batches[0], want)


def test_config_reads_and_writes_options_json(tmp_path):
    options = {"lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3,
                        "proj_clip": 3, "use_skip_connections": True},
               "char_cnn": {"embedding": {"dim": 16}, "n_characters": 262,
                            "max_characters_per_token": 50, "n_highway": 2,
                            "activation": "relu",
                            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256],
                                        [6, 512], [7, 1024]]}}
    (tmp_path / "options.json").write_text(json.dumps(options))
    config = ELMoConfig.from_json_file(tmp_path / "options.json")
    assert config == ELMoConfig.preset("original")
    assert config.num_filters == 2048 and config.filters == PUBLISHED_FILTERS
    # bilm-tf's training options add "dropout" (0.1 when absent, as bilm-tf's default).
    assert config.to_reference_dict() == {**options, "lstm": {**options["lstm"]}, "dropout": 0.1}
    assert ELMoConfig.from_dict(config.to_dict()) == config
    for name, (dim, proj, highway) in {"small": (1024, 128, 1), "medium": (2048, 256, 1),
                                       "original": (4096, 512, 2)}.items():
        c = ELMoConfig.preset(name)
        assert (c.lstm_dim, c.projection_dim, c.num_highway, c.num_filters) == (
            dim, proj, highway, 2048)
    del options["lstm"]["dim"]
    (tmp_path / "bad.json").write_text(json.dumps(options))
    with pytest.raises(ValueError, match=r"bad.json: ELMo options are missing field\(s\) "
                                         r"\['lstm.dim'\]"):
        ELMoConfig.from_json_file(tmp_path / "bad.json")
