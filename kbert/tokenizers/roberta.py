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

from kbert import hub
from kbert.io import read_json
from kbert.tokenizers.base import Tokenizer
from kbert.tokenizers.gpt import GPTTokenizer
from kbert.tokenizers import packing, strings
from kbert.tokenizers.packing import truncate, truncate_pair_lengths_hf

SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
# Unicode White_Space (what the Rust tokenizers' lstrip removes), as an RE2 class.
_WHITESPACE = ("[\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}"
               "\\x{2029}\\x{202F}\\x{205F}\\x{3000}]")


def _within(rows: tf.RaggedTensor, values):
    """Exclusive running sums of `values` (one per value of `rows`), restarted at each
    row: the offset of each value in its row."""
    total = tf.concat([[0], tf.cumsum(values)], 0)  # total[i]: the sum before value i
    return total[:-1] - tf.repeat(tf.gather(total, rows.row_starts()), rows.row_lengths())


def _snap_to_characters(texts, starts, ends):
    """Byte offsets widened to whole characters (a token holding part of a character's
    bytes spans the character, as Hugging Face's offsets do): each start moves back to
    its character's first byte, each end forward to the next character boundary."""
    _, char_starts = tf.strings.unicode_decode_with_offsets(texts, "UTF-8",
                                                            errors="replace")
    lengths = tf.strings.length(texts, unit="BYTE")
    bounds = tf.concat([char_starts, tf.expand_dims(tf.cast(lengths, tf.int64), 1)],
                       axis=1)  # [B, (C + 1)], sorted
    # One sorted list for the batch (row * width + offset), not a [B, longest] table:
    # memory linear in the text, whatever the rows' lengths.
    width = tf.reduce_max(tf.concat([tf.cast(lengths, tf.int64), [0]], 0)) + 1
    shift = tf.range(bounds.nrows(out_type=tf.int64)) * width
    keys = bounds.flat_values + tf.repeat(shift, bounds.row_lengths())
    flat_bounds = bounds.flat_values

    def snap(offsets, side, back):
        query = offsets.flat_values + tf.gather(shift, offsets.value_rowids())
        found = tf.searchsorted(keys[tf.newaxis], query[tf.newaxis], side=side,
                                out_type=tf.int64)[0] - back
        return offsets.with_flat_values(tf.gather(flat_bounds, tf.maximum(found, 0)))

    return snap(starts, "right", 1), snap(ends, "left", 0)


class RobertaTokenizer(Tokenizer):
    """RoBERTa's byte-level BPE (see the module docstring).

    Args:
        vocabulary: token -> id (`vocab.json`), or its path; it holds the special tokens.
        merges: the merge pairs (`merges.txt`), or its path.
        seq_length: length `__call__` packs to.
        lstrip: the special tokens that take the whitespace before them.
    """

    family = "roberta"
    tasks = frozenset({"glue", "squad", "ner", "pretrain"})
    exports = frozenset({"classifier", "embeddings", "squad", "ner", "fill_mask"})
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
        self._special_pattern = "|".join(re.escape(t) for t in SPECIAL_TOKENS)
        self._specials = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(SPECIAL_TOKENS), tf.constant([vocab[t] for t in SPECIAL_TOKENS],
                                                     tf.int32)), -1)
        self._lstrip_pattern = ("(" + "|".join(re.escape(t) for t in self.lstrip) + ")"
                                if self.lstrip else None)
        # Per id: its bytes, and the spaces (Ġ) that lead and trail it, for offsets.
        size = max(vocab.values()) + 1
        lengths, lead, trail = [0] * size, [0] * size, [0] * size
        space = "\u0120"
        for token, i in vocab.items():
            lengths[i] = len(token)
            lead[i] = len(token) - len(token.lstrip(space))
            trail[i] = len(token) - len(token.rstrip(space))
        self._token_bytes = tf.constant(lengths, tf.int64)
        self._lead_spaces = tf.constant(lead, tf.int64)
        self._trail_spaces = tf.constant(trail, tf.int64)

    @property
    def vocabulary(self) -> dict[str, int]:
        return self.bpe.vocabulary

    @property
    def unk_id(self) -> int:
        return self.vocabulary["<unk>"]

    @property
    def mask_id(self) -> int:
        return self.vocabulary["<mask>"]

    @property
    def vocab_size(self) -> int:
        return max(self.bpe.vocabulary.values()) + 1

    @property
    def supports_pairs(self) -> bool:
        return True

    def _pieces(self, texts):
        """The texts cut at special tokens: (pieces, byte starts), [batch, (pieces)].
        Whitespace before an `lstrip` token goes with the token (it is dropped)."""
        if self._lstrip_pattern:
            stripped = _WHITESPACE + "+(" + self._lstrip_pattern + ")"
            keep = self._special_pattern + "|" + stripped
            pieces, starts, _ = strings.regex_split_with_offsets(texts, keep, keep)
            # A piece that is whitespace + an lstrip token is that token.
            flat = pieces.flat_values
            token = tf.strings.regex_replace(flat, "^" + stripped + "$", "\\1")
            moved = tf.strings.length(flat) - tf.strings.length(token)
            return (pieces.with_flat_values(token),
                    starts.with_flat_values(starts.flat_values + tf.cast(moved, tf.int64)))
        pieces, starts, _ = strings.regex_split_with_offsets(texts, self._special_pattern,
                                                             self._special_pattern)
        return pieces, starts

    def tokenize(self, texts) -> tf.RaggedTensor:
        """int32 RaggedTensor [batch, (tokens)], no `<s>`/`</s>` added."""
        return self.tokenize_with_offsets(texts)[0]

    def tokenize_with_offsets(self, texts):
        """(ids, starts, ends): RaggedTensors [batch, (tokens)], byte offsets of each
        token in the input, the spaces a token begins or ends with (Ġ) left out, as
        Hugging Face's `trim_offsets` does (a token of spaces only gets an empty span)."""
        texts = self.as_batch(texts)
        pieces, piece_starts = self._pieces(texts)
        flat, flat_starts = pieces.flat_values, piece_starts.flat_values  # (P,)
        special = self._specials.lookup(flat)
        is_special = special >= 0
        words = self.bpe.split_words(tf.where(is_special, "", flat))  # (P, (W))
        word_start = _within(words, tf.cast(tf.strings.length(words.flat_values), tf.int64))
        word_ids = tf.cast(self.bpe.encode_words(words.flat_values), tf.int64)  # (W, (t))
        ids = word_ids.flat_values
        size = tf.gather(self._token_bytes, ids)
        start = (tf.repeat(tf.gather(flat_starts, words.value_rowids()) + word_start,
                           word_ids.row_lengths()) + _within(word_ids, size))
        end = start + size
        start = tf.minimum(start + tf.gather(self._lead_spaces, ids), end)
        end = tf.maximum(end - tf.gather(self._trail_spaces, ids), start)
        per_piece = tf.math.unsorted_segment_sum(word_ids.row_lengths(), words.value_rowids(),
                                                 tf.shape(flat, tf.int64)[0])
        plain = tf.RaggedTensor.from_row_lengths(tf.stack([ids, start, end], axis=1),
                                                 per_piece, validate=False)  # (P, (t), 3)
        mark_start = tf.boolean_mask(flat_starts, is_special)
        marks = tf.RaggedTensor.from_row_lengths(
            tf.stack([tf.cast(tf.boolean_mask(special, is_special), tf.int64), mark_start,
                      mark_start + tf.cast(tf.strings.length(tf.boolean_mask(flat, is_special)),
                                           tf.int64)], axis=1),
            tf.cast(is_special, tf.int64), validate=False)  # (P, (0 or 1), 3)
        rows = tf.RaggedTensor.from_row_splits(tf.concat([plain, marks], axis=1),
                                               pieces.row_splits, validate=False).merge_dims(1, 2)
        values = rows.flat_values  # (N, 3): id, start, end
        starts, ends = _snap_to_characters(texts, rows.with_flat_values(values[:, 1]),
                                           rows.with_flat_values(values[:, 2]))
        return rows.with_flat_values(tf.cast(values[:, 0], tf.int32)), starts, ends

    def tokenize_words(self, words) -> tf.RaggedTensor:
        """Each word tokenized with a space before it (`Ġword`), as Hugging Face's
        RoBERTa tokenizer with `add_prefix_space=True` and `is_split_into_words=True`
        tokenizes a pre-split sentence (`run_ner.py`)."""
        words = self.as_batch(words, "words")
        return self.tokenize(tf.strings.join([" ", words]))

    def split_words(self, texts):
        """(words, starts, ends): the texts split on Unicode whitespace (as `str.split`),
        with byte offsets: the words NER tags (RoBERTa has no word splitter of its own)."""
        texts = self.as_batch(texts)
        words, starts, ends = strings.regex_split_with_offsets(texts, _WHITESPACE + "+")
        return words, starts, ends

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
                tf.fill([batch], tf.constant(count, tf.int64)), validate=False)

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

    def pack_segments(self, segments, seq_length: int | None = None):
        """`<s> A </s>` or `<s> A </s></s> B </s>` with the layout (see
        `Tokenizer.pack_segments`); pairs cut as Hugging Face cuts them."""
        return packing.pack_segments(
            segments, self.seq_length if seq_length is None else seq_length,
            start=(self.cls_id,), between=(self.sep_id, self.sep_id), end=(self.sep_id,),
            pad_id=self.pad_id, segment_ids=False,
            truncate_pair=packing.truncate_pair_lengths_hf)

    special_tokens_in_text = True

    @property
    def mask_token(self) -> str:
        return "<mask>"

    def token_strings(self) -> list[str]:
        """Each id's bytes as text (a token holding part of a character shows U+FFFD,
        as `transformers`' `decode([id])`); special tokens as written."""
        from kbert.tokenizers.bpe import bytes_to_unicode

        back = {c: b for b, c in bytes_to_unicode().items()}
        out = [""] * self.vocab_size
        for token, i in self.vocabulary.items():
            if token in SPECIAL_TOKENS or any(c not in back for c in token):
                out[i] = token
            else:
                out[i] = bytes(back[c] for c in token).decode("utf-8", errors="replace")
        return out

    # ---------------------------------------------------------------- files
    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **kwargs) -> "RobertaTokenizer":
        """A folder with `vocab.json` + `merges.txt` (Hugging Face, kbert); the special
        tokens' `lstrip` from its `tokenizer_config.json` where it declares them."""
        path = hub.resolve(path)
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
