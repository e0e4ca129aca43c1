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

`deferred(quantize="int8")` also quantizes while loading: once the loader has said
which model it built (`built(model)`), each layer Keras would quantize is quantized
(its own `quantize`) as soon as its float kernel is assigned, and the float kernel
dropped; the float weights are never all in memory (variables not yet assigned are
memory allocated but never written, which the system does not hold).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

from kbert import internals

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


class _Record(dict):
    """id(variable) -> (variable, initializer) of the variables not yet provided, and the
    layers to quantize by the id of their float kernel."""

    def __init__(self, quantize: str | None):
        super().__init__()
        self.quantize = quantize
        self.layers: dict = {}


@contextlib.contextmanager
def deferred(quantize: str | None = None) -> Iterator[None]:
    """Variables created inside start unfilled; on a clean exit, those no loader marked
    `provided` are initialized by their own initializers, and with `quantize`, the
    layers not quantized yet are (see the module docstring). Nested blocks share the
    outer one's record."""
    if _active.get() is not None:
        yield
        return
    _install()
    pending = _Record(quantize)
    token = _active.set(pending)
    # Quantizing while loading drops each float kernel: one garbage collection for the
    # whole load, not one per kernel (internals.one_gc_collect).
    with internals.one_gc_collect() if quantize else contextlib.nullcontext():
        try:
            yield
        finally:
            _active.reset(token)
        for var, initializer in pending.values():
            var.assign(initializer(var.shape, dtype=var.dtype))
        for layer in pending.layers.values():
            layer.quantize(quantize)


def built(model) -> None:
    """The loader built `model` (before assigning it): with `deferred(quantize=...)`,
    the layers Keras' `Model.quantize` would quantize (each leaf layer with a `quantize`
    of its own and a float kernel or embeddings table: kbert's `Dense` and token
    tables, Keras' `Embedding`s) are noted for quantizing as they load."""
    pending = _active.get()
    if pending is None or pending.quantize is None:
        return
    import keras

    for layer in model._flatten_layers():
        if len(list(layer._flatten_layers())) != 1:
            continue
        if type(layer).quantize is keras.layers.Layer.quantize:
            continue
        weight = getattr(layer, "_kernel", None)
        if weight is None:
            weight = getattr(layer, "_embeddings", None)
        if weight is not None and "float" in str(weight.dtype):
            pending.layers[id(weight)] = layer


def provided(variable) -> None:
    """`variable` holds a checkpoint's value: its initializer is not run (and, when
    quantizing, its layer is quantized now)."""
    pending = _active.get()
    if pending is not None:
        pending.pop(id(variable), None)
        layer = pending.layers.pop(id(variable), None)
        if layer is not None:  # its int8 variables are made and filled by Keras itself
            token = _active.set(None)
            try:
                layer.quantize(pending.quantize)
            finally:
                _active.reset(token)
