"""RoBERTa's tokenizer in-graph: GPT-2's byte-level BPE (`GPTTokenizer`, the engine)
with RoBERTa's special tokens and packing, ids equal to `transformers`'
`RobertaTokenizer` built from the same folder.

- Special-token strings written in a text (`<s>`, `<pad>`, `</s>`, `<unk>`, `<mask>`)
  are those tokens, as Hugging Face reads them: the text is cut at each one and the
  pieces between are tokenized apart. A token declared with `lstrip` in the folder's
  `tokenizer_config.json` (`added_tokens_decoder`; `roberta-base` declares it for
  `<mask>`) takes the whitespace before it.
- `<s> A </s>` and `<s> A </s></s> B </s>`, pairs cut longest-first as Hugging Face's
  tokenizers cut them (`packing.truncate_pair_lengths_hf`, which differs from BERT's
  rule on odd budgets), padded with `<pad>` on the right.
"""

from __future__ import annotations

import os
import re

import tensorflow as tf
import tensorflow_text as tf_text

from kbert.io import read_json
from kbert.tokenizers.base import Tokenizer
from kbert.tokenizers.gpt import GPTTokenizer
from kbert.tokenizers.packing import truncate, truncate_pair_lengths_hf

SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
# Unicode White_Space (what the Rust tokenizers' lstrip removes), as an RE2 class.
_WHITESPACE = ("[\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}"
               "\\x{2029}\\x{202F}\\x{205F}\\x{3000}]")


class RobertaTokenizer(Tokenizer):
    """RoBERTa's byte-level BPE (see the module docstring).

    Args:
        vocabulary: token -> id (`vocab.json`), or its path; it holds the special tokens.
        merges: the merge pairs (`merges.txt`), or its path.
        seq_length: length `__call__` packs to.
        lstrip: the special tokens that take the whitespace before them.
    """

    family = "roberta"
    tasks = frozenset({"glue"})
    exports = frozenset({"classifier", "embeddings"})
    special_tokens = (2, 4)

    def __init__(self, vocabulary, merges, seq_length: int = 512, lstrip=(),
                 name: str | None = None):
        super().__init__(name=name)
        self.bpe = GPTTokenizer(vocabulary, merges, seq_length=seq_length)
        vocab = self.bpe.vocabulary
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise ValueError(f"RobertaTokenizer vocabulary lacks {', '.join(missing)}")
        self.seq_length = int(seq_length)
        self.lstrip = tuple(t for t in SPECIAL_TOKENS if t in set(lstrip))
        self.cls_id, self.pad_id, self.sep_id = vocab["<s>"], vocab["<pad>"], vocab["</s>"]
        self.unk_id, self.mask_id = vocab["<unk>"], vocab["<mask>"]
        self._special_pattern = "|".join(re.escape(t) for t in SPECIAL_TOKENS)
        self._specials = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(SPECIAL_TOKENS), tf.constant([vocab[t] for t in SPECIAL_TOKENS],
                                                     tf.int32)), -1)
        self._lstrip_pattern = ("(" + "|".join(re.escape(t) for t in self.lstrip) + ")"
                                if self.lstrip else None)

    @property
    def vocabulary(self) -> dict[str, int]:
        return self.bpe.vocabulary

    @property
    def vocab_size(self) -> int:
        return max(self.bpe.vocabulary.values()) + 1

    @property
    def supports_pairs(self) -> bool:
        return True

    def tokenize(self, texts) -> tf.RaggedTensor:
        """int32 RaggedTensor [batch, (tokens)], no `<s>`/`</s>` added."""
        texts = self.as_batch(texts)
        if self._lstrip_pattern:
            texts = tf.strings.regex_replace(texts, _WHITESPACE + "+" + self._lstrip_pattern,
                                             "\\1")
        pieces = tf_text.regex_split(texts, self._special_pattern, self._special_pattern)
        flat = pieces.flat_values  # (P,): plain pieces and special tokens
        special = self._specials.lookup(flat)
        is_special = special >= 0
        plain = self.bpe.tokenize(tf.where(is_special, "", flat))  # (P, (t)), [] for specials
        marks = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(special, is_special),
                                                 tf.cast(is_special, tf.int64))
        ids = tf.concat([tf.cast(plain, tf.int32), marks], axis=1)
        return tf.RaggedTensor.from_row_splits(ids, pieces.row_splits).merge_dims(1, 2)

    def detokenize(self, ids) -> tf.Tensor:
        return self.bpe.detokenize(ids)

    def __call__(self, texts, texts_b=None, seq_length: int | None = None) -> dict:
        """`token_ids`, `padding_mask` int32 [batch, seq_length]: `<s> A </s>` or
        `<s> A </s></s> B </s>`, pairs cut longest-first, `<pad>` on the right."""
        seq_length = int(seq_length or self.seq_length)
        specials = 2 if texts_b is None else 4
        if seq_length < specials + 1:
            raise ValueError(f"seq_length={seq_length} leaves no room for a token besides "
                             f"the {specials} special tokens")
        a = tf.cast(self.tokenize(texts), tf.int64)
        batch = a.nrows()
        budget = tf.constant(seq_length - specials, tf.int64)

        def column(value, count=1):
            return tf.RaggedTensor.from_row_lengths(
                tf.fill([batch * count], tf.constant(value, tf.int64)),
                tf.fill([batch], tf.constant(count, tf.int64)))

        if texts_b is None:
            a = truncate(a, tf.fill([batch], budget))
            tokens = tf.concat([column(self.cls_id), a, column(self.sep_id)], axis=1)
        else:
            b = tf.cast(self.tokenize(self.as_batch(texts_b, "texts_b")), tf.int64)
            if a.shape[0] is not None and b.shape[0] is not None and a.shape[0] != b.shape[0]:
                raise ValueError(f"a pair needs as many second texts as first texts: got "
                                 f"{a.shape[0]} and {b.shape[0]}")
            keep_a, keep_b = truncate_pair_lengths_hf(a.row_lengths(), b.row_lengths(),
                                                      budget)
            tokens = tf.concat([column(self.cls_id), truncate(a, keep_a),
                                column(self.sep_id, 2), truncate(b, keep_b),
                                column(self.sep_id)], axis=1)
        shape = [None, seq_length]
        return {"token_ids": tf.cast(tokens.to_tensor(self.pad_id, shape=shape), tf.int32),
                "padding_mask": tf.cast(tf.ones_like(tokens).to_tensor(0, shape=shape),
                                        tf.int32)}

    # ---------------------------------------------------------------- files
    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **kwargs) -> "RobertaTokenizer":
        """A folder with `vocab.json` + `merges.txt` (Hugging Face, kbert); the special
        tokens' `lstrip` from its `tokenizer_config.json` where it declares them."""
        path = os.fspath(path)
        vocab, merges = os.path.join(path, "vocab.json"), os.path.join(path, "merges.txt")
        if not (os.path.exists(vocab) and os.path.exists(merges)):
            raise FileNotFoundError(f"{path}: no vocab.json + merges.txt (Hugging Face "
                                    "RoBERTa)")
        settings = {}
        config_file = os.path.join(path, "tokenizer_config.json")
        config = read_json(config_file) if os.path.exists(config_file) else {}
        if isinstance(config, dict):
            added = config.get("added_tokens_decoder") or {}
            settings["lstrip"] = tuple(entry.get("content") for entry in added.values()
                                       if isinstance(entry, dict) and entry.get("lstrip"))
            if "lstrip" in config:
                settings["lstrip"] = tuple(config["lstrip"])
            if isinstance(config.get("model_max_length"), int) and \
                    config["model_max_length"] < 10 ** 6:
                settings["seq_length"] = config["model_max_length"]
        return cls(vocab, merges, **{**settings, **kwargs})

    def assets(self) -> dict[str, str]:
        return self.bpe.assets()

    def config(self) -> dict:
        return {"tokenizer_class": "RobertaTokenizer", "model_max_length": self.seq_length,
                "lstrip": list(self.lstrip)}
