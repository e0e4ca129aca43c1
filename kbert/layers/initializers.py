"""Weight initializers of the reference implementations, serializable in layer configs."""

from __future__ import annotations

import keras


def truncated_normal(stddev: float = 0.02):
    """BERT's initializer: truncated normal, stddev `initializer_range`."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


def normal(stddev: float = 0.02):
    """GPT-2's initializer: normal, stddev 0.02 (residual projections scaled down)."""
    return keras.initializers.RandomNormal(stddev=stddev)


def initializer_from(value, default_stddev: float = 0.02):
    """A Keras initializer from None (BERT's truncated normal), an initializer, a name
    or the config dict that `serialize_initializer` wrote."""
    if value is None:
        return truncated_normal(default_stddev)
    return keras.initializers.get(value)


def serialize_initializer(initializer):
    return keras.initializers.serialize(initializer)
