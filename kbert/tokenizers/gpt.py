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

import json
import os

import numpy as np
import tensorflow as tf

from kbert.io import read_json
from kbert.tokenizers import gpt2_classes
from kbert.tokenizers.base import Held, Tokenizer
from kbert.tokenizers.packing import pack_decoder, truncate, truncate_pair_lengths

END_TOKEN = "<|endoftext|>"
# The tokens the GPT paper adds for fine-tuning (section 3.3), named as in OpenAI's
# finetune-transformer-lm code: start, delimiter, and the extract token whose final
# state the classifier reads.
TASK_TOKENS = ("_start_", "_delimiter_", "_classify_")
PAIR_FORMATS = ("entailment", "similarity")
_NO_RANK = 2 ** 31 - 1
_APOSTROPHE, _SPACE = 39, 32
_WHITESPACE, _LETTER = 3, 1


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's stand-in character of each byte: the printable bytes of Latin-1
    (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) stand for themselves, the other 68 bytes for
    U+0100, U+0101, ... in byte order (so no symbol holds a space or a control)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def bpe_assets(vocabulary, merges) -> dict[str, str]:
    """A BPE tokenizer's files in Hugging Face's layout: `vocab.json`, `merges.txt`."""
    return {"vocab.json": json.dumps(dict(vocabulary), ensure_ascii=False),
            "merges.txt": "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)}


def read_merges(path: str) -> list[tuple[str, str]]:
    """`merges.txt` / `vocab.bpe`: a `#version` line, then one pair a line."""
    merges = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or (number == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not all(parts):
                raise ValueError(f"{path}:{number}: expected two symbols separated by one "
                                 f"space, got {line!r}")
            merges.append((parts[0], parts[1]))
    return merges


class TaskTokens:
    """The GPT paper's fine-tuning inputs (section 3.3, figure 1), shared by GPT-2's and
    GPT-1's tokenizers: with `TASK_TOKENS` in the vocabulary,
        one text:    _start_ text _classify_
        entailment:  _start_ premise _delimiter_ hypothesis _classify_
        similarity:  the same for (a, b) and, under `token_ids_b` and `padding_mask_b`,
                     for (b, a); a classifier sums the two.
    A subclass calls `_set_task_tokens` and defines `_tokenize`, `pad_id` and
    `_with_vocabulary(vocabulary, pair_format)` (the same tokenizer, another
    vocabulary)."""

    def _set_task_tokens(self, vocabulary: dict, pair_format: str) -> None:
        if pair_format not in PAIR_FORMATS:
            raise ValueError(f"pair_format={pair_format!r}: choose from {PAIR_FORMATS}")
        self.pair_format = pair_format
        self.task_token_ids = (tuple(vocabulary[t] for t in TASK_TOKENS)
                               if all(t in vocabulary for t in TASK_TOKENS) else None)

    @property
    def supports_pairs(self) -> bool:
        return self.task_token_ids is not None

    def with_task_tokens(self, pair_format: str = "entailment"):
        """This tokenizer with `TASK_TOKENS` appended to the vocabulary (ids vocab_size ..
        vocab_size + 2, unless present), packing as the paper's input transformations
        (see the class docstring). No text tokenizes to these tokens."""
        vocabulary = dict(self._vocabulary)
        for token in TASK_TOKENS:
            vocabulary.setdefault(token, len(vocabulary))
        return self._with_vocabulary(vocabulary, pair_format)

    def for_task(self, task):
        """The tokenizer a GLUE task fine-tunes with: the task tokens, and the GPT
        paper's similarity format for the paraphrase and similarity tasks (MRPC, QQP,
        STS-B), entailment for the other pair tasks."""
        similarity = getattr(task, "name", task) in ("mrpc", "qqp", "stsb")
        return self.with_task_tokens("similarity" if similarity else "entailment")

    def _check_pair_call(self, texts_b, seq_length: int) -> None:
        if texts_b is not None and self.task_token_ids is None:
            raise ValueError("texts_b: pairs need the task tokens; use "
                             "tokenizer.with_task_tokens()")
        if self.task_token_ids is not None:
            specials = 2 if texts_b is None else 3
            if seq_length < specials + 1:
                raise ValueError(f"seq_length={seq_length} leaves no room for a token "
                                 f"besides the {specials} task tokens")

    def _encode_task(self, texts, texts_b, seq_length):
        start, delimiter, extract = self.task_token_ids
        a = tf.cast(self._tokenize(texts), tf.int64)
        if texts_b is None:
            return pack_decoder(a, seq_length, start_id=start, end_id=extract,
                                pad_id=self.pad_id)
        b = tf.cast(self._tokenize(texts_b), tf.int64)
        with tf.control_dependencies([tf.debugging.assert_equal(
                a.nrows(), b.nrows(), message="texts_b: a pair needs as many second texts "
                                              "as first texts")]):
            keep_a, keep_b = truncate_pair_lengths(a.row_lengths(), b.row_lengths(),
                                                   seq_length - 3)
        a, b = truncate(a, keep_a), truncate(b, keep_b)
        column = tf.RaggedTensor.from_row_lengths(
            tf.fill([a.nrows()], tf.constant(delimiter, tf.int64)), tf.ones([a.nrows()],
                                                                         tf.int64))
        first = pack_decoder(tf.concat([a, column, b], axis=1), seq_length, start_id=start,
                             end_id=extract, pad_id=self.pad_id)
        if self.pair_format == "entailment":
            return first
        second = pack_decoder(tf.concat([b, column, a], axis=1), seq_length, start_id=start,
                              end_id=extract, pad_id=self.pad_id)
        return {**first, "token_ids_b": second["token_ids"],
                "padding_mask_b": second["padding_mask"]}


def read_pair_format(path: str, config: dict | None = None) -> dict:
    """{"pair_format": ...} from a folder's `tokenizer_config.json` (or its `config`,
    already read), where it names one."""
    if config is None:
        file = os.path.join(path, "tokenizer_config.json")
        config = read_json(file) if os.path.exists(file) else {}
    if isinstance(config, dict) and config.get("pair_format") in PAIR_FORMATS:
        return {"pair_format": config["pair_format"]}
    return {}


class HeldBpe:
    """The vocabulary and merges of a BPE tokenizer, kept in `self._held`
    (`kbert.tokenizers.base.Held`: outside TensorFlow's object tracking)."""

    @property
    def _vocabulary(self) -> dict:
        return self._held.vocabulary

    @property
    def _merges(self) -> list:
        return self._held.merges


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

    tasks = frozenset({"glue", "pretrain"})
    exports = frozenset({"classifier", "embeddings", "generate"})

    def __init__(self, vocabulary, merges, seq_length: int = 1024,
                 special_tokens_in_text: bool = False, pair_format: str = "entailment",
                 name: str | None = None):
        super().__init__(name=name)
        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = read_json(os.fspath(vocabulary))
        if isinstance(merges, (str, os.PathLike)):
            merges = read_merges(os.fspath(merges))
        self._held = Held(vocabulary=dict(vocabulary), merges=[tuple(m) for m in merges])
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
        self._compiled_tokenize = tf.function(self._tokenize, input_signature=[spec],
                                              autograph=False)
        self._compiled_encode = tf.function(
            self._encode, input_signature=[spec, tf.TensorSpec([], tf.int64)],
            autograph=False)

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
                                                 nrows=tf.shape(texts, tf.int64)[0])

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
            1 - tf.cast(last, tf.int64))
        ids = tf.concat([plain, marks], axis=1)
        return tf.RaggedTensor.from_row_splits(ids, pieces.row_splits).merge_dims(1, 2)

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

    def _tokenize_plain(self, texts):
        words = self._split(texts)
        ids = self._words_to_ids(words.flat_values)  # (W, (T))
        return tf.RaggedTensor.from_row_splits(ids, words.row_splits).merge_dims(1, 2)

    def tokenize(self, texts) -> tf.RaggedTensor:
        """int32 RaggedTensor [batch, (tokens)]: OpenAI's `encoder.py` ids."""
        texts = self.as_batch(texts)
        if tf.executing_eagerly():
            return self._compiled_tokenize(texts)
        return self._tokenize(texts)

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
            return self._compiled_encode(texts, tf.constant(seq_length, tf.int64))
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
        path = os.fspath(path)
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
                settings = read_pair_format(path, d)
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


_PAIR_BASE = 2 ** 22  # a pair (left, right) of symbol ids is the key left * base + right


class MergeTable(tf.Module):
    """BPE merges as integer tables, so that the merge rounds handle no strings: each
    symbol is an id (the vocabulary's; strings that only merges name get ids past it),
    a pair of ids has its merge's rank, and a rank gives the merged symbol's id.

    Args:
        vocabulary: token -> id.
        merges: (left, right) pairs in rank order (the first of repeated pairs counts).
    """

    def __init__(self, vocabulary: dict, merges):
        super().__init__(name="merge_table")
        ids = dict(vocabulary)
        self.vocab_end = max(ids.values(), default=-1) + 1  # ids from here: not tokens
        for a, b in merges:
            for piece in (a, b, a + b):
                ids.setdefault(piece, self.vocab_end + len(ids) - len(vocabulary))
        if max(ids.values(), default=0) >= _PAIR_BASE:
            raise ValueError(f"BPE symbol ids up to {max(ids.values())}: this tokenizer "
                             f"handles ids below {_PAIR_BASE}")
        keys, ranks = [], []
        seen = set()
        for rank, (a, b) in enumerate(merges):
            key = ids[a] * _PAIR_BASE + ids[b]
            if key not in seen:
                seen.add(key)
                keys.append(key)
                ranks.append(rank)
        self.ranks = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.int64), tf.constant(ranks, tf.int32)), _NO_RANK)
        self.results = tf.constant([ids[a + b] for a, b in merges] or [0], tf.int32)
        strings = sorted(ids, key=ids.get)
        self.symbol_ids = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(strings), tf.constant([ids[t] for t in strings], tf.int32)), -1)


def merge_rounds(merges: MergeTable, rows, symbols, count) -> tf.RaggedTensor:
    """BPE on many words at once: int64 `rows` [N] (each symbol's word, sorted) and
    int32 symbol ids `symbols` [N] (`merges.symbol_ids`; -1 for a symbol no merge
    names) -> RaggedTensor [count, (ids)] of the merged symbols' ids.

    The symbols of all words lie in one flat vector, so a round costs what the words
    still merging hold, whatever the longest word. Each round, every word merges every
    occurrence of its best-ranked pair, left to right without overlap, as the reference
    `bpe()` does; a word without a listed pair is done and its symbols are emitted.
    """
    base = tf.constant(_PAIR_BASE, tf.int64)
    last_rank = tf.size(merges.results) - 1

    def cond(rows, symbols, out_rows, out_pos, out_symbols):
        return tf.size(rows) > 0

    def body(rows, symbols, out_rows, out_pos, out_symbols):
        n = tf.size(rows)
        index = tf.range(n)
        same = tf.equal(rows[1:], rows[:-1])  # pair (i, i + 1) inside one word
        wide = tf.cast(symbols, tf.int64)
        pair_ranks = tf.where(same & (symbols[:-1] >= 0) & (symbols[1:] >= 0),
                              merges.ranks.lookup(wide[:-1] * base + wide[1:]), _NO_RANK)
        pair_rows = rows[:-1]
        best = tf.math.unsorted_segment_min(pair_ranks, pair_rows, count)
        hit = tf.equal(pair_ranks, tf.gather(best, pair_rows)) & (pair_ranks < _NO_RANK)
        # Consecutive hits (a pair of equal symbols, "a a a"): every other one, from
        # the first, as the reference scans left to right.
        first_of_run = hit & tf.logical_not(tf.concat([[False], hit[:-1]], 0))
        runs = tf.cumsum(tf.cast(first_of_run, tf.int32))  # runs begun so far
        run_begin = tf.gather(tf.concat(
            [[0], tf.cast(tf.where(first_of_run)[:, 0], tf.int32)], 0), runs)
        merge = hit & tf.equal((index[:-1] - run_begin) % 2, 0)
        merged_ids = tf.gather(merges.results, tf.minimum(pair_ranks, last_rank))
        merge = tf.concat([merge, [False]], 0)  # (n,): symbol i takes symbol i + 1
        merged_ids = tf.concat([merged_ids, [0]], 0)
        merged_words = tf.math.unsorted_segment_max(tf.cast(merge, tf.int32), rows, count)
        done = tf.equal(tf.gather(merged_words, rows), 0)
        # Words without a listed pair are done: emit their symbols with positions.
        starts = tf.concat([[True], tf.not_equal(rows[1:], rows[:-1])], 0)
        word_start = tf.gather(tf.cast(tf.where(starts)[:, 0], tf.int32),
                               tf.cumsum(tf.cast(starts, tf.int32)) - 1)
        out_rows = tf.concat([out_rows, tf.boolean_mask(rows, done)], 0)
        out_pos = tf.concat([out_pos, tf.boolean_mask(index - word_start, done)], 0)
        out_symbols = tf.concat([out_symbols, tf.boolean_mask(symbols, done)], 0)
        # The others merge and go on.
        joined = tf.where(merge, merged_ids, symbols)
        dropped = tf.concat([[False], merge[:-1]], 0)
        keep = tf.logical_not(done) & tf.logical_not(dropped)
        return (tf.boolean_mask(rows, keep), tf.boolean_mask(joined, keep), out_rows,
                out_pos, out_symbols)

    state = (tf.cast(rows, tf.int64), tf.cast(symbols, tf.int32), tf.zeros([0], tf.int64),
             tf.zeros([0], tf.int32), tf.zeros([0], tf.int32))
    invariants = tuple(tf.TensorShape([None]) for _ in state)
    _, _, out_rows, out_pos, out_symbols = tf.while_loop(
        cond, body, state, shape_invariants=invariants)
    # Back in word order, each word's symbols in position order.
    width = tf.cast(tf.reduce_max(tf.concat([out_pos, [0]], 0)) + 1, tf.int64)
    order = tf.argsort(out_rows * width + tf.cast(out_pos, tf.int64), stable=True)
    return tf.RaggedTensor.from_value_rowids(tf.gather(out_symbols, order),
                                             tf.gather(out_rows, order), nrows=count)
