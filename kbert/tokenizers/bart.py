"""BART's tokenizer: RoBERTa's (GPT-2's byte-level BPE, `<s> A </s>`), with BART's family
and the encoder input `generate` reads (`encoder_ids`); ids equal `transformers`'
`BartTokenizer` (tests/test_bart.py)."""

from __future__ import annotations

import os

import tensorflow as tf

from kbert.tokenizers.packing import keep_where
from kbert.tokenizers.roberta import RobertaTokenizer


class BartTokenizer(RobertaTokenizer):
    family = "bart"
    tasks = frozenset({"glue", "squad", "ner", "pretrain", "seq2seq"})
    exports = frozenset({"classifier", "generate", "squad", "ner"})

    @staticmethod
    def folder_has_files(path) -> bool:
        path = os.fspath(path)
        return all(os.path.exists(os.path.join(path, name))
                   for name in ("vocab.json", "merges.txt"))

    @property
    def end_token_id(self) -> int:
        return self.sep_id

    def encoder_ids(self, texts) -> tf.RaggedTensor:
        """int32 [batch, (tokens)]: `<s>`, the text's ids, `</s>`."""
        ids = tf.cast(self.tokenize(self.as_batch(texts)), tf.int32)
        rows = ids.nrows()

        def column(value):
            return tf.RaggedTensor.from_row_lengths(
                tf.fill([rows], tf.constant(value, tf.int32)),
                tf.ones([rows], ids.row_splits.dtype), validate=False)

        return tf.concat([column(self.cls_id), ids, column(self.sep_id)], axis=1)

    def detokenize(self, ids) -> tf.Tensor:
        """The text of `ids` without the special tokens (`<s>`, `</s>`, `<pad>`, `<unk>`,
        `<mask>`), as `transformers`' `decode(..., skip_special_tokens=True)`."""
        ids = tf.cast(ids, tf.int32)
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        keep = tf.ones_like(ids, tf.bool)
        for special in (self.cls_id, self.sep_id, self.pad_id, self.unk_id, self.mask_id):
            keep = tf.logical_and(keep, tf.not_equal(ids, special))
        return super().detokenize(keep_where(ids, keep))

    def config(self) -> dict:
        return {**super().config(), "tokenizer_class": "BartTokenizer"}
