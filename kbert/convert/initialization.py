"""Building a model whose weights a checkpoint is about to overwrite, without computing
their random initial values.

Inside `deferred()`, every Keras variable created with an initializer starts as
allocated, unfilled memory (no random numbers, no fill) and is recorded with its
initializer. The loader assigns
the checkpoint's tensors (`kbert.convert.rules.load_into` marks each variable it
assigns with `provided`); when the block ends without an error, the variables no tensor
provided (a seed generator's state, a weight the format lacks) get their own
initializer's values then. So a model loads in the time it takes to read its file, and a
large one never holds random values it would throw away.

    with initialization.deferred():
        model = GPTDecoder(config)
        convert.load_into(variables, tensors, rules, source)
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_active: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "kbert_deferred_initializers", default=None)
_installed = False


def _install() -> None:
    """Wraps Keras' TensorFlow variable initialization once; outside `deferred()` (this
    context's, or another thread's) it runs Keras' own code unchanged."""
    global _installed
    if _installed:
        return
    import keras
    import tensorflow as tf

    variable_class = keras.Variable
    original = variable_class._initialize_with_initializer

    def initialize(self, initializer):
        pending = _active.get()
        if pending is None:
            return original(self, initializer)
        pending[id(self)] = (self, initializer)
        # Memory as allocated, not filled: the pages are touched only when the
        # checkpoint's tensor is assigned (a zero fill would touch them twice).
        self._initialize(lambda: tf.raw_ops.Empty(shape=self._shape, dtype=self._dtype,
                                                  init=False))

    variable_class._initialize_with_initializer = initialize
    _installed = True


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Variables created inside start unfilled; on a clean exit, those no loader marked
    `provided` are initialized by their own initializers (see the module docstring).
    Nested blocks share the outer one's record."""
    if _active.get() is not None:
        yield
        return
    _install()
    pending: dict = {}
    token = _active.set(pending)
    try:
        yield
    finally:
        _active.reset(token)
    for var, initializer in pending.values():
        var.assign(initializer(var.shape, dtype=var.dtype))


def provided(variable) -> None:
    """`variable` holds a checkpoint's value: its initializer is not run."""
    pending = _active.get()
    if pending is not None:
        pending.pop(id(variable), None)
