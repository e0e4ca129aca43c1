"""Language-model training for GPT: next-token examples, the loss on real tokens only,
and perplexity.

    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset("gpt2"))
    data = lm_dataset(texts, tokenizer, seq_length=1024, batch_size=8)
    training.compile_model(lm, training.create_optimizer(...), lm_loss(),
                           metrics=[Perplexity()])
    training.fit(lm, data.repeat(), total_steps)

Labels are the inputs shifted by one; positions whose next token is padding carry the
label -1, which the loss and the metric leave out (the loss is the mean over real
next tokens, as GPT-2's training computes it).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from kbert.models.metrics import TotalOverCount

IGNORED = -1


def lm_examples(token_ids, padding_mask):
    """[B, T + 1] ids and mask -> (inputs [B, T], labels [B, T]): the label of
    position t is the token at t + 1, or -1 where that is padding."""
    ids = tf.convert_to_tensor(token_ids)
    mask = tf.cast(tf.convert_to_tensor(padding_mask), ids.dtype)
    inputs = {"token_ids": tf.cast(ids[:, :-1], tf.int32),
              "padding_mask": tf.cast(mask[:, :-1], tf.int32)}
    labels = tf.where(tf.cast(mask[:, 1:], tf.bool) & tf.cast(mask[:, :-1], tf.bool),
                      ids[:, 1:], tf.cast(IGNORED, ids.dtype))
    return inputs, {"logits": tf.cast(labels, tf.int32)}


def lm_dataset(texts, tokenizer, seq_length: int, batch_size: int,
               end_token_id: int | None = -1, drop_remainder: bool = True) -> tf.data.Dataset:
    """A stream of text -> batches of next-token examples, as GPT-2 trains: every text
    tokenized, followed by the end token, all concatenated, cut into blocks of
    `seq_length + 1` tokens (inputs and labels overlap by all but one token).

    Args:
        texts: a list of strings or a `tf.data.Dataset` of scalar strings.
        tokenizer: a `GPTTokenizer` (anything with `tokenize` and `end_token_id`).
        end_token_id: the token after each text (-1: the tokenizer's; None: none).
    """
    if end_token_id == -1:
        end_token_id = tokenizer.end_token_id
    if not isinstance(texts, tf.data.Dataset):
        texts = tf.data.Dataset.from_tensor_slices(tf.constant(list(texts), tf.string))

    def tokens(batch):
        ids = tf.cast(tokenizer.tokenize(batch), tf.int32)
        if end_token_id is not None:
            end = tf.fill([ids.nrows(), 1], tf.constant(end_token_id, tf.int32))
            ids = tf.concat([ids, tf.RaggedTensor.from_tensor(end)], axis=1)
        return ids.flat_values

    stream = texts.batch(256).map(tokens).unbatch()
    blocks = stream.batch(seq_length + 1, drop_remainder=True)
    data = blocks.batch(batch_size, drop_remainder=drop_remainder)
    return data.map(lambda ids: lm_examples(ids, tf.ones_like(ids)),
                    num_parallel_calls=tf.data.AUTOTUNE)


def lm_loss() -> keras.losses.Loss:
    """Cross-entropy of the next token, averaged over real tokens (labels -1 out)."""
    return LMLoss()


@keras.saving.register_keras_serializable(package="kbert")
class LMLoss(keras.losses.Loss):
    """Next-token cross-entropy averaged over the real tokens of the batch (labels
    `IGNORED` left out): Keras' `SparseCategoricalCrossentropy(from_logits=True,
    ignore_class=-1)`, without its pass over the whole [B, T, vocab] logits that zeroes
    the ignored rows (a select as large as the logits, forward and backward). Each
    token's loss is divided by the batch's real-token count, so the "sum" reduction
    gives the mean (sample weights then weigh tokens within it)."""

    def __init__(self, name="lm_loss", reduction="sum", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)

    def call(self, y_true, y_pred):
        labels = tf.cast(y_true, tf.int32)
        valid = tf.cast(tf.not_equal(labels, IGNORED), tf.float32)
        nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.maximum(labels, 0), logits=tf.cast(y_pred, tf.float32))
        return nll * valid / tf.maximum(tf.reduce_sum(valid), 1.0)


@keras.saving.register_keras_serializable(package="kbert")
class Perplexity(TotalOverCount):
    """exp(mean negative log-likelihood of the next token) over real tokens, accumulated
    over all batches of an epoch (not a mean of per-batch perplexities)."""

    def __init__(self, name="perplexity", **kwargs):
        kwargs.pop("exp", None)
        super().__init__(name=name, exp=True, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = tf.cast(y_true, tf.int32)
        valid = tf.not_equal(labels, IGNORED)
        nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.where(valid, labels, 0), logits=tf.cast(y_pred, tf.float32))
        weight = tf.cast(valid, tf.float32)
        if sample_weight is not None:
            weight *= tf.cast(sample_weight, tf.float32)
        super().update_state(tf.reduce_sum(nll * weight), tf.reduce_sum(weight))
