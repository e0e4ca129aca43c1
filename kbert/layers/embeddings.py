"""Input embeddings as parts: tokens (with tied output logits), learned positions
(with a start index for cached decoding), and BERT's sum of token, segment and
position embeddings."""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from kbert import internals
from kbert.layers.initializers import initializer_from, serialize_initializer


@keras.saving.register_keras_serializable(package="kbert")
class TokenEmbedding(keras.layers.Embedding):
    """A token embedding table [V, H] that also gives tied output logits.

    `layer(ids)` looks rows up; `layer.logits(x)` multiplies by the transposed table,
    `x @ E^T` (the output layer of GPT and of BERT's masked LM, whose weights are the
    input embeddings: Press & Wolf, 2017). Logits are computed in float32.
    """

    def call(self, inputs, reverse=False):
        """Ids [...] -> embeddings [..., H]; with `reverse=True`, hidden states
        [..., H] -> float32 logits [..., V] (the same layer, so that a functional model
        can use it both ways)."""
        if reverse:
            return self.logits(inputs)
        return super().call(inputs)

    def compute_output_spec(self, inputs, reverse=False):
        if reverse:
            return keras.KerasTensor(tuple(inputs.shape[:-1]) + (self.input_dim,),
                                     dtype="float32")
        return keras.KerasTensor(tuple(inputs.shape) + (self.output_dim,),
                                 dtype=self.compute_dtype)

    def logits(self, x):
        """float Tensor [..., H] -> float32 logits [..., V]."""
        int8 = self.quantization_mode == "int8"
        table = ops.cast(self._embeddings if int8 else self.embeddings, "float32")
        x = ops.cast(x, "float32")
        # One [N, H] x [V, H]^T product (transpose_b): the table is read as it is
        # stored. `x @ transpose(table)` made XLA copy the whole transposed table
        # (154 MB for GPT-2) at every call, e.g. every decoding step.
        rows = tf.matmul(tf.reshape(x, (-1, ops.shape(x)[-1])), table, transpose_b=True)
        if int8:  # row v of the table is int8 values / embeddings_scale[v]
            rows = rows / ops.cast(self.embeddings_scale, "float32")[None, :]
        return tf.reshape(rows, tf.concat([tf.shape(x)[:-1], tf.shape(table)[:1]], 0))

    def _int8_call(self, inputs, reverse=False, training=None):
        # Keras routes a quantized layer's call here instead of `call`.
        if reverse:
            return self.logits(inputs)
        return super()._int8_call(inputs, training=training)

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras' int8 quantization of `Embedding` (one scale per row), which the tied
        output layer (`logits`) reads too; other modes are refused, since `logits`
        would read their packed tables wrongly."""
        if mode != "int8":
            raise NotImplementedError(
                f"{self.name}: quantize({mode!r}) is not supported for a token table that "
                "is also the output layer; use 'int8'")
        with internals.one_gc_collect():  # see kbert.layers.dense
            return super().quantize(mode, type_check=False, config=config)


@keras.saving.register_keras_serializable(package="kbert")
class PositionEmbedding(keras.layers.Layer):
    """Learned absolute position embeddings: rows `start_index .. start_index + T - 1`.

    Args:
        max_length: rows of the table (the longest sequence).
        hidden_size: H.
        initializer: initializer of the table (default truncated normal, 0.02).

    Call args:
        inputs: a Tensor [B, T, ...] (token ids or their embeddings); only its length
            T is read.
        start_index: int (or int scalar Tensor), the first position: the cache index
            when decoding.
        positions: None, or int Tensor [B, T]: the position of each token (a decoder
            reading left-padded prompts counts positions from each row's first real
            token); rows are then gathered per token.

    Returns:
        float Tensor [T, H]; with `positions`, [B, T, H].
    """

    def __init__(self, max_length, hidden_size, initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.max_length = int(max_length)
        self.hidden_size = int(hidden_size)
        self.initializer = initializer_from(initializer)

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(name="embeddings",
                                          shape=(self.max_length, self.hidden_size),
                                          initializer=self.initializer)
        self.built = True

    def call(self, inputs, start_index=0, positions=None):
        if positions is not None:
            return ops.take(self.embeddings, ops.cast(positions, "int32"), axis=0)
        length = inputs.shape[1]
        if length is not None and isinstance(start_index, int) \
                and start_index + length > self.max_length:
            raise ValueError(f"{self.name}: positions up to {start_index + length} exceed "
                             f"the table's {self.max_length} rows")
        length = ops.shape(inputs)[1]
        return ops.slice(self.embeddings, (start_index, 0), (length, self.hidden_size))

    def compute_output_spec(self, inputs, start_index=0, positions=None):
        if positions is not None:
            return keras.KerasTensor(tuple(positions.shape) + (self.hidden_size,),
                                     dtype=self.compute_dtype)
        return keras.KerasTensor((inputs.shape[1], self.hidden_size), dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "max_length": self.max_length,
                "hidden_size": self.hidden_size,
                "initializer": serialize_initializer(self.initializer)}


@keras.saving.register_keras_serializable(package="kbert")
class BertEmbeddings(keras.layers.Layer):
    """Sum of token, segment and position embeddings (BERT paper, figure 2), then
    LayerNorm and dropout.

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
        init = serialize_initializer(initializer_from(None, initializer_range))
        policy = self.dtype_policy
        self.word_embeddings = TokenEmbedding(
            vocab_size, hidden_size, embeddings_initializer=initializer_from(init),
            dtype=policy, name="word_embeddings")
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, hidden_size, embeddings_initializer=initializer_from(init),
            dtype=policy, name="token_type_embeddings")
        self.position_embeddings = PositionEmbedding(
            max_position_embeddings, hidden_size, init, dtype=policy,
            name="position_embeddings")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="LayerNorm")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy)

    def build(self, token_ids_shape, segment_ids_shape=None):
        self.word_embeddings.build(token_ids_shape)
        self.token_type_embeddings.build(token_ids_shape)
        self.position_embeddings.build()
        self.layer_norm.build(tuple(token_ids_shape) + (self.hidden_size,))
        self.built = True

    def call(self, token_ids, segment_ids, training=None):
        static_length = token_ids.shape[1]
        if static_length is not None and static_length > self.max_position_embeddings:
            raise ValueError(
                f"{self.name}: sequence length {static_length} exceeds "
                f"max_position_embeddings={self.max_position_embeddings}; pack the inputs "
                f"to seq_length <= {self.max_position_embeddings}")
        positions = self.position_embeddings(token_ids)  # (T, H)
        x = self.word_embeddings(token_ids) + self.token_type_embeddings(segment_ids)  # (B, T, H)
        x = self.layer_norm(x + ops.expand_dims(positions, 0))  # (1, T, H) broadcast
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
