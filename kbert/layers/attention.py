"""Multi-head scaled dot-product attention with masks and a key/value cache
(Vaswani et al., 2017, section 3.2).

One layer serves bidirectional encoders (BERT: a padding bias), causal decoders
trained on whole sequences (GPT: `causal=True`) and cached decoding (a preallocated
cache and an update index, as keras-hub's `CachedMultiHeadAttention`).

Shape legend:
    B = batch size, Tq = query positions, Tk = key/value positions,
    S = cache length (the longest sequence decoded), N = heads, D = head size (H / N),
    H = hidden size.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf
from keras import ops

from kbert.layers.dense import Dense
from kbert.layers.initializers import initializer_from, serialize_initializer
from kbert.layers.masks import causal_mask, merge_masks
from kbert.layers.shapes import dims
from kbert.layers.updates import write_at

# Forbidden scores are replaced by this before the softmax (a float32 value whose exp
# is 0, the same result as Hugging Face's finfo.min for rows with one allowed key).
_MASKED_SCORE = -1e9


def swap_heads(x):
    """[B, T, N, D] <-> [B, N, T, D]. As a one-operand `einsum`, not a `Transpose`:
    TensorFlow's oneDNN build runs a `Transpose` of this shape with oneDNN's kernel,
    about 5x slower than the Eigen one the `Einsum` kernel uses (115 against 23 us
    for [1, 128, 12, 32] on a 2-core CPU; the four per attention were a fifth of the
    real MiniLM's batch-1 time in TF Serving's graph, docs/benchmarks.md). The same
    values; XLA lowers both to the same transpose."""
    return tf.einsum("abcd->acbd", x)


@keras.saving.register_keras_serializable(package="kbert")
class MultiHeadAttention(keras.layers.Layer):
    """Scaled dot-product attention over N heads (the heads concatenated; the output
    projection is the caller's, as `attention/output/dense` in BERT's checkpoints and
    `attn/c_proj` in GPT-2's).

    The query, key and value projections are separate dense layers with kernels of
    shape [H, H] (`attention/self/{query,key,value}` in Google's checkpoints; GPT-2's
    fused `c_attn` is split into them when loaded).

    Args:
        hidden_size: H.
        num_heads: N; H must be divisible by N unless `head_size` is given.
        attention_dropout: dropout on the attention probabilities.
        kernel_initializer: initializer of the three kernels (a Keras initializer or
            its config); default truncated normal, stddev 0.02 (BERT's).
        head_size: D (default H / N); the projections are [H, N * D] (T5's `d_kv`,
            where N * D need not be H; the output is then [B, Tq, N * D]).
        use_bias: whether the projections have biases (T5's have none).
        scale: whether the scores are divided by sqrt(D) (T5 folds the scale into its
            initialization and divides by nothing).

    Call args:
        query: float Tensor [B, Tq, H].
        key_value: float Tensor [B, Tk, H]; None for self-attention (keys and values
            from `query`).
        attention_bias: float Tensor broadcastable to [B, N, Tq, Tk], added to the
            scores (BERT's padding bias, see `masks.padding_bias`).
        attention_mask: bool/int Tensor broadcastable to [B, Tq, Tk], True where a
            query may attend to a key (see `kbert.layers.masks`).
        causal: also forbid keys after each query's own position.
        cache: the pair (keys, values), float Tensors [B*N, S, D] (row b * N + n:
            batch row b, head n) of the positions decoded so far (zeros beyond); with
            it, the call writes this step's keys and values at `cache_index` and
            attends over the whole cache. Two tensors, not one stacked, and the heads
            in the batch dimension: the attention reads each as it is, with no slicing
            or reshaping copy.
        cache_index: int scalar, the absolute position of the first query (the
            number of positions already in the cache).
        projected_key_value: the pair (keys, values) [B*N, Tk, D] that
            `project_key_value(key_value)` returned: an encoder-decoder's
            cross-attention cache, computed once from the encoder's output and read at
            every decoding step (nothing is written to it).
        output_range: None, or R: only the first R positions query (all remain keys
            and values), as `output_range` in TF Model Garden's encoder.

    Returns:
        float Tensor [B, Tq, N * D] (H by default; or [B, R, N * D]); with `cache`,
        the pair (output, updated cache).
    """

    def __init__(self, hidden_size, num_heads, attention_dropout=0.1,
                 kernel_initializer=None, head_size=None, use_bias=True, scale=True,
                 **kwargs):
        super().__init__(**kwargs)
        if head_size is None and hidden_size % num_heads:
            raise ValueError(f"hidden_size={hidden_size} is not a multiple of num_heads={num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads if head_size is None else int(head_size)
        self.inner_size = self.num_heads * self.head_size
        self.custom_head_size = head_size is not None
        self.use_bias, self.scale = use_bias, scale
        self.attention_dropout = attention_dropout
        self.kernel_initializer = initializer_from(kernel_initializer)

        def dense(name):
            return Dense(self.inner_size, kernel_initializer=self.kernel_initializer,
                         use_bias=use_bias, dtype=self.dtype_policy, name=name)

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.dropout_layer = keras.layers.Dropout(attention_dropout, dtype=self.dtype_policy)

    def build(self, query_shape, key_value_shape=None, *args, **kwargs):
        self.query.build(query_shape)
        kv_shape = query_shape if key_value_shape is None else key_value_shape
        self.key.build(kv_shape)
        self.value.build(kv_shape)
        self.built = True

    def _split_heads(self, x):
        b, t = dims(x)[:2]
        x = tf.reshape(x, (b, t, self.num_heads, self.head_size))  # (B, T, N, D)
        return swap_heads(x)  # (B, N, T, D)

    def project_key_value(self, key_value):
        """[B, Tk, H] -> the pair (keys, values), each [B*N, Tk, D]: what
        `projected_key_value` takes (a cross-attention cache)."""
        def project(layer):
            x = self._split_heads(layer(key_value))  # (B, N, Tk, D)
            return tf.reshape(x, (-1, dims(x)[2], self.head_size))

        return project(self.key), project(self.value)

    def call(self, query, key_value=None, attention_bias=None, attention_mask=None,
             causal=False, cache=None, cache_index=None, training=None, output_range=None,
             projected_key_value=None):
        source = query if key_value is None else key_value
        if output_range is not None:
            query = query[:, :output_range]
        q = self._split_heads(self.query(query))  # (B, N, Tq, D)
        start = 0
        if projected_key_value is not None:
            if cache is not None:
                raise ValueError(f"{self.name}: a cache or projected keys and values, not both")
            k, v = projected_key_value  # (B*N, Tk, D), read as they are
        else:
            k = self._split_heads(self.key(source))  # (B, N, Tk, D)
            v = self._split_heads(self.value(source))  # (B, N, Tk, D)
        if cache is not None:
            if cache_index is None:
                raise ValueError(f"{self.name}: a cache needs cache_index")
            start = cache_index
            cache = self._write_cache(cache, k, v, cache_index)
            k, v = cache  # (B*N, S, D)
            if not causal:  # keys past this step's positions are not written yet
                attention_mask = merge_masks(
                    attention_mask, _written_keys(ops.shape(k)[1], start + ops.shape(q)[2]))
        b, _, tq, _ = dims(q)
        if self.scale:
            q = q * ops.cast(1.0 / math.sqrt(self.head_size), q.dtype)
        flat = cache is not None or projected_key_value is not None
        # q k^T as one product with transpose_b: XLA copied the transposed keys (the
        # whole cache when decoding) for `matmul(q, transpose(k))`.
        if not flat:
            scores = tf.matmul(q, k, transpose_b=True)  # (B, N, Tq, Tk)
        else:  # the products read the cache as it is, [B*N, S, D] (see `_write_cache`)
            q = ops.reshape(q, (-1, tq, self.head_size))
            scores = tf.matmul(q, k, transpose_b=True)  # (B*N, Tq, S)
            scores = ops.reshape(scores, (b, self.num_heads, tq, -1))
        tk = dims(scores)[3]
        # Softmax in float32 even under mixed precision, as the references do.
        scores = ops.cast(scores, "float32")
        if attention_bias is not None:
            scores = scores + ops.cast(attention_bias, "float32")
        if causal:
            attention_mask = merge_masks(attention_mask, causal_mask(tq, tk, start))
        if attention_mask is not None:
            allowed = ops.expand_dims(ops.cast(attention_mask, "bool"), 1)  # (B, 1, Tq, Tk)
            scores = ops.where(allowed, scores, _MASKED_SCORE)
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)  # (B, N, Tq, Tk)
        probs = self.dropout_layer(probs, training=training)
        if not flat:
            context = ops.matmul(probs, v)  # (B, N, Tq, D)
        else:
            context = ops.matmul(ops.reshape(probs, (-1, tq, tk)), v)  # (B*N, Tq, D)
            context = ops.reshape(context, (b, self.num_heads, tq, self.head_size))
        context = swap_heads(context)  # (B, Tq, N, D)
        out = ops.reshape(context, (b, tq, self.inner_size))  # (B, Tq, N * D)
        return out if cache is None else (out, cache)

    def _write_cache(self, cache, k, v, cache_index):
        """Writes k, v [B, N, T, D] at `cache_index` of the (keys, values) cache, each
        [B*N, S, D]; returns the new pair. Heads are merged into the batch dimension so
        that the attention products read the written cache with no reshape: XLA
        otherwise computed the update twice at batch 1 (once per shape) and copied a
        cache a step for each duplicate (about a tenth of a GPT-2 124M step on a CPU)."""
        k_cache, v_cache = cache
        if len(k_cache.shape) != 3:
            raise ValueError(f"{self.name}: each cache tensor is [batch * heads, length, "
                             f"head size]; got shape {tuple(k_cache.shape)}")
        t = ops.shape(k)[2]
        at = ops.cast(cache_index, "int32")
        k = ops.reshape(ops.cast(k, k_cache.dtype), (-1, t, self.head_size))
        v = ops.reshape(ops.cast(v, v_cache.dtype), (-1, t, self.head_size))
        return write_at(k_cache, 1, at, k), write_at(v_cache, 1, at, v)

    def compute_output_spec(self, query, key_value=None, attention_bias=None,
                            attention_mask=None, causal=False, cache=None, cache_index=None,
                            training=None, output_range=None, projected_key_value=None):
        batch, length, _ = sequence_output_shape(query.shape, output_range)
        out = keras.KerasTensor((batch, length, self.inner_size), dtype=self.compute_dtype)
        if cache is None:
            return out
        return out, tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_heads": self.num_heads, "attention_dropout": self.attention_dropout,
                "kernel_initializer": serialize_initializer(self.kernel_initializer),
                "head_size": self.head_size if self.custom_head_size else None,
                "use_bias": self.use_bias, "scale": self.scale}


def _written_keys(key_length, end):
    """bool [1, 1, Tk]: the cache positions written so far (j < end)."""
    return ops.reshape(ops.arange(key_length) < end, (1, 1, key_length))


def sequence_output_shape(x_shape, output_range=None):
    """[B, T, H], or [B, min(T, R), H] when only the first R positions are computed."""
    batch, length, width = x_shape
    if output_range is not None:
        length = output_range if length is None else min(length, output_range)
    return (batch, length, width)
