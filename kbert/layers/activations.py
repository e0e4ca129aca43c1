"""Activations as BERT's reference implementations compute them."""

import math

import tensorflow as tf
from keras import ops
from tensorflow.python.eager import record

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@tf.custom_gradient
def _gelu_erf(x):
    cdf = 0.5 * tf.math.erfc(x * -_SQRT_HALF)  # Phi(x)

    def grad(dy):  # d/dx x Phi(x) = Phi(x) + x phi(x)
        return dy * (cdf + x * (tf.exp(tf.square(x) * -0.5) * _INV_SQRT_2PI))

    return x * cdf, grad


def gelu(x):
    """Exact GELU, x * Phi(x) with the erf (Hendrycks & Gimpel, 2016); Hugging Face's "gelu".

    Values are those of `keras.ops.gelu(x, approximate=False)`. Under a gradient tape
    the gradient is written out (Phi(x) + x phi(x), reusing the forward Phi), which
    takes a fifth less time than differentiating the erf expression op by op. With no
    tape recording (inference, a SavedModel's signatures) it is `tf.nn.gelu` itself:
    the custom gradient's `IdentityN` would keep TensorFlow's grappler from fusing the
    GELU into the product before it (`_FusedMatMul` with its bias and GELU), which
    it does for `tf.nn.gelu`'s ops (docs/benchmarks.md, "Serving").
    """
    x = tf.convert_to_tensor(x)
    if record.could_possibly_record():
        return _gelu_erf(x)
    return tf.nn.gelu(x, approximate=False)


def gelu_tanh(x):
    """Tanh approximation of GELU, as Google's TF1 `modeling.py` computes it."""
    return ops.gelu(x, approximate=True)


_ACTIVATIONS = {"gelu": gelu, "gelu_tanh": gelu_tanh, "relu": ops.relu, "silu": ops.silu}


def get_activation(name: str):
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"Unknown activation {name!r}; choose from {sorted(_ACTIVATIONS)}") from None
