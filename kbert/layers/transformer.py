"""The post-LayerNorm transformer block of the original BERT."""

import keras

from kbert.layers.activations import get_activation, truncated_normal
from kbert.layers.attention import MultiHeadSelfAttention, sequence_output_shape


@keras.saving.register_keras_serializable(package="kbert")
class TransformerEncoderBlock(keras.layers.Layer):
    """x -> LN(x + Drop(Dense(MHSA(x)))) -> LN(y + Drop(Dense(act(Dense(y))))).

    Post-LN as in Vaswani et al. (2017) and BERT's `modeling.py`. Sublayer names follow
    Google's checkpoint: `attention` (self query/key/value), `attention_output` (the
    `attention/output/dense`), `attention_layer_norm`, `intermediate`, `output` and
    `output_layer_norm`.

    Args:
        hidden_size: H.
        num_heads: N.
        intermediate_size: width of the feed-forward layer (4H in the paper).
        hidden_act: "gelu" (erf), "gelu_tanh" or "relu".
        dropout: dropout on each sublayer's output.
        attention_dropout: dropout on attention probabilities.
        layer_norm_epsilon: LayerNorm epsilon.
        initializer_range: stddev of the truncated-normal initializer.

    Call args:
        x: float Tensor of shape [batch_size, seq_length, hidden_size].
        attention_bias: float Tensor of shape [batch_size, 1, 1, seq_length].
        output_range: None, or R: compute only the first R positions' outputs (all
            positions are still attended to); the returned Tensor is then
            [batch_size, R, hidden_size] and equals the first R rows without it.

    Returns:
        float Tensor of shape [batch_size, seq_length, hidden_size].
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, hidden_act="gelu",
                 dropout=0.1, attention_dropout=0.1, layer_norm_epsilon=1e-12,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        init = truncated_normal(initializer_range)
        policy = self.dtype_policy
        self.attention = MultiHeadSelfAttention(
            hidden_size, num_heads, attention_dropout, initializer_range, dtype=policy,
            name="attention")
        self.attention_output = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=policy, name="attention_output")
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="attention_layer_norm")
        self.intermediate = keras.layers.Dense(
            intermediate_size, activation=get_activation(hidden_act), kernel_initializer=init,
            dtype=policy, name="intermediate")
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=policy, name="output")
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="output_layer_norm")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy)

    def build(self, x_shape, attention_bias_shape=None):
        self.attention.build(x_shape)
        self.attention_output.build(x_shape)
        self.attention_layer_norm.build(x_shape)
        self.intermediate.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.intermediate_size,))
        self.output_layer_norm.build(x_shape)
        self.built = True

    def call(self, x, attention_bias=None, training=None, output_range=None):
        attn = self.attention(x, attention_bias, training=training,
                              output_range=output_range)  # (B, T, H), or (B, R, H)
        if output_range is not None:
            x = x[:, :output_range]
        attn = self.dropout_layer(self.attention_output(attn), training=training)
        x = self.attention_layer_norm(x + attn)
        ffn = self.output_dense(self.intermediate(x))  # (B, T, I) -> (B, T, H)
        ffn = self.dropout_layer(ffn, training=training)
        return self.output_layer_norm(x + ffn)

    def compute_output_spec(self, x, attention_bias=None, training=None, output_range=None):
        return keras.KerasTensor(sequence_output_shape(x.shape, output_range),
                                 dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_heads": self.num_heads, "intermediate_size": self.intermediate_size,
                "hidden_act": self.hidden_act, "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range}
