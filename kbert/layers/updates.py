"""`write_at`: a block written into a tensor at an index known only at run time (a
decoding step's token, a key/value cache's new positions).

Keras' `ops.slice_update` is XLA's `DynamicUpdateSlice` (`XlaDynamicUpdateSlice`): an
op with no kernel of its own outside XLA. A plain graph runs it by compiling it with XLA
on demand, and `tensorflow_model_server` started without
`--xla_cpu_compilation_enabled=true` disables XLA compilation (model_servers/main.cc):
every decoding request of such an export then fails ("XLA compilation disabled"). Here
the write is a `TensorScatterUpdate` (a kernel in every TensorFlow), except inside
`compiled_writes()`, which the decoding functions enter while XLA traces them: there
`DynamicUpdateSlice` updates in place.
"""

from __future__ import annotations

import contextlib
import threading

import tensorflow as tf
from keras import ops

_state = threading.local()


@contextlib.contextmanager
def compiled_writes(on: bool = True):
    """While tracing a function compiled with XLA (`jit_compile=True`): `write_at` is
    XLA's `DynamicUpdateSlice`. Off (the default), a `TensorScatterUpdate`."""
    before = getattr(_state, "xla", False)
    _state.xla = bool(on)
    try:
        yield
    finally:
        _state.xla = before


def write_at(x, axis: int, index, block):
    """`x` with `block` written at `index` along `axis`: every other axis from 0, `block`
    spanning `x`'s axes after `axis` whole (x[..., index:index + n, ...] = block)."""
    if getattr(_state, "xla", False):
        start = [0] * len(x.shape)
        start[axis] = index
        return ops.slice_update(x, tuple(start), block)
    index = tf.cast(index, tf.int32)
    shape = tf.shape(block, out_type=tf.int32)
    ranges = [tf.range(shape[i]) for i in range(axis + 1)]
    ranges[axis] = ranges[axis] + index
    grid = tf.meshgrid(*ranges, indexing="ij") if axis else ranges
    return tf.tensor_scatter_nd_update(x, tf.stack(grid, axis=-1), block)
