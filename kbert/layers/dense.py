"""`Dense`: Keras's dense layer, with the bias added apart from the product when asked.

XLA:CPU fuses `x @ W + b` into one single-threaded loop when `x` is one vector (batch 1,
one position: a decoding step). That loop reads `W` at about half the rate of the
multi-threaded product XLA calls when the addition is separate: for GPT-2 124M's
blocks, 22.4 against 17.6 ms a step on a 2-core CPU (`benchmarks/bench_gpt.py`,
docs/benchmarks.md). Inside `separate_bias_add()`, and only while tracing a function
XLA compiles, the product and the addition are kept apart by an XLA optimization
barrier. Weights, names and results are those of `keras.layers.Dense`.
"""

from __future__ import annotations

import contextlib
import threading

import keras
from keras import ops

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


def _barrier(x):
    from tensorflow.compiler.tf2xla.python import xla

    return xla.optimization_barrier(x)[0]


@keras.saving.register_keras_serializable(package="kbert")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` (same weights, names and results); see the module
    docstring for `separate_bias_add`."""

    def call(self, inputs, training=None):
        if (not getattr(_state, "on", False) or self.bias is None
                or self.quantization_mode is not None or keras.backend.backend() != "tensorflow"):
            return super().call(inputs, training=training)
        x = _barrier(ops.matmul(inputs, self.kernel))
        x = ops.add(x, self.bias)
        return x if self.activation is None else self.activation(x)
