"""BERT input embeddings: token + segment + learned position, then LayerNorm and dropout."""

import keras
from keras import ops

from kbert.layers.activations import truncated_normal


@keras.saving.register_keras_serializable(package="kbert")
class BertEmbeddings(keras.layers.Layer):
    """Sum of token, segment and position embeddings (BERT paper, figure 2).

    Sublayers carry the names of Google's checkpoint (`word_embeddings`,
    `token_type_embeddings`, `position_embeddings`, `LayerNorm`).

    Args:
        vocab_size: number of WordPiece ids.
        hidden_size: H, the width of each embedding.
        max_position_embeddings: rows of the learned position table.
        type_vocab_size: number of segment ids.
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in the release).
        dropout: dropout rate after LayerNorm.
        initializer_range: stddev of the truncated-normal initializer.

    Call args:
        token_ids: int Tensor of shape [batch_size, seq_length].
        segment_ids: int Tensor of shape [batch_size, seq_length].

    Returns:
        float Tensor of shape [batch_size, seq_length, hidden_size].
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
                 layer_norm_epsilon=1e-12, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.initializer_range = initializer_range
        init = truncated_normal(initializer_range)
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, hidden_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="word_embeddings")
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, hidden_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="token_type_embeddings")
        self.position_embeddings = keras.layers.Embedding(
            max_position_embeddings, hidden_size, embeddings_initializer=init,
            dtype=self.dtype_policy, name="position_embeddings")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, token_ids_shape, segment_ids_shape=None):
        self.word_embeddings.build(token_ids_shape)
        self.token_type_embeddings.build(token_ids_shape)
        self.position_embeddings.build((None,))
        self.layer_norm.build(tuple(token_ids_shape) + (self.hidden_size,))
        self.built = True

    def call(self, token_ids, segment_ids, training=None):
        static_length = token_ids.shape[1]
        if static_length is not None and static_length > self.max_position_embeddings:
            raise ValueError(
                f"{self.name}: sequence length {static_length} exceeds "
                f"max_position_embeddings={self.max_position_embeddings}; pack the inputs "
                f"to seq_length <= {self.max_position_embeddings}")
        seq_length = ops.shape(token_ids)[1]
        positions = ops.arange(seq_length)  # (T,)
        x = self.word_embeddings(token_ids) + self.token_type_embeddings(segment_ids)  # (B, T, H)
        x = x + ops.expand_dims(self.position_embeddings(positions), 0)  # (1, T, H) broadcast
        x = self.layer_norm(x)
        return self.dropout_layer(x, training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_size,)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size,
                "max_position_embeddings": self.max_position_embeddings,
                "type_vocab_size": self.type_vocab_size,
                "layer_norm_epsilon": self.layer_norm_epsilon, "dropout": self.dropout,
                "initializer_range": self.initializer_range}
