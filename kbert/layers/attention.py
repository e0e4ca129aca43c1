"""Multi-head self-attention with a padding mask (Vaswani et al., 2017, section 3.2).

Shape legend:
    B = batch size, T = sequence length (queries and keys: self-attention),
    N = number of heads, D = head size (H / N), H = hidden size.
"""

import math

import keras
from keras import ops

from kbert.layers.activations import truncated_normal


@keras.saving.register_keras_serializable(package="kbert")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention over N heads.

    The query, key and value projections are separate dense layers with kernels of
    shape [H, H], exactly as `attention/self/{query,key,value}` in Google's checkpoints.

    Args:
        hidden_size: H.
        num_heads: N; H must be divisible by N.
        attention_dropout: dropout on the attention probabilities.
        initializer_range: stddev of the truncated-normal initializer.

    Call args:
        x: float Tensor of shape [B, T, H].
        attention_bias: float Tensor broadcastable to [B, N, T, T], 0 where a key may be
            attended to and a large negative number where it may not (padding).
        output_range: None, or R: only the first R positions query (all T remain keys
            and values), as `output_range` in TF Model Garden's encoder. The outputs
            at those positions are the same as without it.

    Returns:
        float Tensor of shape [B, T, H] (or [B, R, H]), the heads concatenated (before
        the output dense).
    """

    def __init__(self, hidden_size, num_heads, attention_dropout=0.1, initializer_range=0.02,
                 **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size={hidden_size} is not a multiple of num_heads={num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        init = truncated_normal(initializer_range)
        dense = lambda name: keras.layers.Dense(  # noqa: E731
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy, name=name)
        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.dropout_layer = keras.layers.Dropout(attention_dropout, dtype=self.dtype_policy)

    def build(self, x_shape, attention_bias_shape=None):
        for layer in (self.query, self.key, self.value):
            layer.build(x_shape)
        self.built = True

    def _split_heads(self, x):
        b, t = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (b, t, self.num_heads, self.head_size))  # (B, T, N, D)
        return ops.transpose(x, (0, 2, 1, 3))  # (B, N, T, D)

    def call(self, x, attention_bias=None, training=None, output_range=None):
        queries = x if output_range is None else x[:, :output_range]
        q = self._split_heads(self.query(queries))  # (B, N, T, D); T = R with output_range
        k = self._split_heads(self.key(x))  # (B, N, T, D)
        v = self._split_heads(self.value(x))  # (B, N, T, D)
        q = q * ops.cast(1.0 / math.sqrt(self.head_size), q.dtype)
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # (B, N, T, T)
        # Softmax in float32 even under mixed precision, as the reference does in fp32.
        scores = ops.cast(scores, "float32")
        if attention_bias is not None:
            scores = scores + ops.cast(attention_bias, "float32")
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)  # (B, N, T, T)
        probs = self.dropout_layer(probs, training=training)
        context = ops.matmul(probs, v)  # (B, N, T, D)
        context = ops.transpose(context, (0, 2, 1, 3))  # (B, T, N, D)
        b, t = ops.shape(context)[0], ops.shape(context)[1]
        return ops.reshape(context, (b, t, self.hidden_size))  # (B, T, H)

    def compute_output_spec(self, x, attention_bias=None, training=None, output_range=None):
        return keras.KerasTensor(sequence_output_shape(x.shape, output_range),
                                 dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_heads": self.num_heads, "attention_dropout": self.attention_dropout,
                "initializer_range": self.initializer_range}


def sequence_output_shape(x_shape, output_range=None):
    """[B, T, H], or [B, min(T, R), H] when only the first R positions are computed."""
    batch, length, width = x_shape
    if output_range is not None:
        length = output_range if length is None else min(length, output_range)
    return (batch, length, width)
