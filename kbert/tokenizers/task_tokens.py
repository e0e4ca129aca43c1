"""The GPT paper's fine-tuning inputs (Radford et al., 2018, section 3.3): the start,
delimiter and extract tokens, shared by GPT-2's and GPT-1's tokenizers."""

from __future__ import annotations

import os

import tensorflow as tf

from kbert.io import read_json
from kbert.tokenizers.packing import pack_decoder, truncate, truncate_pair_lengths

# The tokens the GPT paper adds for fine-tuning (section 3.3), named as in OpenAI's
# finetune-transformer-lm code: start, delimiter, and the extract token whose final
# state the classifier reads.
TASK_TOKENS = ("_start_", "_delimiter_", "_classify_")
PAIR_FORMATS = ("entailment", "similarity")


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
                                                                         tf.int64), validate=False)
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
