"""T5's own pieces (Raffel et al. 2020): the scale-only RMS layer norm, the bucketed
relative position bias that replaces position embeddings (one table per stack, shared
by its layers; bidirectional buckets in the encoder, causal ones in the decoder), and
T5 v1.1's gated feed-forward. Weights and results are those of the reference
(`transformers`' `T5LayerNorm`, `T5Attention.compute_bias`, `T5DenseGatedActDense`;
tests compare them)."""

from __future__ import annotations

import math

import keras
from keras import ops

from kbert.layers.activations import get_activation
from kbert.layers.attention import MultiHeadAttention
from kbert.layers.dense import Dense


@keras.saving.register_keras_serializable(package="kbert")
class RMSNorm(keras.layers.Layer):
    """x / sqrt(mean(x^2) + eps) * scale: no mean subtracted, no bias; the mean of
    squares taken in float32 whatever the compute dtype."""

    def __init__(self, epsilon: float = 1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        self.scale = self.add_weight(name="scale", shape=(input_shape[-1],),
                                     initializer="ones")

    def call(self, x):
        x32 = ops.cast(x, "float32")
        variance = ops.mean(ops.square(x32), axis=-1, keepdims=True)
        x = ops.cast(x32 * ops.rsqrt(variance + self.epsilon), self.compute_dtype)
        return x * ops.cast(self.scale, self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


def relative_position_bucket(relative_position, bidirectional: bool = True,
                             num_buckets: int = 32, max_distance: int = 128):
    """T5's bucket of each relative position (key position - query position): half the
    buckets exact for short distances, the rest logarithmic up to `max_distance`;
    bidirectional buckets tell before from after, causal ones keep only the past."""
    relative_position = ops.cast(relative_position, "int32")
    buckets = ops.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + ops.cast(relative_position > 0, "int32") * num_buckets
        distance = ops.abs(relative_position)
    else:
        distance = -ops.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    scaled = (ops.log(ops.cast(ops.maximum(distance, 1), "float32") / max_exact)
              / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    large = ops.minimum(max_exact + ops.cast(scaled, "int32"), num_buckets - 1)
    return buckets + ops.where(is_small, distance, large)


@keras.saving.register_keras_serializable(package="kbert")
class RelativePositionBias(keras.layers.Layer):
    """The attention bias [1, heads, queries, keys] of T5's relative positions, from a
    [num_buckets, num_heads] table: called on the query and key positions ([Q], [K]
    int tensors), or `bias(query_length, key_length, start)` where `start` is the first
    query's position (decoding with a cache: the tokens already seen)."""

    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True, initializer="random_normal", **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.num_buckets = num_heads, num_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(name="embeddings",
                                          shape=(self.num_buckets, self.num_heads),
                                          initializer=self.initializer)

    def bias(self, query_length, key_length, start=0):
        """The bias of `query_length` queries from position `start` over `key_length`
        keys from position 0."""
        return self(ops.arange(query_length) + start, ops.arange(key_length))

    def call(self, query_positions, key_positions):
        buckets = relative_position_bucket(
            key_positions[None, :] - query_positions[:, None], self.bidirectional,
            self.num_buckets, self.max_distance)
        values = ops.take(ops.cast(self.embeddings, self.compute_dtype), buckets, axis=0)
        return ops.expand_dims(ops.transpose(values, (2, 0, 1)), 0)

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads,
                "num_buckets": self.num_buckets, "max_distance": self.max_distance,
                "bidirectional": self.bidirectional,
                "initializer": keras.initializers.serialize(self.initializer)}


@keras.saving.register_keras_serializable(package="kbert")
class GatedFeedForward(keras.layers.Layer):
    """T5 v1.1's feed-forward: wo(act(wi_0 x) * wi_1 x), no biases (`activation`
    "gelu_tanh" for v1.1, what Hugging Face calls gelu_new; "relu" for T5.1.0's
    ungated one, `gated=False`: wo(relu(wi x)))."""

    def __init__(self, hidden_size: int, intermediate_size: int,
                 activation: str = "gelu_tanh", gated: bool = True, dropout: float = 0.0,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size, self.intermediate_size = hidden_size, intermediate_size
        self.activation_name, self.gated, self.rate = activation, gated, dropout
        self.activation = get_activation(activation)
        self.wi_0 = Dense(intermediate_size, use_bias=False, name="wi_0" if gated else "wi")
        self.wi_1 = Dense(intermediate_size, use_bias=False, name="wi_1") if gated else None
        self.wo = Dense(hidden_size, use_bias=False, name="wo")
        self.dropout = keras.layers.Dropout(dropout)

    def build(self, input_shape):
        self.wi_0.build(input_shape)
        if self.wi_1 is not None:
            self.wi_1.build(input_shape)
        self.wo.build((*input_shape[:-1], self.intermediate_size))

    def call(self, x, training=None):
        h = self.activation(self.wi_0(x))
        if self.wi_1 is not None:
            h = h * self.wi_1(x)
        return self.wo(self.dropout(h, training=training))

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "intermediate_size": self.intermediate_size,
                "activation": self.activation_name, "gated": self.gated,
                "dropout": self.rate}


@keras.saving.register_keras_serializable(package="kbert")
class T5Block(keras.layers.Layer):
    """One pre-norm T5 block: self-attention (`self_attention`, its output projection
    `self_attention_output`), in a decoder cross-attention over the encoder's output
    (`cross_attention`, `cross_attention_output`), then the feed-forward; each sublayer
    `x + dropout(sublayer(RMSNorm(x)))`. Attention is T5's: no 1/sqrt(d) scale,
    projections without biases, `num_heads * head_size` wide; the relative position
    bias is the caller's (one table per stack, added by every block).

    Call args:
        x: float [B, T, H].
        position_bias: float [1, N, T, S], added to the self-attention scores.
        attention_mask: bool [B, T or 1, S], True where a query may attend.
        causal: the decoder's self-attention (no key after the query).
        encoder_output, encoder_mask: float [B, Te, H], bool [B, 1, Te] (decoders).
        cache, cache_index: the self-attention's (keys, values) cache (see
            `MultiHeadAttention`) and the first query's position.
        cross_cache: the cross-attention's (keys, values), from
            `cross_attention.project_key_value(encoder_output)`, instead of
            `encoder_output`.
    Returns [B, T, H], or with `cache` the pair (output, updated cache).
    """

    def __init__(self, hidden_size: int, num_heads: int, head_size: int,
                 intermediate_size: int, activation: str = "relu", gated: bool = False,
                 dropout: float = 0.1, epsilon: float = 1e-6, cross_attention: bool = False,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size, self.num_heads, self.head_size = hidden_size, num_heads, head_size
        self.intermediate_size, self.activation, self.gated = intermediate_size, activation, gated
        self.rate, self.epsilon, self.has_cross = dropout, epsilon, cross_attention

        def attention(name):
            return MultiHeadAttention(hidden_size, num_heads, attention_dropout=dropout,
                                      head_size=head_size, use_bias=False, scale=False,
                                      dtype=self.dtype_policy, name=name)

        def output(name):
            return Dense(hidden_size, use_bias=False, dtype=self.dtype_policy, name=name)

        self.self_attention_norm = RMSNorm(epsilon, dtype=self.dtype_policy,
                                           name="self_attention_norm")
        self.self_attention = attention("self_attention")
        self.self_attention_output = output("self_attention_output")
        if cross_attention:
            self.cross_attention_norm = RMSNorm(epsilon, dtype=self.dtype_policy,
                                                name="cross_attention_norm")
            self.cross_attention = attention("cross_attention")
            self.cross_attention_output = output("cross_attention_output")
        self.feed_forward_norm = RMSNorm(epsilon, dtype=self.dtype_policy,
                                         name="feed_forward_norm")
        self.feed_forward = GatedFeedForward(hidden_size, intermediate_size, activation,
                                             gated=gated, dropout=dropout,
                                             dtype=self.dtype_policy, name="feed_forward")
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, input_shape, *args, **kwargs):
        inner = (*input_shape[:-1], self.num_heads * self.head_size)
        self.self_attention_norm.build(input_shape)
        self.self_attention.build(input_shape)
        self.self_attention_output.build(inner)
        if self.has_cross:
            self.cross_attention_norm.build(input_shape)
            self.cross_attention.build(input_shape, input_shape)
            self.cross_attention_output.build(inner)
        self.feed_forward_norm.build(input_shape)
        self.feed_forward.build(input_shape)
        self.built = True

    def call(self, x, position_bias=None, attention_mask=None, causal=False,
             encoder_output=None, encoder_mask=None, cache=None, cache_index=None,
             cross_cache=None, training=None):
        h = self.self_attention(self.self_attention_norm(x), attention_bias=position_bias,
                                attention_mask=attention_mask, causal=causal, cache=cache,
                                cache_index=cache_index, training=training)
        if cache is not None:
            h, cache = h
        x = x + self.dropout(self.self_attention_output(h), training=training)
        if self.has_cross:
            h = self.cross_attention(self.cross_attention_norm(x), key_value=encoder_output,
                                     attention_mask=encoder_mask,
                                     projected_key_value=cross_cache, training=training)
            x = x + self.dropout(self.cross_attention_output(h), training=training)
        x = x + self.dropout(self.feed_forward(self.feed_forward_norm(x), training=training),
                             training=training)
        return x if cache is None else (x, cache)

    def compute_output_spec(self, x, *args, cache=None, **kwargs):
        out = keras.KerasTensor(x.shape, dtype=self.compute_dtype)
        if cache is None:
            return out
        return out, tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_heads": self.num_heads, "head_size": self.head_size,
                "intermediate_size": self.intermediate_size, "activation": self.activation,
                "gated": self.gated, "dropout": self.rate, "epsilon": self.epsilon,
                "cross_attention": self.has_cross}
