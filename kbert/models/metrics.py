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
