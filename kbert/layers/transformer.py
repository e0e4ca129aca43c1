"""The transformer block: post-LayerNorm (BERT, GPT-1, BART) or pre-LayerNorm (GPT-2),
with cross-attention over an encoder's output in an encoder-decoder's decoder (BART)."""

from __future__ import annotations

import keras

from kbert.layers.activations import get_activation
from kbert.layers.attention import MultiHeadAttention, sequence_output_shape
from kbert.layers.dense import Dense
from kbert.layers.initializers import initializer_from, serialize_initializer


@keras.saving.register_keras_serializable(package="kbert")
class TransformerBlock(keras.layers.Layer):
    """Self-attention and feed-forward sublayers, each with a residual connection.

    Post-LN (`norm_first=False`; Vaswani et al. 2017, BERT's `modeling.py`, GPT-1):
        y = LN1(x + Drop1(Dense_o(MHA(x))));  out = LN2(y + Drop2(Dense_2(act(Dense_1(y)))))
    Pre-LN (`norm_first=True`; GPT-2, which adds a final LayerNorm after the last block):
        y = x + Drop1(Dense_o(MHA(LN1(x))));  out = y + Drop2(Dense_2(act(Dense_1(LN2(y)))))

    Sublayer names follow Google's BERT checkpoint: `attention` (query/key/value),
    `attention_output` (`attention/output/dense`; GPT-2's `attn/c_proj`),
    `attention_layer_norm` (GPT-2's `ln_1`), `intermediate` (`mlp/c_fc`), `output`
    (`mlp/c_proj`) and `output_layer_norm` (`ln_2`).

    Args:
        hidden_size: H.
        num_heads: N.
        intermediate_size: width of the feed-forward layer (4H in the papers).
        hidden_act: "gelu" (erf), "gelu_tanh" or "relu".
        dropout: dropout on each sublayer's output (two separate layers).
        attention_dropout: dropout on attention probabilities.
        layer_norm_epsilon: LayerNorm epsilon.
        norm_first: pre-LN when True, post-LN when False.
        kernel_initializer: initializer of every kernel (default: BERT's truncated
            normal, stddev 0.02).
        output_kernel_initializer: initializer of the two residual projections
            (`attention_output`, `output`); default `kernel_initializer`. GPT-2 scales
            its stddev by 1 / sqrt(2 * num_layers).
        cross_attention: a decoder block of an encoder-decoder: after self-attention, a
            sublayer attending to the encoder's output (`cross_attention`,
            `cross_attention_output`, `cross_attention_layer_norm`), post- or pre-LN
            as the others.
        activation_dropout: dropout after the feed-forward's activation (BART's).

    Call args:
        x: float Tensor [B, T, H].
        attention_bias, attention_mask, causal, cache, cache_index: as for
            `MultiHeadAttention`.
        output_range: None, or R: compute only the first R positions' outputs (all
            positions are still attended to); the result is then [B, R, H] and equals
            the first R rows without it.
        encoder_output, encoder_mask: float [B, Te, H] and bool [B, 1, Te] (True on
            real keys), for cross-attention; or `cross_cache`, the pair
            `cross_attention.project_key_value(encoder_output)` (decoding).

    Returns:
        float Tensor [B, T, H]; with `cache`, the pair (output, updated cache).
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, hidden_act="gelu",
                 dropout=0.1, attention_dropout=0.1, layer_norm_epsilon=1e-12,
                 norm_first=False, kernel_initializer=None, output_kernel_initializer=None,
                 cross_attention=False, activation_dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.norm_first = bool(norm_first)
        self.has_cross = bool(cross_attention)
        self.activation_dropout = activation_dropout
        self.kernel_initializer = initializer_from(kernel_initializer)
        self.output_kernel_initializer = (self.kernel_initializer
                                          if output_kernel_initializer is None
                                          else initializer_from(output_kernel_initializer))
        policy = self.dtype_policy

        def dense(width, name, init, activation=None):
            return Dense(width, activation=activation, kernel_initializer=init, dtype=policy,
                         name=name)

        def norm(name):
            return keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, dtype=policy,
                                                   name=name)

        self.attention = MultiHeadAttention(
            hidden_size, num_heads, attention_dropout,
            kernel_initializer=serialize_initializer(self.kernel_initializer), dtype=policy,
            name="attention")
        self.attention_output = dense(hidden_size, "attention_output",
                                      self.output_kernel_initializer)
        self.attention_layer_norm = norm("attention_layer_norm")
        self.intermediate = dense(intermediate_size, "intermediate", self.kernel_initializer,
                                  activation=get_activation(hidden_act))
        self.output_dense = dense(hidden_size, "output", self.output_kernel_initializer)
        self.output_layer_norm = norm("output_layer_norm")
        self.attention_output_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.output_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.activation_dropout_layer = keras.layers.Dropout(activation_dropout, dtype=policy)
        if self.has_cross:
            self.cross_attention = MultiHeadAttention(
                hidden_size, num_heads, attention_dropout,
                kernel_initializer=serialize_initializer(self.kernel_initializer),
                dtype=policy, name="cross_attention")
            self.cross_attention_output = dense(hidden_size, "cross_attention_output",
                                                self.output_kernel_initializer)
            self.cross_attention_layer_norm = norm("cross_attention_layer_norm")
            self.cross_attention_dropout = keras.layers.Dropout(dropout, dtype=policy)

    def build(self, x_shape, *args, **kwargs):
        self.attention.build(x_shape)
        self.attention_output.build(x_shape)
        self.attention_layer_norm.build(x_shape)
        self.intermediate.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.intermediate_size,))
        self.output_layer_norm.build(x_shape)
        if self.has_cross:
            self.cross_attention.build(x_shape, x_shape)
            self.cross_attention_output.build(x_shape)
            self.cross_attention_layer_norm.build(x_shape)
        self.built = True

    def call(self, x, attention_bias=None, attention_mask=None, causal=False, cache=None,
             cache_index=None, training=None, output_range=None, encoder_output=None,
             encoder_mask=None, cross_cache=None):
        attention_in = self.attention_layer_norm(x) if self.norm_first else x
        attn = self.attention(attention_in, attention_bias=attention_bias,
                              attention_mask=attention_mask, causal=causal, cache=cache,
                              cache_index=cache_index, training=training,
                              output_range=output_range)  # (B, T, H), or (B, R, H)
        if cache is not None:
            attn, cache = attn
        if output_range is not None:
            x = x[:, :output_range]
        attn = self.attention_output_dropout(self.attention_output(attn), training=training)
        x = x + attn if self.norm_first else self.attention_layer_norm(x + attn)
        if self.has_cross:
            source = self.cross_attention_layer_norm(x) if self.norm_first else x
            cross = self.cross_attention(source, key_value=encoder_output,
                                         attention_mask=encoder_mask,
                                         projected_key_value=cross_cache, training=training)
            cross = self.cross_attention_dropout(self.cross_attention_output(cross),
                                                 training=training)
            x = x + cross if self.norm_first else self.cross_attention_layer_norm(x + cross)
        ffn_in = self.output_layer_norm(x) if self.norm_first else x
        hidden = self.activation_dropout_layer(self.intermediate(ffn_in), training=training)
        ffn = self.output_dropout(self.output_dense(hidden), training=training)  # (B, T, H)
        x = x + ffn if self.norm_first else self.output_layer_norm(x + ffn)
        return x if cache is None else (x, cache)

    def compute_output_spec(self, x, attention_bias=None, attention_mask=None, causal=False,
                            cache=None, cache_index=None, training=None, output_range=None,
                            **cross):
        out = keras.KerasTensor(sequence_output_shape(x.shape, output_range),
                                dtype=self.compute_dtype)
        if cache is None:
            return out
        return out, tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_heads": self.num_heads, "intermediate_size": self.intermediate_size,
                "hidden_act": self.hidden_act, "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon, "norm_first": self.norm_first,
                "kernel_initializer": serialize_initializer(self.kernel_initializer),
                "output_kernel_initializer": serialize_initializer(
                    self.output_kernel_initializer),
                "cross_attention": self.has_cross,
                "activation_dropout": self.activation_dropout}
