"""`Dense`: Keras's dense layer, with the bias added apart from the product when asked.

XLA:CPU fuses `x @ W + b` into one loop of its own when `x` is one vector (batch 1, one
position: a decoding step). That loop reads `W` more slowly than the product XLA calls
when the addition is separate: GPT-2 124M's block products took 23.3 against 19.5 ms
a step on a 2-core CPU (docs/benchmarks.md, "GPT"). Inside `separate_bias_add()`, in a
function XLA compiles, an optimization barrier keeps the product and the addition
apart. Weights, names and results are those of `keras.layers.Dense`.
"""

from __future__ import annotations

import contextlib
import threading

import keras
import tensorflow as tf
from keras import ops

from kbert import internals
from kbert.layers.shapes import dims

_state = threading.local()


@contextlib.contextmanager
def separate_bias_add():
    """While tracing for XLA: every kbert `Dense` adds its bias after an optimization
    barrier (see the module docstring). Outside XLA the barrier op has no kernel, so
    use it only in a function compiled with `jit_compile=True`."""
    before = getattr(_state, "on", False)
    _state.on = True
    try:
        yield
    finally:
        _state.on = before


@keras.saving.register_keras_serializable(package="kbert")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` (same weights, names and results); see the module
    docstring for `separate_bias_add`."""

    def call(self, inputs, training=None):
        if self.quantization_mode is not None or self.lora_enabled:
            return super().call(inputs, training=training)
        if not getattr(_state, "on", False):
            return self._flat_call(inputs)
        if self.bias is None:
            return super().call(inputs, training=training)
        x = internals.optimization_barrier(ops.matmul(inputs, self.kernel))
        x = ops.add(x, self.bias)
        return x if self.activation is None else self.activation(x)

    def _flat_call(self, inputs):
        """The product on [rows, in] with the bias added by `BiasAdd` right after it:
        the pattern TensorFlow's grappler fuses into one oneDNN product (`_FusedMatMul`
        with its bias and activation) when the graph is run plainly."""
        x = inputs
        if len(inputs.shape) != 2:
            x = tf.reshape(inputs, (-1, self.kernel.shape[0]))
        x = tf.matmul(x, self.kernel)
        if self.bias is not None:
            x = tf.nn.bias_add(x, self.bias)
        if self.activation is not None:
            x = self.activation(x)
        if len(inputs.shape) != 2:
            x = tf.reshape(x, dims(inputs)[:-1] + [self.units])
        return x

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras' own quantization of `Dense` (int8, int4, float8, ...): kbert's `Dense`
        is Keras' with another `call`, so Keras' refusal of subclasses does not apply
        (`model.quantize(mode)` and loading a quantized `.keras` both call this).
        Without Keras' full garbage collection per dropped kernel
        (`internals.one_gc_collect`)."""
        with internals.one_gc_collect():
            return super().quantize(mode, type_check=False, config=config)
