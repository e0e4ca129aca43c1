"""Metrics the families' models share: a total over a count, accumulated over every batch
of an epoch (a perplexity is exp(total NLL / tokens) over the epoch, not a mean of
per-batch perplexities)."""

from __future__ import annotations

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="kbert")
class TotalOverCount(keras.metrics.Metric):
    """`total / count` over the batches seen (0 before any count), or its exp with
    `exp=True` (a perplexity from summed negative log-likelihoods and token counts).

    `update_state(total, count)` adds a batch's sum and count (weights may be
    fractional: the result is the exact weighted mean)."""

    def __init__(self, name, exp: bool = False, **kwargs):
        super().__init__(name=name, **kwargs)
        self.exp = exp
        self.total = self.add_variable((), initializer="zeros", name="total",
                                       dtype="float32")
        self.count = self.add_variable((), initializer="zeros", name="count",
                                       dtype="float32")

    def update_state(self, total, count):
        self.total.assign_add(tf.cast(total, tf.float32))
        self.count.assign_add(tf.cast(count, tf.float32))

    def result(self):
        mean = tf.math.divide_no_nan(self.total, self.count)
        return tf.exp(mean) if self.exp else mean

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "exp": self.exp}


def masked_lm_loss(ids, weights, logits, trackers: dict):
    """The masked LM's loss as BERT's `run_pretraining.py` computes it: the weighted mean
    cross-entropy of the predictions, `sum(w * nll) / (sum(w) + 1e-5)` (weight 0 on
    padding predictions); updates `trackers["masked_lm_accuracy"]` and
    `trackers["masked_lm_loss"]` (`TotalOverCount`s). Shared by BERT's and RoBERTa's
    pretraining models."""
    ids = tf.cast(ids, tf.int32)
    weights = tf.cast(weights, tf.float32)
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=logits)
    hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), ids), tf.float32)
    trackers["masked_lm_accuracy"].update_state(tf.reduce_sum(hits * weights),
                                                tf.reduce_sum(weights))
    trackers["masked_lm_loss"].update_state(tf.reduce_sum(nll * weights),
                                            tf.reduce_sum(weights))
    return tf.reduce_sum(weights * nll) / (tf.reduce_sum(weights) + 1e-5)


def total_loss(model, loss):
    """`loss` plus the model's own losses (`add_loss`), divided by the replicas in sync
    (Keras sums the replicas' losses): what a `compute_loss` override returns."""
    if model.losses:
        loss += tf.add_n([tf.cast(v, tf.float32) for v in model.losses])
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss / replicas if replicas > 1 else loss
