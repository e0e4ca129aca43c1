"""GPT-2's byte-level BPE in-graph, with the ids of OpenAI's `encoder.py` on any input.

OpenAI's encoder (1) splits the text with a `regex` pattern into words, (2) turns each
word's UTF-8 bytes into printable stand-in characters (`bytes_to_unicode`), (3) merges
adjacent symbols, lowest merge rank first, until no listed pair is left, and (4) looks
the symbols up in `encoder.json`. kbert does each step with TensorFlow ops:

1. The pattern `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`
   needs a lookahead that RE2 (TensorFlow's regex engine) lacks, and classes that are
   `regex`'s, not RE2's. Its matches are decided by each character's class and its
   neighbours, so kbert computes where each word starts from the code points' classes
   (looked up in ranges made by `regex` itself, `gpt2_classes.py`):
     - a run of letters, of numbers, or of other characters is one word; a single space
       (U+0020, only that character) before it belongs to it;
     - a run of whitespace followed by a word keeps its last character apart (that
       character starts the next word if it is a space, or is a word of its own); at the
       end of the text the run is one word;
     - `'s 't 're 've 'm 'll 'd` (case-sensitive) are words where an apostrophe starts
       one (not after a space, which joins the apostrophe to a run of other characters).
2.-4. Merging runs over all words of a batch at once: every round looks every adjacent
   pair up in a table of merge ranks, and each word merges every occurrence of its best
   pair, left to right without overlap, as `encoder.py`'s `bpe()` does.

Text that is not valid UTF-8 is split as if each bad byte were U+FFFD, and its bytes are
kept: `detokenize(tokenize(t)) == t` for any bytes.

`<|endoftext|>` written in a text is plain text by default, as in OpenAI's encoder (a
user's text cannot inject the end token). `special_tokens_in_text=True` reads it as the
end token instead, as Hugging Face's GPT-2 tokenizers do.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from kbert import hub
from kbert.io import read_json
from kbert.tokenizers import gpt2_classes
from kbert.tokenizers.base import Held, Tokenizer
from kbert.tokenizers.bpe import (HeldBpe, MergeTable, bpe_assets, bytes_to_unicode,
                                  merge_rounds, read_merges)  # noqa: F401 (read_merges: public here)
from kbert.tokenizers.packing import pack_decoder
from kbert.tokenizers.task_tokens import TASK_TOKENS, TaskTokens, read_pair_format

END_TOKEN = "<|endoftext|>"
_APOSTROPHE, _SPACE = 39, 32
_WHITESPACE, _LETTER = 3, 1


class GPTTokenizer(HeldBpe, TaskTokens, Tokenizer):
    """GPT-2's byte-level BPE, in-graph (see the module docstring).

    Args:
        vocabulary: token -> id (`encoder.json` / `vocab.json`), or its path.
        merges: the merge pairs in rank order (`vocab.bpe` / `merges.txt`), or its path.
        seq_length: length `__call__` packs to.
        special_tokens_in_text: read `<|endoftext|>` in texts as the end token
            (Hugging Face) instead of as plain text (OpenAI, the default).
        pair_format: with the task tokens in the vocabulary (`with_task_tokens`), how
            `__call__` packs pairs: "entailment" (start a delimiter b extract) or
            "similarity" (both orders, the second under `token_ids_b`).

    Example:
    >>> tok = GPTTokenizer({"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4, END_TOKEN: 5},
    ...                    [("a", "b"), ("Ġ", "ab")])
    >>> tok.tokenize(["ab ab"]).to_list()
    [[2, 4]]
    >>> tok.detokenize([[2, 4]]).numpy().tolist()
    [b'ab ab']
    """

    family = "gpt"
    tasks = frozenset({"glue", "pretrain", "seq2seq"})
    exports = frozenset({"classifier", "embeddings", "generate"})

    def __init__(self, vocabulary, merges, seq_length: int = 1024,
                 special_tokens_in_text: bool = False, pair_format: str = "entailment",
                 name: str | None = None):
        super().__init__(name=name)
        self.hold(vocabulary, merges)
        self.seq_length = int(seq_length)
        self.special_tokens_in_text = bool(special_tokens_in_text)
        self.end_token_id = self._vocabulary.get(END_TOKEN)
        self._set_task_tokens(self._vocabulary, pair_format)
        if self.special_tokens_in_text and self.end_token_id is None:
            raise ValueError(f"special_tokens_in_text=True: the vocabulary has no {END_TOKEN}")
        to_char = bytes_to_unicode()
        missing = [c for c in to_char.values() if c not in self._vocabulary]
        if missing:
            raise ValueError(f"GPTTokenizer vocabulary lacks {len(missing)} of the 256 byte "
                             f"symbols (e.g. {missing[0]!r}); every byte must have an id")
        for i, (a, b) in enumerate(self._merges):
            if a + b not in self._vocabulary:
                raise ValueError(f"merge {i} ({a!r} {b!r}): {a + b!r} is not in the "
                                 "vocabulary")

        def table(keys, values, key_dtype, value_dtype, default):
            return tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys, key_dtype), tf.constant(values, value_dtype)), default)

        ordered = sorted(self._vocabulary.items(), key=lambda kv: kv[1])
        size = max(self._vocabulary.values()) + 1
        strings = [""] * size
        for token, i in ordered:
            strings[i] = token
        self._id_to_token = tf.constant(strings)
        self._merge_table = MergeTable(self._vocabulary, self._merges)
        self._byte_ids = table([bytes([b]) for b in range(256)],
                               [self._vocabulary[to_char[b]] for b in range(256)], tf.string,
                               tf.int32, -1)
        back = [0] * (max(ord(c) for c in to_char.values()) + 1)
        for b, c in to_char.items():
            back[ord(c)] = b
        self._char_to_byte = tf.constant(back, tf.int32)
        self._single_bytes = tf.constant([bytes([b]) for b in range(256)])
        # The class of every code point up to the last range's start, one gather a
        # character (a binary search over the 1,650 ranges took a quarter of `_split`).
        starts, classes = zip(*gpt2_classes.RANGES)
        self._last_class_start = starts[-1]
        self._class_of = tf.constant(
            np.repeat(np.array(classes, np.int32), np.diff(list(starts) + [starts[-1] + 1])))
        self._build_word_cache(to_char)
        spec = tf.TensorSpec([None], tf.string)
        self._eager = Held(
            tokenize=tf.function(self._tokenize, input_signature=[spec], autograph=False),
            encode=tf.function(self._encode,
                               input_signature=[spec, tf.TensorSpec([], tf.int64)],
                               autograph=False))

    # ---------------------------------------------------------------- properties
    @property
    def vocabulary(self) -> dict[str, int]:
        return dict(self._vocabulary)

    @property
    def merges(self) -> list[tuple[str, str]]:
        return list(self._merges)

    @property
    def vocab_size(self) -> int:
        return len(self._vocabulary)

    def token_bytes(self) -> list[bytes]:
        """The bytes each id stands for (index = id): decoding is their concatenation
        (`kbert.models.generation` matches stop strings on them in-graph)."""
        back = {c: b for b, c in bytes_to_unicode().items()}
        return [bytes(back[c] for c in token.decode("utf-8"))
                for token in self._id_to_token.numpy()]

    @property
    def pad_id(self) -> int:
        """Padding carries the end token's id (GPT-2 has no padding token); the padding
        mask says which positions are real."""
        return self.end_token_id or 0

    # ---------------------------------------------------------------- splitting
    def split_words(self, texts) -> tf.RaggedTensor:
        """tf.string [batch] -> RaggedTensor [batch, (words)] of the words `encoder.py`'s
        pattern finds (byte strings; they join back to the text)."""
        texts = self.as_batch(texts)
        return self._split(texts)

    def _split(self, texts):
        chars, offsets = tf.strings.unicode_decode_with_offsets(
            texts, "UTF-8", errors="replace", replacement_char=0xFFFD)
        flat = chars.flat_values  # (C,) code points of every text
        rows = chars.value_rowids()
        n = tf.size(flat)
        cls = tf.gather(self._class_of, tf.minimum(flat, self._last_class_start))
        ws = tf.equal(cls, _WHITESPACE)
        sp = tf.equal(flat, _SPACE)

        def moved(x, k, fill):
            """x[i - k] (k > 0: the k-th previous element; k < 0: a following one), or
            `fill` beyond the ends."""
            pad = tf.fill([abs(k)], tf.constant(fill, x.dtype))
            if k > 0:
                return tf.concat([pad, x], 0)[:n]
            return tf.concat([x, pad], 0)[-k:][:n]

        same_rows = {}

        def shift(x, k, fill):
            """`moved`, with `fill` where that element is in another text."""
            if k not in same_rows:
                same_rows[k] = tf.equal(moved(rows, k, -1), rows)
            return tf.where(same_rows[k], moved(x, k, fill),
                            tf.fill([n], tf.constant(fill, x.dtype)))

        first = tf.not_equal(shift(rows, 1, -1), rows)
        prev_ws = shift(ws, 1, False)
        prev_sp = shift(sp, 1, False)
        prev_cls = shift(cls, 1, -1)
        has_next = tf.equal(shift(rows, -1, -1), rows)
        next_ws = shift(ws, -1, False)
        run_start = tf.logical_and(ws, tf.logical_not(prev_ws))
        before_word = tf.logical_and(ws, tf.logical_and(has_next, tf.logical_not(next_ws)))
        word_start = tf.logical_and(tf.logical_not(ws), tf.where(
            prev_ws, tf.logical_not(prev_sp), tf.not_equal(prev_cls, cls)))
        start = first | run_start | before_word | word_start

        # Contractions where an apostrophe starts a word: 's 't 'm 'd (2), 're 've 'll (3).
        c1, c2 = shift(flat, -1, -1), shift(flat, -2, -1)
        two = tf.reduce_any(tf.equal(c1[:, None], tf.constant([[ord(c) for c in "stmd"]])),
                            axis=1)
        three = ((tf.equal(c1, ord("r")) & tf.equal(c2, ord("e")))
                 | (tf.equal(c1, ord("v")) & tf.equal(c2, ord("e")))
                 | (tf.equal(c1, ord("l")) & tf.equal(c2, ord("l"))))
        at = start & tf.equal(flat, _APOSTROPHE)
        length = tf.where(at & two, 2, tf.where(at & three, 3, 0))
        inside = (shift(length, 1, 0) >= 2) | tf.equal(shift(length, 2, 0), 3)
        after = tf.equal(shift(length, 2, 0), 2) | tf.equal(shift(length, 3, 0), 3)
        start = (start & tf.logical_not(inside)) | after

        # Byte spans of the words, cut from the batch's texts joined into one string
        # (rather than from a copy of its text for every word).
        word_rows = tf.boolean_mask(rows, start)
        sizes = tf.cast(tf.strings.length(texts, unit="BYTE"), offsets.dtype)  # (B,)
        text_start = tf.cumsum(sizes, exclusive=True)
        begin = tf.boolean_mask(offsets.flat_values, start) + tf.gather(text_start, word_rows)
        is_last = tf.not_equal(word_rows, tf.concat([word_rows[1:], [-1]], 0))
        end = tf.where(is_last, tf.gather(text_start + sizes, word_rows),
                       tf.concat([begin[1:], tf.zeros([1], begin.dtype)], 0))
        words = tf.strings.substr(tf.strings.reduce_join(texts), tf.cast(begin, tf.int32),
                                  tf.cast(end - begin, tf.int32))
        return tf.RaggedTensor.from_value_rowids(words, word_rows,
                                                 nrows=tf.shape(texts, tf.int64)[0], validate=False)

    # ---------------------------------------------------------------- BPE
    def _bpe(self, words):
        """tf.string [W] words -> int32 RaggedTensor [W, (tokens)]."""
        pieces = tf.strings.bytes_split(words)  # (W, (bytes))
        return merge_rounds(self._merge_table, pieces.value_rowids(),
                            self._byte_ids.lookup(pieces.flat_values),
                            tf.shape(words, tf.int64)[0])

    # ---------------------------------------------------------------- tokenizing
    def _tokenize(self, texts):
        if self.special_tokens_in_text:
            return self._tokenize_with_special(texts)
        return self._tokenize_plain(texts)

    def _tokenize_with_special(self, texts):
        """Hugging Face's reading: the text between `<|endoftext|>` marks is tokenized
        on its own, and each mark is the end token."""
        pieces = tf.strings.split(texts, sep=END_TOKEN)  # (B, (marks + 1)), bytes kept
        plain = self._tokenize_plain(pieces.flat_values)  # (P, (T))
        # The end token after every piece but the last of its text.
        last = tf.not_equal(pieces.value_rowids(),
                            tf.concat([pieces.value_rowids()[1:], [-1]], 0))
        marks = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(1 - tf.cast(last, tf.int32))], self.end_token_id),
            1 - tf.cast(last, tf.int64), validate=False)
        ids = tf.concat([plain, marks], axis=1)
        return tf.RaggedTensor.from_row_splits(ids, pieces.row_splits,
                                               validate=False).merge_dims(1, 2)

    def _build_word_cache(self, to_char) -> None:
        """Most words of a text are tokens of the vocabulary: the merges of every token's
        bytes, taken as a word, are computed once, here, with the same in-graph BPE (so
        the cache is exact by construction, whatever merges the word needs), and looked
        up at call time; only the other words go through the merge rounds."""
        back = {c: b for b, c in to_char.items()}
        keys = []
        for token in self._vocabulary:
            if token in TASK_TOKENS or token == END_TOKEN or any(c not in back for c in token):
                continue
            keys.append(bytes(back[c] for c in token))
        keys = sorted(keys)
        if not keys:
            self._word_cache = None
            return
        # One graph (a while loop of merge rounds over 50,000 words): eagerly, each
        # round's ops were dispatched from Python, 0.9 s of a GPT-2 load.
        ids = tf.function(self._bpe, autograph=False)(tf.constant(keys))
        self._word_cache = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys), tf.range(len(keys), dtype=tf.int64)), -1)
        self._cache_ids = tf.constant(ids.flat_values.numpy())
        self._cache_splits = tf.constant(ids.row_splits.numpy())

    def _unique_bpe(self, words):
        """`_bpe` of each distinct word once (words repeat: a batch of text holds far
        fewer distinct words than words), gathered back to every word."""
        distinct, index = tf.unique(words)
        return tf.gather(self._bpe(distinct), index)

    def _words_to_ids(self, words):
        """tf.string [W] -> int32 RaggedTensor [W, (tokens)], cached words looked up."""
        if self._word_cache is None:
            return self._unique_bpe(words)
        slot = self._word_cache.lookup(words)  # (W,), -1 for a word not cached
        hit = slot >= 0
        cached = tf.RaggedTensor.from_row_splits(self._cache_ids, self._cache_splits,
                                                 validate=False)
        hits = tf.gather(cached, tf.boolean_mask(slot, hit))  # (H, (T))
        misses = self._unique_bpe(tf.boolean_mask(words, tf.logical_not(hit)))  # (M, (T))
        # Back in word order: hits and misses interleaved as the words were.
        where_hit = tf.cast(tf.where(hit)[:, 0], tf.int32)
        where_miss = tf.cast(tf.where(tf.logical_not(hit))[:, 0], tf.int32)
        order = tf.math.invert_permutation(tf.concat([where_hit, where_miss], 0))
        return tf.gather(tf.concat([hits, misses], axis=0), order)

    def encode_words(self, words) -> tf.RaggedTensor:
        """tf.string [W] words (as `split_words` gives them) -> int32 RaggedTensor
        [W, (tokens)]: each word's BPE ids."""
        return self._words_to_ids(words)

    def _tokenize_plain(self, texts):
        words = self._split(texts)
        ids = self._words_to_ids(words.flat_values)  # (W, (T))
        return tf.RaggedTensor.from_row_splits(ids, words.row_splits,
                                               validate=False).merge_dims(1, 2)

    def detokenize(self, ids) -> tf.Tensor:
        """The bytes the ids stand for, joined: tf.string [batch] (the exact text back)."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)
            if ids.shape.rank == 1:
                ids = ids[None]
            ids = tf.RaggedTensor.from_tensor(ids)
        tokens = tf.gather(self._id_to_token, tf.cast(ids, tf.int32))
        joined = tf.strings.reduce_join(tokens, axis=-1)
        chars = tf.strings.unicode_decode(joined, "UTF-8")
        values = tf.gather(self._char_to_byte, chars)
        return tf.strings.reduce_join(tf.gather(self._single_bytes, values), axis=-1)

    # ---------------------------------------------------------------- fine-tuning
    def _with_vocabulary(self, vocabulary, pair_format) -> "GPTTokenizer":
        return GPTTokenizer(vocabulary, self._merges, seq_length=self.seq_length,
                            special_tokens_in_text=self.special_tokens_in_text,
                            pair_format=pair_format)

    def __call__(self, texts, texts_b=None, seq_length: int | None = None) -> dict:
        """`token_ids` and `padding_mask`, int32 [batch, seq_length], padded on the right
        (`GPTDecoder` also takes left padding) and cut to `seq_length` tokens. With the
        task tokens (`with_task_tokens`), the fine-tuning formats, pairs cut
        longest-first."""
        seq_length = int(seq_length or self.seq_length)
        texts = self.as_batch(texts)
        self._check_pair_call(texts_b, seq_length)
        texts_b = None if texts_b is None else self.as_batch(texts_b, "texts_b")
        if self.task_token_ids is not None:
            return self._encode_task(texts, texts_b, seq_length)
        if tf.executing_eagerly():
            return self._eager.encode(texts, tf.constant(seq_length, tf.int64))
        return self._encode(texts, seq_length)

    def _encode(self, texts, seq_length):
        return pack_decoder(self._tokenize(texts), seq_length, pad_id=self.pad_id)

    # ---------------------------------------------------------------- files
    @staticmethod
    def folder_has_files(path) -> bool:
        path = os.fspath(path)
        return any(os.path.exists(os.path.join(path, a)) and os.path.exists(
            os.path.join(path, b)) for a, b in (("vocab.json", "merges.txt"),
                                                ("encoder.json", "vocab.bpe")))

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **kwargs) -> "GPTTokenizer":
        """A folder with `vocab.json` + `merges.txt` (Hugging Face, kbert) or
        `encoder.json` + `vocab.bpe` (OpenAI). A GPT-1 folder (Hugging Face `openai-gpt`,
        or a kbert folder of a GPT-1) gives its `GPT1Tokenizer`."""
        path = hub.resolve(path)
        if _is_gpt1_folder(path):
            from kbert.tokenizers.gpt1 import GPT1Tokenizer

            return GPT1Tokenizer.from_pretrained(
                path, **{k: v for k, v in kwargs.items()
                         if k in ("seq_length", "pair_format")})
        for vocab, merges in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
            if os.path.exists(os.path.join(path, vocab)) and os.path.exists(
                    os.path.join(path, merges)):
                file = os.path.join(path, "tokenizer_config.json")
                d = read_json(file) if os.path.exists(file) else {}
                settings = {**read_pair_format(path, d), **cls.saved_seq_length(d)}
                if isinstance(d, dict) and "special_tokens_in_text" in d:
                    settings["special_tokens_in_text"] = bool(d["special_tokens_in_text"])
                return cls(os.path.join(path, vocab), os.path.join(path, merges),
                           **{**settings, **kwargs})
        raise FileNotFoundError(f"{path}: no vocab.json + merges.txt (Hugging Face) or "
                                "encoder.json + vocab.bpe (OpenAI)")

    def assets(self) -> dict[str, str]:
        """`vocab.json` and `merges.txt` in Hugging Face's layout."""
        return bpe_assets(self._vocabulary, self._merges)

    def config(self) -> dict:
        return {"tokenizer_class": "GPTTokenizer", "model_max_length": self.seq_length,
                "special_tokens_in_text": self.special_tokens_in_text,
                "pair_format": self.pair_format}


def _is_gpt1_folder(path: str) -> bool:
    for name, key, value in (("tokenizer_config.json", "tokenizer_class", "GPT1Tokenizer"),
                             ("tokenizer_config.json", "tokenizer_class",
                              "OpenAIGPTTokenizer"),
                             ("config.json", "model_type", "openai-gpt")):
        file = os.path.join(path, name)
        if os.path.exists(file):
            d = read_json(file)
            if isinstance(d, dict) and d.get(key) == value:
                return True
    return False
