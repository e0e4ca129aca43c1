"""A tensor's dimensions with as few graph nodes as the shape allows.

`keras.ops.shape(x)[i]` adds a `Shape` and a `StridedSlice` with its three constants
for every unknown dimension it is asked for, each call anew. A layer that asks for the
batch and length three times writes two dozen nodes for them, and every one of those is
traced in Python, saved, optimized by grappler and run per request in a SavedModel.
`dims` reads all of a tensor's unknown dimensions from one `Shape` and one `Unpack`.
"""

from __future__ import annotations

import tensorflow as tf


def dims(x) -> list:
    """x's dimensions: Python ints where the static shape knows them, otherwise int32
    scalars of one `Shape` and one `Unpack` node (none when the shape is static)."""
    static = x.shape.as_list()
    if None not in static:
        return static
    dynamic = tf.unstack(tf.shape(x), num=len(static))
    return [d if s is None else s for s, d in zip(static, dynamic)]
