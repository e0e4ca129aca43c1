"""T5's tokenizer: a SentencePiece model (`spiece.model`) run in-graph by
tensorflow-text's SentencePiece op, T5's 100 sentinels `<extra_id_0>` ... after the
model's pieces (`<extra_id_0>` the last id), and `</s>` after every text.

Ids are sentencepiece's own encoding of the text, as T5's own vocabulary code
(`seqio.SentencePieceVocabulary`) and `transformers`' sentencepiece-backed
`T5Tokenizer` with `legacy=True` give them: a sentinel or special token written in the
text (`<extra_id_3>`, `</s>`, `<pad>`, `<unk>`) is that token, and the text between
them is encoded piece by piece, each as sentencepiece encodes it alone.
"""

from __future__ import annotations

import os

import tensorflow as tf

from kbert import hub
from kbert.io import atomic_file, read_json
from kbert.tokenizers import strings
from kbert.tokenizers.base import Held, Tokenizer
from kbert.tokenizers.packing import keep_where, truncate

MODEL_FILE = "spiece.model"
EXTRA_IDS = 100
_SPECIAL = r"<extra_id_\d+>|</s>|<pad>|<unk>"


class T5Tokenizer(Tokenizer):
    """Text -> T5's ids, in-graph.

    Args:
        model: the SentencePiece model, as bytes (`from_pretrained` reads `spiece.model`).
        extra_ids: the number of sentinels (100).
        seq_length: the length `__call__` pads and cuts to (`</s>` included).
    """

    family = "t5"
    tasks = frozenset({"glue", "squad", "pretrain", "seq2seq"})  # as text to text (kbert.tasks.text_to_text)
    exports = frozenset({"generate"})
    special_tokens = (1, 2)
    special_tokens_in_text = True

    def __init__(self, model: bytes, extra_ids: int = EXTRA_IDS, seq_length: int = 512):
        super().__init__()
        import tensorflow_text as tf_text

        self._held = Held(model=bytes(model))
        self.sentencepiece = tf_text.SentencepieceTokenizer(model=self._held.model,
                                                            out_type=tf.int32)
        self.pieces = int(self.sentencepiece.vocab_size())
        self.extra_ids = int(extra_ids)
        self.seq_length = int(seq_length)
        ids = self._run(lambda sp: sp.string_to_id(
            tf.constant(["<pad>", "</s>", "<unk>"]))).numpy()
        self.pad_id, self.end_id, self.unk_id = (int(i) for i in ids)
        self._special = {"</s>": self.end_id, "<pad>": self.pad_id, "<unk>": self.unk_id}

    def _run(self, op):
        """`op(sentencepiece tokenizer)`, run again on a new one when TensorFlow has
        dropped the model: tensorflow-text's SentencePiece op (2.21) keeps its model in
        its kernel, and `tf.random.set_seed` (so `keras.utils.set_random_seed`) clears
        the eager kernels, after which every call fails with NotFoundError. Eagerly
        only; a traced function keeps the handle it captured."""
        try:
            return op(self.sentencepiece)
        except tf.errors.NotFoundError:
            if not tf.executing_eagerly():
                raise
            import tensorflow_text as tf_text

            self.sentencepiece = tf_text.SentencepieceTokenizer(model=self._held.model,
                                                                out_type=tf.int32)
            return op(self.sentencepiece)

    # ------------------------------------------------------------------ files
    @staticmethod
    def folder_has_files(path) -> bool:
        return os.path.exists(os.path.join(os.fspath(path), MODEL_FILE))

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, seq_length: int | None = None
                        ) -> "T5Tokenizer":
        """A folder with `spiece.model` (Hugging Face's T5 folders, kbert's), with
        `extra_ids` and `model_max_length` from its `tokenizer_config.json`."""
        path = hub.resolve(path)
        file = os.path.join(path, MODEL_FILE)
        if not os.path.exists(file):
            raise FileNotFoundError(f"{path}: no {MODEL_FILE} (T5's SentencePiece model)")
        with open(file, "rb") as f:
            model = f.read()
        settings = {}
        config = os.path.join(path, "tokenizer_config.json")
        if os.path.exists(config):
            settings = read_json(config)
        length = seq_length or settings.get("model_max_length") or 512
        if not isinstance(length, int) or length > 1 << 20:  # transformers' "no limit"
            length = 512
        return cls(model, extra_ids=int(settings.get("extra_ids", EXTRA_IDS)),
                   seq_length=length)

    def save_pretrained(self, path: str | os.PathLike) -> None:
        """`spiece.model` and `tokenizer_config.json` (Hugging Face's names), each
        written atomically."""
        import json

        path = os.fspath(path)
        with atomic_file(os.path.join(path, MODEL_FILE), "wb") as f:
            f.write(self._held.model)
        with atomic_file(os.path.join(path, "tokenizer_config.json")) as f:
            json.dump(self.config(), f, indent=2)

    def config(self) -> dict:
        return {"tokenizer_class": "T5Tokenizer", "extra_ids": self.extra_ids,
                "model_max_length": self.seq_length, "eos_token": "</s>",
                "pad_token": "<pad>", "unk_token": "<unk>",
                "additional_special_tokens": [f"<extra_id_{i}>"
                                              for i in range(self.extra_ids)]}

    # ------------------------------------------------------------------ ids
    @property
    def vocab_size(self) -> int:
        """The pieces and the sentinels (the model's table may be larger: t5-small's
        has 32,128 rows for 32,100 ids)."""
        return self.pieces + self.extra_ids

    @property
    def end_token_id(self) -> int:
        return self.end_id

    def sentinel_id(self, n: int) -> int:
        """The id of `<extra_id_{n}>`: counted down from the last id."""
        if not 0 <= n < self.extra_ids:
            raise ValueError(f"sentinel {n}: this tokenizer has {self.extra_ids} "
                             f"(<extra_id_0> .. <extra_id_{self.extra_ids - 1}>)")
        return self.vocab_size - 1 - n

    def tokenize(self, texts) -> tf.RaggedTensor:
        """int32 ids [batch, (tokens)], no `</s>` (see the module docstring)."""
        texts = self.as_batch(texts)
        chunks, _, _ = strings.regex_split_with_offsets(texts, _SPECIAL, _SPECIAL)
        flat = chunks.flat_values
        extra = tf.strings.regex_full_match(flat, r"<extra_id_\d+>")
        number = tf.strings.to_number(  # "0" where not a sentinel; large values saturate
            tf.strings.substr(tf.strings.regex_replace(
                tf.where(extra, flat, "<extra_id_0>"), r"\D", ""), 0, 9), tf.int32)
        sentinel = tf.logical_and(extra, number < self.extra_ids)
        # an <extra_id_N> past the sentinels is text, as in transformers
        special = tf.logical_and(tf.strings.regex_full_match(flat, _SPECIAL),
                                 tf.logical_or(sentinel, tf.logical_not(extra)))
        token = tf.where(sentinel, self.vocab_size - 1 - number,
                         self._special_id(flat))
        text_ids = self._run(lambda sp: sp.tokenize(tf.where(special, "", flat)))
        one = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(token, special),
                                               tf.cast(special, tf.int64), validate=False)
        ids = tf.concat([text_ids, one], axis=1)  # each chunk: its pieces, or its token
        return tf.RaggedTensor.from_row_splits(ids, chunks.row_splits,
                                               validate=False).merge_dims(1, 2)

    def encoder_ids(self, texts) -> tf.RaggedTensor:
        """int32 [batch, (tokens)]: the text's ids, then `</s>` (T5's encoder input)."""
        ids = tf.cast(self.tokenize(texts), tf.int32)
        end = tf.RaggedTensor.from_row_lengths(tf.fill([ids.nrows()], self.end_id),
                                               tf.ones([ids.nrows()], ids.row_splits.dtype),
                                               validate=False)
        return tf.concat([ids, end], axis=1)

    def _special_id(self, strings):
        out = tf.fill(tf.shape(strings), self.unk_id)
        for text, i in self._special.items():
            out = tf.where(tf.equal(strings, text), i, out)
        return out

    def detokenize(self, ids) -> tf.Tensor:
        """tf.string [batch]: the pieces' text; `<pad>`, `</s>`, `<unk>` and the
        sentinels left out, as `transformers`' `decode(..., skip_special_tokens=True)`
        (sentencepiece alone writes `<unk>` as " ⁇ ")."""
        ids = tf.cast(ids, tf.int32)
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        keep = ids < self.pieces
        for special in (self.pad_id, self.end_id, self.unk_id):
            keep = tf.logical_and(keep, tf.not_equal(ids, special))
        kept = keep_where(ids, keep)
        return self._run(lambda sp: sp.detokenize(kept))

    def __call__(self, texts, texts_b=None, seq_length: int | None = None) -> dict:
        """`token_ids`, `padding_mask` int32 [batch, seq_length]: the text's ids cut to
        seq_length - 1, `</s>`, padding (`<pad>`) on the right. T5 writes pairs into
        one text (`"question: ... context: ..."`): no `texts_b`."""
        if texts_b is not None:
            raise ValueError("T5Tokenizer takes one text per example (write pairs into it, "
                             "as T5's task prefixes do)")
        seq_length = int(seq_length or self.seq_length)
        ids = self.encoder_ids(texts)
        ids = tf.concat([truncate(ids[:, :-1], tf.fill(
            [ids.nrows()], tf.constant(seq_length - 1, ids.row_splits.dtype))), ids[:, -1:]],
            axis=1)
        dense = ids.to_tensor(self.pad_id, shape=[None, seq_length])
        mask = tf.sequence_mask(ids.row_lengths(), seq_length, tf.int32)
        return {"token_ids": dense, "padding_mask": mask}
