"""Optimizers of the papers: AdamW with BERT's schedule, LAMB, accumulation, clipping."""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from kbert import internals

# Variables that the original BERT optimizer exempts from weight decay
# (`exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]` in optimization.py).
# Keras matches these patterns against a variable's own name: LayerNorm scales and
# offsets are named "gamma"/"beta", dense biases "bias".
NO_DECAY_NAMES = ["gamma", "beta", "bias"]


@keras.saving.register_keras_serializable(package="kbert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's learning rate: linear warmup from 0, then linear decay to `end_rate`.

    lr(step) = peak * step / warmup_steps                         if step < warmup_steps
             = end + (peak - end) * (1 - step / total_steps)      otherwise (>= end)

    As in the original `optimization.py`, the decay is measured from step 0, so the
    warmup and decay lines meet at `warmup_steps` only when warmup is short.
    """

    def __init__(self, peak_rate: float, total_steps: int, warmup_steps: int = 0,
                 end_rate: float = 0.0):
        if total_steps <= 0:
            raise ValueError(f"total_steps={total_steps} must be positive")
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(f"warmup_steps={warmup_steps} must be in [0, total_steps]")
        self.peak_rate = float(peak_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.end_rate = float(end_rate)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        frac = ops.minimum(step, self.total_steps) / self.total_steps
        decayed = self.end_rate + (self.peak_rate - self.end_rate) * (1.0 - frac)
        if self.warmup_steps == 0:
            return decayed
        warm = self.peak_rate * step / self.warmup_steps
        return ops.where(step < self.warmup_steps, warm, decayed)

    def get_config(self):
        return {"peak_rate": self.peak_rate, "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps, "end_rate": self.end_rate}


class _TrueNormClipping:
    """Global-norm clipping on the true gradient norm.

    A gather's gradient (tf.IndexedSlices) has one row per lookup, so a token seen
    twice in a batch has two rows, and the norm of those rows is not the norm of the
    gradient, which sums them. Keras, like `tf.clip_by_global_norm` in the original
    BERT code on CPU/GPU, takes the norm from the unmerged rows, and then differs from
    clipping accumulated (dense) gradients. kbert sums the rows into the dense gradient
    first.

    It is also cheaper: each gradient's squared norm is one fused reduction
    (`tf.nn.l2_loss`, no squared copy of the gradient), and the gradients are
    multiplied by the clipping factor only when their norm exceeds `global_clipnorm`
    (below it the factor is 1). Keras squares and rescales every gradient at every
    step: three passes over BERT-base's 110M gradient values.
    """

    def _clip_gradients(self, grads):
        if not self.global_clipnorm:
            return super()._clip_gradients(grads)
        # An embedding gradient is summed into its dense form first (its rows merged):
        # the true norm, and a static shape under XLA, where merging the rows with
        # tf.unique made a BERT-small step 4x slower. The AdamW update needs it dense
        # anyway.
        present = [i for i, g in enumerate(grads) if g is not None]
        dense = [_dense(grads[i]) for i in present]
        norm = tf.sqrt(tf.add_n([2.0 * tf.nn.l2_loss(tf.cast(g, tf.float32)) for g in dense]))
        clip = tf.constant(self.global_clipnorm, tf.float32)

        def scaled():
            # As Keras: NaN for a non-finite norm, so that the update is visibly bad.
            scale = clip * tf.minimum(1.0 / norm, 1.0 / clip) + (norm - norm)
            return [g * tf.cast(scale, g.dtype) for g in dense]

        clipped = tf.cond(norm <= clip, lambda: list(dense), scaled)
        out = list(grads)
        for i, g in zip(present, clipped):
            out[i] = g
        return out


def _dense(gradient, variable=None):
    """The gradient as a dense Tensor. An IndexedSlices' rows are summed per index, into
    the variable's static row count where known (XLA needs a constant), else the
    gradient's (static where TensorFlow can fold it)."""
    if not isinstance(gradient, tf.IndexedSlices):
        return gradient
    rows = variable.shape[0] if variable is not None else None
    if rows is None:
        static = tf.get_static_value(gradient.dense_shape)
        rows = int(static[0]) if static is not None else gradient.dense_shape[0]
    return tf.math.unsorted_segment_sum(gradient.values, gradient.indices, rows)


class _FusedAdamW:
    """AdamW updates as one fused kernel per variable (TensorFlow's `ResourceApplyAdam`).

    Keras computes the Adam update with some ten element-wise ops per variable, each a
    full pass over memory; on BERT-base that is 110M parameters, and a quarter of a
    second per step on a 2-core CPU (benchmarks/bench_bert.py measures it). The fused
    kernel reads the gradient, the variable and both moments once. The arithmetic is
    Keras' own: m += (g - m)(1 - b1), v += (g^2 - v)(1 - b2),
    w -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps), and decoupled weight
    decay w *= 1 - lr * wd before it (Keras: w -= w * wd * lr). Other
    cases (amsgrad, a non-float32 variable) take Keras' path.

    An embedding's gradient (tf.IndexedSlices, one row per lookup) is summed into a
    dense gradient first, as the original BERT optimizer does. Keras' AdamW instead
    squares each row before duplicates are summed, so a token seen twice in a batch
    ([CLS], [SEP] and padding always are) gets a second moment that is not its
    gradient's square (tests/test_training.py shows both).
    """

    def _fused(self, variable):
        return (not self.amsgrad and keras.backend.backend() == "tensorflow"
                and variable.dtype == "float32" and hasattr(_tf_variable(variable), "handle"))

    def update_step(self, gradient, variable, learning_rate):
        if not self._fused(variable):
            return super().update_step(gradient, variable, learning_rate)
        index = self._get_variable_index(variable)
        m, v = (_tf_variable(slot) for slot in internals.adam_slots(self, index))
        step = tf.cast(self.iterations + 1, tf.float32)
        beta_1 = tf.cast(self.beta_1, tf.float32)
        beta_2 = tf.cast(self.beta_2, tf.float32)
        tf.raw_ops.ResourceApplyAdam(
            var=_tf_variable(variable).handle, m=m.handle, v=v.handle,
            beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, tf.float32), beta1=beta_1, beta2=beta_2,
            epsilon=tf.cast(self.epsilon, tf.float32),
            grad=tf.cast(_dense(gradient, variable), tf.float32))

    def _apply_weight_decay(self, variables):
        if self.weight_decay is None:
            return
        fused = [v for v in variables if self._fused(v)]
        super()._apply_weight_decay([v for v in variables if not self._fused(v)])

        def decay(distribution, fused):
            factor = 1.0 - (tf.cast(self.learning_rate, tf.float32)
                            * tf.cast(self.weight_decay, tf.float32))

            def fn(var):
                # One pass (the product's buffer becomes the variable's), where
                # Keras' var - var * wd * lr takes three.
                var.assign(var * factor)

            for variable in fused:
                if self._use_weight_decay(variable):
                    distribution.extended.update(_tf_variable(variable), fn, group=False)

        internals.maybe_merge_call(decay, internals.optimizer_strategy(self), fused)


def _tf_variable(variable):
    return variable.value if isinstance(variable, keras.Variable) else variable


@keras.saving.register_keras_serializable(package="kbert")
class AdamW(_TrueNormClipping, _FusedAdamW, keras.optimizers.AdamW):
    """Keras AdamW with a fused update kernel and global-norm clipping on the true
    gradient norm."""


@keras.saving.register_keras_serializable(package="kbert")
class Lamb(_TrueNormClipping, keras.optimizers.Lamb):
    """Keras LAMB (You et al., 2020) with global-norm clipping on the true gradient norm."""


def create_optimizer(learning_rate: float, total_steps: int, warmup_steps: int = 0,
                     optimizer: str = "adamw", weight_decay: float = 0.01,
                     clip_norm: float | None = 1.0, gradient_accumulation_steps: int = 1,
                     end_rate: float = 0.0) -> keras.optimizers.Optimizer:
    """The optimizer of BERT fine-tuning (AdamW) or large-batch pretraining (LAMB).

    Args:
        learning_rate: peak learning rate.
        total_steps, warmup_steps: optimizer updates (not micro-batches) in training,
            and those spent warming up (BERT: 10% of fine-tuning, 10k of pretraining).
        optimizer: "adamw" (beta2 0.999, epsilon 1e-6) or "lamb" (You et al., 2020).
        weight_decay: decoupled decay rate; never applied to LayerNorm or biases.
        clip_norm: clip gradients by global norm (1.0 in the original); None for none.
        gradient_accumulation_steps: average the gradients of k micro-batches before
            each update, an effective batch k times larger.

    Note: the original `AdamWeightDecayOptimizer` applies no bias correction; Keras'
    AdamW does, which changes only the first steps of warmup.
    """
    schedule = WarmupLinearDecay(learning_rate, total_steps, warmup_steps, end_rate)
    common = dict(learning_rate=schedule, weight_decay=weight_decay, beta_1=0.9,
                  beta_2=0.999, epsilon=1e-6, global_clipnorm=clip_norm,
                  gradient_accumulation_steps=(
                      gradient_accumulation_steps if gradient_accumulation_steps > 1 else None))
    if optimizer == "adamw":
        opt = AdamW(**common)
    elif optimizer == "lamb":
        opt = Lamb(**common)
    else:
        raise ValueError(f"optimizer={optimizer!r}: use 'adamw' or 'lamb'")
    opt.exclude_from_weight_decay(var_names=NO_DECAY_NAMES)
    return opt
