"""Activations as BERT's reference implementations compute them."""

import keras
from keras import ops


def gelu(x):
    """Exact GELU, x * Phi(x) with the erf (Hendrycks & Gimpel, 2016); Hugging Face's "gelu"."""
    return ops.gelu(x, approximate=False)


def gelu_tanh(x):
    """Tanh approximation of GELU, as Google's TF1 `modeling.py` computes it."""
    return ops.gelu(x, approximate=True)


_ACTIVATIONS = {"gelu": gelu, "gelu_tanh": gelu_tanh, "relu": ops.relu}


def get_activation(name: str):
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"Unknown activation {name!r}; choose from {sorted(_ACTIVATIONS)}") from None


def truncated_normal(stddev: float):
    """BERT's initializer: truncated normal, stddev `initializer_range`."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
