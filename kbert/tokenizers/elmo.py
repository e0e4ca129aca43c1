"""ELMo's character ids in-graph, as bilm-tf's `Batcher` (and AllenNLP's
`ELMoCharacterMapper`) make them.

Each word becomes `max_characters_per_token` ids: begin-of-word (258), the word's UTF-8
bytes cut to `max_characters_per_token - 2` (0..255; a cut may fall inside a
character), end-of-word (259), then padding (260); every id is shifted by +1 so that an
all-zero row means "no word". The words `<S>` and `</S>` are the sentence-begin and
sentence-end tokens (the marks 256 and 257 between begin- and end-of-word), as in the
references. Texts are split as Python's `str.split()` splits: on every character for
which `str.isspace()` is true.
"""

from __future__ import annotations

import functools

import tensorflow as tf

from kbert.tokenizers import strings
from kbert.tokenizers.base import Held, Tokenizer

BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260
BOS_WORD, EOS_WORD = "<S>", "</S>"


@functools.lru_cache(maxsize=1)
def _space_class() -> str:
    """An RE2 character class of the characters Python's `str.split()` splits on."""
    spaces = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and chr(c).isspace()]
    return "[" + "".join(f"\\x{{{c:X}}}" for c in spaces) + "]+"


def mark_word(mark: int, length: int) -> list[int]:
    """bilm-tf's characters of a sentence mark (without the +1 shift)."""
    return [BOW_CHAR, mark, EOW_CHAR] + [PAD_CHAR] * (length - 3)


class ELMoCharTokenizer(Tokenizer):
    """Texts (or lists of words) -> bilm-tf's character ids (see the module docstring).

    Args:
        max_characters_per_token: ids per word (50 in every published ELMo).

    Example:
    >>> tok = ELMoCharTokenizer(max_characters_per_token=6)
    >>> tok(["hi there"])["char_ids"].numpy()[0, 0].tolist()
    [259, 105, 106, 260, 261, 261]
    """

    family = "elmo"
    special_tokens = (0, 0)  # one vector a word, no markers
    tasks = frozenset({"glue", "ner", "pretrain"})
    # The classifier and ner signatures pack subword pieces in the graph; ELMo's task
    # heads read each word's characters (and pairs as two inputs): not exported yet.
    exports = frozenset({"elmo"})

    def __init__(self, max_characters_per_token: int = 50, name: str | None = None):
        super().__init__(name=name)
        if max_characters_per_token < 3:
            raise ValueError(f"max_characters_per_token={max_characters_per_token}: needs "
                             "room for the word marks and a byte")
        self.max_characters_per_token = int(max_characters_per_token)
        self._spaces = _space_class()
        self._eager = Held(encode=tf.function(
            self._encode, input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False))

    @property
    def vocab_size(self) -> int:
        return PAD_CHAR + 2  # 261 ids, and 0 for "no word"

    def split(self, texts) -> tf.RaggedTensor:
        """tf.string [batch] -> RaggedTensor [batch, (words)], split as `str.split()`."""
        texts = self.as_batch(texts)
        # NUL-safe, each word cut from the original bytes (strings.regex_split_...).
        words, _, _ = strings.regex_split_with_offsets(texts, self._spaces)
        return words

    def words_to_ids(self, words: tf.RaggedTensor) -> tf.Tensor:
        """RaggedTensor [batch, (words)] of tf.string -> int32 [batch, words, L]."""
        length = self.max_characters_per_token
        flat = words.flat_values
        body = tf.strings.substr(flat, 0, length - 2)  # bytes, as the references cut
        pieces = tf.strings.bytes_split(body)
        values = tf.cast(tf.reshape(tf.io.decode_raw(pieces.flat_values, tf.uint8), [-1]),
                         tf.int32)  # one byte each
        byte_ids = pieces.with_flat_values(values)  # (W, (bytes))
        n = tf.shape(flat, tf.int64)[0]

        def column(value):
            return tf.RaggedTensor.from_row_lengths(tf.fill([n], value), tf.ones([n], tf.int64),
                                                    validate=False)

        chars = tf.concat([column(BOW_CHAR), byte_ids, column(EOW_CHAR)], axis=1)
        dense = chars.to_tensor(PAD_CHAR, shape=tf.stack([n, tf.constant(length, tf.int64)]))
        marks = tf.constant([mark_word(BOS_CHAR, length), mark_word(EOS_CHAR, length)],
                            tf.int32)
        is_bos = tf.equal(flat, BOS_WORD)[:, None]
        is_eos = tf.equal(flat, EOS_WORD)[:, None]
        dense = tf.where(is_bos, marks[0], tf.where(is_eos, marks[1], dense)) + 1
        ragged = tf.RaggedTensor.from_row_splits(dense, words.row_splits, validate=False)
        return ragged.to_tensor(0)

    def _encode(self, texts):
        words = self.split(texts)
        char_ids = self.words_to_ids(words)
        mask = tf.sequence_mask(words.row_lengths(), tf.shape(char_ids)[1], tf.int32)
        return {"char_ids": char_ids, "padding_mask": mask}

    def __call__(self, texts, texts_b=None, seq_length=None) -> dict:
        """`char_ids` int32 [batch, words, max_characters_per_token] and `padding_mask`
        int32 [batch, words]. `texts` is tf.string [batch] (split on whitespace) or a
        RaggedTensor of words (taken as already split)."""
        if texts_b is not None:
            raise ValueError("texts_b: ELMo's character ids are for single texts")
        if isinstance(texts, tf.RaggedTensor):
            char_ids = self.words_to_ids(texts)
            mask = tf.sequence_mask(texts.row_lengths(), tf.shape(char_ids)[1], tf.int32)
            return {"char_ids": char_ids, "padding_mask": mask}
        texts = self.as_batch(texts)
        if tf.executing_eagerly():
            return self._eager.encode(texts)
        return self._encode(texts)

    def tokenize(self, texts) -> tf.RaggedTensor:
        """The words (RaggedTensor of tf.string): ELMo has no token ids."""
        return self.split(texts)

    def detokenize(self, ids) -> tf.Tensor:
        raise NotImplementedError("ELMo's character ids are not decoded")

    def config(self) -> dict:
        return {"tokenizer_class": "ELMoCharTokenizer",
                "max_characters_per_token": self.max_characters_per_token}

    @classmethod
    def from_pretrained(cls, path, **kwargs) -> "ELMoCharTokenizer":
        """The character length of a bilm-tf folder (`options.json`) or of a saved
        tokenizer (`tokenizer_config.json`); 50 otherwise."""
        import os

        from kbert import hub
        from kbert.io import read_json

        path = hub.resolve(path)
        length = 50
        options = os.path.join(path, "options.json")
        saved = os.path.join(path, "tokenizer_config.json")
        if os.path.exists(saved):
            length = read_json(saved).get("max_characters_per_token", length)
        elif os.path.exists(options):
            length = read_json(options).get("char_cnn", {}).get("max_characters_per_token",
                                                                length)
        kwargs.pop("seq_length", None)  # words are not cut to a length
        return cls(max_characters_per_token=int(length), **kwargs)
