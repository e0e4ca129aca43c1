"""In-graph BERT WordPiece tokenizer that reproduces Google's `tokenization.py` id for id.

The reference (Google's `tokenization.py`, `FullTokenizer`) works in two steps.
BasicTokenizer: delete NUL, U+FFFD and control/format characters (categories Cc, Cf;
tab and newlines count as whitespace), map whitespace to spaces, put spaces around CJK
ideographs, split on whitespace, lower-case and strip accents (NFD, drop category Mn)
when asked, split off every punctuation character. WordpieceTokenizer: greedy
longest-match-first with "##" continuations; a word that cannot be covered, or has
more than 200 characters, becomes [UNK].

Hugging Face's ports depart from it in two places (both shown by tests that run
them): they also delete unassigned (Cn) and private-use (Co) code points, and their
word limit is 100 characters. kbert follows Google.

tensorflow-text's BertTokenizer folds case with NFKC, which changes full-width
letters, ligatures and CJK punctuation, so kbert composes the steps itself from
string ops that TF Serving links: one regex split (with byte offsets) on whitespace,
punctuation and CJK, per-piece cleaning and normalization, then FastWordpiece.
"""

from __future__ import annotations

import os

import tensorflow as tf
import tensorflow_text as tf_text

from kbert import hub
from kbert.io import read_json
from kbert.tokenizers import packing, unicode_tables
from kbert.tokenizers.base import Held, Tokenizer

MAX_CHARS_PER_WORD = 200  # max_input_chars_per_word of Google's WordpieceTokenizer
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocab(path: str | os.PathLike) -> list[str]:
    """Reads `vocab.txt`: one token per line, the line number is the id."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        vocab = [line.rstrip("\r\n") for line in f]
    while vocab and vocab[-1] == "":  # a trailing blank line is not a token
        vocab.pop()
    if not vocab:
        raise ValueError(f"{path}: empty vocabulary")
    return vocab


class BertTokenizer(Tokenizer):
    """WordPiece tokenizer with BERT's normalization, in TF graph ops.

    Works eagerly, inside `tf.data.Dataset.map` and inside exported SavedModels.

    Args:
        vocab: list of tokens, or the path of a `vocab.txt`.
        lowercase: lower-case the text (uncased models).
        strip_accents: strip accents (NFD, drop Mn). None follows `lowercase`, as in
            the reference.
        seq_length: default packed length for `__call__`.

    Example:
    >>> tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##want",
    ...                      "##ed", ",", "runn", "##ing"], seq_length=8)
    >>> tok.tokenize(["UNwant\\u00e9d,running"]).to_list()
    [[5, 6, 7, 8, 9, 10]]
    >>> tok(["UNwant\\u00e9d,running"])["token_ids"].numpy().tolist()
    [[2, 5, 6, 7, 8, 9, 10, 3]]
    """

    family = "bert"
    tasks = frozenset({"glue", "squad", "ner", "pretrain"})
    exports = frozenset({"classifier", "embeddings", "squad", "ner", "fill_mask"})

    def __init__(self, vocab, lowercase: bool = True, strip_accents: bool | None = None,
                 seq_length: int = 128, name: str | None = None):
        super().__init__(name=name)
        if isinstance(vocab, (str, os.PathLike)):
            vocab = load_vocab(vocab)
        vocab = list(vocab)
        missing = [t for t in ("[UNK]", "[CLS]", "[SEP]") if t not in vocab]
        if missing:
            raise ValueError(f"BertTokenizer vocab lacks special token(s) {missing}")
        seen: dict[str, int] = {}
        for i, t in enumerate(vocab):
            if t in seen:
                raise ValueError(f"BertTokenizer vocab: token {t!r} appears twice "
                                 f"(ids {seen[t]} and {i})")
            seen[t] = i
        self._vocab = vocab
        self._index = seen
        self.lowercase = bool(lowercase)
        self.strip_accents = self.lowercase if strip_accents is None else bool(strip_accents)
        self.seq_length = int(seq_length)

        t = unicode_tables.tables()
        punct = t["punct"]
        if self.strip_accents and t["punct_if_stripped"]:
            punct = f"{t['punct']}|{t['punct_if_stripped']}"
        self._keep = f"{punct}|{t['cjk']}"
        self._delim = f"{t['whitespace']}+|{self._keep}"
        self._control = t["control"]
        self._mn = t["mn"]
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=vocab, suffix_indicator="##", unknown_token="[UNK]",
            # The reference limits characters, not bytes: allow 4 bytes per character
            # here and apply the 200-character rule below.
            max_bytes_per_word=4 * MAX_CHARS_PER_WORD + 4,
            token_out_type=tf.int64, no_pretokenization=True)
        self._vocab_table = tf.constant(vocab)
        # Eager calls run through compiled functions, traced on first use. The code has
        # no tensor-dependent Python control flow, so autograph (which took most of
        # the first call's seconds converting the source) is off.
        text_spec, int_spec = tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.int64)
        self._eager = Held(
            tokenize=tf.function(self._tokenize_with_offsets, input_signature=[text_spec],
                                 autograph=False),
            ids=tf.function(self._tokenize_ids, input_signature=[text_spec],
                            autograph=False),
            encode_single=tf.function(lambda a, n: self._encode(a, None, n),
                                      input_signature=[text_spec, int_spec], autograph=False),
            encode_pair=tf.function(self._encode,
                                    input_signature=[text_spec, text_spec, int_spec],
                                    autograph=False))

    # ---------------------------------------------------------------- properties
    @property
    def vocabulary(self) -> list[str]:
        return list(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def token_to_id(self, token: str) -> int:
        return self._index[token]

    @property
    def cls_id(self) -> int:
        return self._index["[CLS]"]

    @property
    def sep_id(self) -> int:
        return self._index["[SEP]"]

    @property
    def unk_id(self) -> int:
        return self._index["[UNK]"]

    @property
    def pad_id(self) -> int:
        return self._index.get("[PAD]", 0)

    @property
    def mask_id(self) -> int:
        if "[MASK]" not in self._index:
            raise ValueError("this vocabulary has no [MASK] token")
        return self._index["[MASK]"]

    # ---------------------------------------------------------------- tokenizing
    def _normalize(self, pieces: tf.Tensor) -> tf.Tensor:
        """Cleaning, lower-casing and accent stripping of each piece (1-D tf.string)."""
        x = tf.strings.regex_replace(pieces, self._control, "")
        if self.lowercase:
            x = tf.strings.lower(x, encoding="utf-8")
        if self.strip_accents:
            x = tf_text.normalize_utf8(x, "NFD")
            x = tf.strings.regex_replace(x, self._mn, "")
        return x

    @property
    def supports_pairs(self) -> bool:
        return True

    def _words(self, texts, with_offsets: bool):
        texts = self.as_batch(texts)
        # regex_split stops at a NUL byte; NUL is deleted as a control character
        # anyway, so swap it for another one-byte control character (same offsets).
        texts = tf.strings.regex_replace(texts, "\\x00", "\x01")
        if with_offsets:
            pieces, start, end = tf_text.regex_split_with_offsets(
                texts, self._delim, self._keep)  # [B, (P)]
        else:
            pieces = tf_text.regex_split(texts, self._delim, self._keep)  # [B, (P)]
        words = tf.ragged.map_flat_values(self._normalize, pieces)
        keep = tf.ragged.map_flat_values(lambda s: tf.strings.length(s) > 0, words)
        if not with_offsets:
            return packing.keep_where(words, keep)
        return packing.keep_where(words, keep, start, end)

    def split_words(self, texts):
        """The reference's BasicTokenizer: normalized words with byte offsets.

        Args:
            texts: tf.string Tensor of shape [batch_size].

        Returns:
            (words, starts, ends): RaggedTensors [batch_size, (words)] of tf.string
            and int64; `starts`/`ends` are byte offsets of each word in the input.
        """
        return self._words(texts, with_offsets=True)

    def tokenize_with_offsets(self, texts):
        """WordPiece ids with byte offsets into the UTF-8 input.

        Args:
            texts: tf.string Tensor of shape [batch_size] (or a list of str).

        Returns:
            (ids, starts, ends): int64 RaggedTensors of shape [batch_size, (tokens)].
            `texts[b][starts[b, i]:ends[b, i]]` is the text of token i. Where
            normalization changed a word's byte length (accents, case changes that
            resize), each of its tokens spans the whole original word.
        """
        texts = self.as_batch(texts)
        if tf.executing_eagerly():  # one compiled call instead of ~40 eager ops
            return self._eager.tokenize(texts)
        return self._tokenize_with_offsets(texts)

    def _long_words_to_unk(self, words, ids):
        """Words over 200 characters become one [UNK], as in the reference.

        Returns (rows, too_long): `rows` [2W] gathers each word's ids from
        `concat([ids, unk_rows])`; `too_long` bool [W]."""
        n_words = tf.shape(words, out_type=tf.int64)[0]
        too_long = tf.strings.length(words, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
        pick = tf.where(too_long, tf.range(n_words) + n_words, tf.range(n_words))
        unk_rows = tf.RaggedTensor.from_row_lengths(
            tf.fill([n_words], tf.constant(self.unk_id, tf.int64)),
            tf.ones([n_words], tf.int64), validate=False)
        return pick, too_long, unk_rows

    def _tokenize_ids(self, texts):
        """Ids only: what packing needs, with half the ops of the offsets path."""
        norm = self._words(texts, with_offsets=False)
        words = norm.flat_values  # [W]
        ids = self._wordpiece.tokenize(words)  # [W, (S)]
        pick, _, unk_rows = self._long_words_to_unk(words, ids)
        ids = tf.gather(tf.concat([ids, unk_rows], axis=0), pick)
        return norm.with_flat_values(ids).merge_dims(1, 2)  # [B, (T)]

    def _tokenize_with_offsets(self, texts):
        norm, p_start, p_end = self.split_words(texts)
        words = norm.flat_values  # [W]
        ids, w_start, w_end = self._wordpiece.tokenize_with_offsets(words)  # [W, (S)]
        pick, too_long, unk_rows = self._long_words_to_unk(words, ids)
        zero_rows = unk_rows * 0
        ids = tf.gather(tf.concat([ids, unk_rows], axis=0), pick)
        w_start = tf.gather(tf.concat([w_start, zero_rows], axis=0), pick)
        w_end = tf.gather(tf.concat([w_end, zero_rows], axis=0), pick)

        # Map offsets within a normalized word back onto the original bytes.
        o_start, o_end = p_start.flat_values, p_end.flat_values
        exact = (tf.cast(tf.strings.length(words), tf.int64) == o_end - o_start) & ~too_long
        rows = ids.row_lengths()
        exact_t = tf.repeat(exact, rows)
        start = tf.where(exact_t, tf.repeat(o_start, rows) + w_start.flat_values,
                         tf.repeat(o_start, rows))
        end = tf.where(exact_t, tf.repeat(o_start, rows) + w_end.flat_values,
                       tf.repeat(o_end, rows))

        def to_batch(values):  # [W, (S)] values -> [B, (T)]
            return norm.with_flat_values(ids.with_flat_values(values)).merge_dims(1, 2)

        return to_batch(ids.flat_values), to_batch(start), to_batch(end)

    def tokenize(self, texts) -> tf.RaggedTensor:
        """WordPiece ids, no special tokens: int64 RaggedTensor [batch_size, (tokens)]."""
        texts = self.as_batch(texts)
        if tf.executing_eagerly():
            return self._eager.ids(texts)
        return self._tokenize_ids(texts)

    # ---------------------------------------------------------------- packing
    truncate_pair_lengths = staticmethod(packing.truncate_pair_lengths)

    def pack(self, ids_a: tf.RaggedTensor, ids_b: tf.RaggedTensor | None = None,
             seq_length: int | None = None) -> dict:
        """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated and padded
        (`kbert.tokenizers.packing.pack_bert`).

        Returns:
            dict of int32 Tensors [batch_size, seq_length]: `token_ids`,
            `segment_ids`, `padding_mask`.
        """
        return packing.pack_bert(ids_a, ids_b, self.seq_length if seq_length is None
                                 else seq_length, cls_id=self.cls_id, sep_id=self.sep_id,
                                 pad_id=self.pad_id)

    def pack_segments(self, segments, seq_length: int | None = None):
        """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` with the layout (see
        `Tokenizer.pack_segments`); pairs cut as Google's `_truncate_seq_pair`."""
        return packing.pack_segments(
            segments, self.seq_length if seq_length is None else seq_length,
            start=(self.cls_id,), between=(self.sep_id,), end=(self.sep_id,),
            pad_id=self.pad_id)

    @property
    def mask_token(self) -> str:
        return "[MASK]"

    def token_strings(self) -> list[str]:
        """The vocabulary: WordPiece pieces as such (`##` kept)."""
        return self.vocabulary

    def __call__(self, texts, texts_b=None, seq_length: int | None = None) -> dict:
        """Tokenizes and packs texts (and pairs) into BertEncoder inputs.

        Args:
            texts: tf.string [batch_size]; texts_b: optional second segments.
            seq_length: packed length (default: the tokenizer's `seq_length`).

        Returns:
            dict of int32 [batch_size, seq_length]: `token_ids`, `segment_ids`,
            `padding_mask`. Pairs are truncated longest-first.
        """
        seq_length = int(seq_length or self.seq_length)
        if seq_length < (2 if texts_b is None else 3):
            raise ValueError(f"seq_length={seq_length} leaves no room for special tokens")
        texts = self.as_batch(texts)
        texts_b = None if texts_b is None else self.as_batch(texts_b, "texts_b")
        if texts_b is not None and None not in (texts.shape[0], texts_b.shape[0]) \
                and texts.shape[0] != texts_b.shape[0]:
            raise ValueError(f"texts_b: a pair needs as many second texts as first texts, "
                             f"got {texts_b.shape[0]} for {texts.shape[0]}")
        if not tf.executing_eagerly():
            return self._encode(texts, texts_b, seq_length)
        # Eagerly, one compiled function per input arity, seq_length a tensor argument.
        length = tf.constant(seq_length, tf.int64)
        if texts_b is None:
            return self._eager.encode_single(texts, length)
        return self._eager.encode_pair(texts, texts_b, length)

    def _encode(self, texts, texts_b, seq_length):
        ids_b = None if texts_b is None else self._tokenize_ids(texts_b)
        return self.pack(self._tokenize_ids(texts), ids_b, seq_length)

    # ---------------------------------------------------------------- decoding
    def detokenize(self, ids, skip_special_tokens: bool = True) -> tf.Tensor:
        """Ids back to text: tokens joined by spaces, "##" continuations glued.

        Args:
            ids: int Tensor or RaggedTensor [batch_size, (tokens)].

        Returns:
            tf.string Tensor [batch_size].
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int64)
        if skip_special_tokens:
            special = tf.constant([self._index[t] for t in SPECIAL_TOKENS
                                   if t in self._index and t != "[UNK]"], tf.int64)
            is_special = tf.reduce_any(
                tf.equal(tf.expand_dims(ids.flat_values, -1), special), axis=-1)
            ids = packing.keep_where(ids, ids.with_flat_values(~is_special))
        tokens = tf.gather(self._vocab_table, ids)
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(text, " ##", "")

    # ---------------------------------------------------------------- files
    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, lowercase: bool | None = None,
                        **kwargs) -> "BertTokenizer":
        """Reads `vocab.txt` from a kbert, Hugging Face or Google folder.

        Casing comes from `tokenizer_config.json` (`do_lower_case`, `strip_accents`)
        when the folder has one; for Google folders, which do not record it, from the
        folder name (`cased_L-12_...` is cased), else lower-casing is assumed. An
        explicit `lowercase=` wins.
        """
        path = hub.resolve(path)
        vocab_file = os.path.join(path, "vocab.txt")
        if not os.path.exists(vocab_file):
            raise FileNotFoundError(f"{path}: no vocab.txt")
        settings = {}
        cfg = os.path.join(path, "tokenizer_config.json")
        if os.path.exists(cfg):
            d = read_json(cfg)
            if "do_lower_case" in d:
                settings["lowercase"] = bool(d["do_lower_case"])
            if d.get("strip_accents") is not None:
                settings["strip_accents"] = bool(d["strip_accents"])
            settings.update(cls.saved_seq_length(d))
        else:
            base = os.path.basename(os.path.normpath(path)).lower()
            if "cased" in base and "uncased" not in base:
                settings["lowercase"] = False
        if lowercase is not None:
            settings["lowercase"] = lowercase
        return cls(vocab_file, **{**settings, **kwargs})

    def assets(self) -> dict[str, str]:
        """`vocab.txt`: one token per line, the line number is the id."""
        return {"vocab.txt": "".join(t + "\n" for t in self._vocab)}

    def config(self) -> dict:
        """Hugging Face's `tokenizer_config.json` keys."""
        return {"do_lower_case": self.lowercase, "strip_accents": self.strip_accents,
                "tokenizer_class": "BertTokenizer", "model_max_length": self.seq_length}
