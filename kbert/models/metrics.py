"""Metrics and losses the families' models share: a total over a count, accumulated over
every batch of an epoch (a perplexity is exp(total NLL / tokens) over the epoch, not a
mean of per-batch perplexities), and the next-token loss of language models (GPT's
decoder, T5's) over real tokens only (labels `IGNORED` left out)."""

from __future__ import annotations

import keras
import tensorflow as tf

IGNORED = -1  # the label of positions no loss or metric counts


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


def _global_sum(value):
    """`value` summed over the replicas in sync (itself outside a replica context or on
    one replica)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def lm_loss(label_smoothing: float = 0.0) -> keras.losses.Loss:
    """Cross-entropy of the next token, averaged over real tokens (labels -1 out);
    `label_smoothing` as transformers' `LabelSmoother` (--label_smoothing_factor)."""
    return LMLoss(label_smoothing=label_smoothing)


@keras.saving.register_keras_serializable(package="kbert")
class LMLoss(keras.losses.Loss):
    """Next-token cross-entropy averaged over the real tokens of the batch (labels
    `IGNORED` left out): Keras' `SparseCategoricalCrossentropy(from_logits=True,
    ignore_class=-1)`, without its pass over the whole [B, T, vocab] logits that zeroes
    the ignored rows (a select as large as the logits, forward and backward). Each
    token's loss is divided by the batch's real-token count, so the "sum" reduction
    gives the mean (sample weights then weigh tokens within it). Under a distribution
    strategy the count is the real tokens of every replica's batch (an all-reduce), so
    that the replicas' losses, which Keras sums, are the global batch's mean, and so are
    their summed gradients (dividing by each replica's own count doubled both on two
    replicas: the reported loss, and the gradient that Adam's normalization hid).

    `label_smoothing` e: each token's loss is (1 - e) x its cross-entropy + e x the mean
    over the vocabulary of -log p (transformers' `LabelSmoother`, which
    `run_summarization.py --label_smoothing_factor` uses)."""

    def __init__(self, name="lm_loss", reduction="sum", label_smoothing: float = 0.0,
                 **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(f"label_smoothing={label_smoothing}: must be in [0, 1)")
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true, y_pred):
        labels = tf.cast(y_true, tf.int32)
        valid = tf.cast(tf.not_equal(labels, IGNORED), tf.float32)
        logits = tf.cast(y_pred, tf.float32)
        nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.maximum(labels, 0), logits=logits)
        if self.label_smoothing:
            smooth = -tf.reduce_mean(tf.nn.log_softmax(logits), axis=-1)
            nll = (1.0 - self.label_smoothing) * nll + self.label_smoothing * smooth
        return nll * valid / tf.maximum(_global_sum(tf.reduce_sum(valid)), 1.0)

    def get_config(self):
        config = super().get_config()
        if self.label_smoothing:
            config["label_smoothing"] = self.label_smoothing
        return config


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
