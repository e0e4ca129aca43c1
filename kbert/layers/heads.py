"""Task heads and the small layers they share: sentence classification
(`ClassifierHead`), SQuAD spans (`SpanHead`), masks and stopped gradients for
feature-based heads. They live below the models, so that a family's own task code
(GPT's auxiliary LM loss, ELMo's pooled classifier) and the task commands both use them,
and `python -m kbert.export` deserializes them without importing `kbert.tasks`."""

from __future__ import annotations

import keras
from keras import ops

from kbert.layers.initializers import truncated_normal

# The label of positions a token-level loss skips (padding, a word's later pieces).
IGNORE_LABEL = -1


@keras.saving.register_keras_serializable(package="kbert")
class ClassifierHead(keras.layers.Layer):
    """Dropout then one dense layer on `pooled_output` (the [CLS] vector after the
    pooler), as in the BERT paper's section 4.1; the outputs are float32.

    Args:
        num_outputs: number of classes, or 1 for regression.
        dropout: dropout rate before the dense layer (the encoder's, 0.1 for BERT).
    """

    def __init__(self, num_outputs: int, dropout: float = 0.1, initializer_range=0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = int(num_outputs)
        self.rate = float(dropout)
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(self.rate, name="dropout")
        self.dense = keras.layers.Dense(self.num_outputs,
                                        kernel_initializer=truncated_normal(initializer_range),
                                        dtype="float32", name="dense")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        x = self.dropout(pooled_output, training=training)
        return self.dense(ops.cast(x, "float32"))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.num_outputs)

    def get_config(self):
        return {**super().get_config(), "num_outputs": self.num_outputs,
                "dropout": self.rate, "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package="kbert")
class SpanHead(keras.layers.Layer):
    """One dense layer to two logits per token: the S and E vectors of the BERT paper
    (section 4.2); P(start = i) = softmax_i(S . T_i). Logits are float32.

    Call args:
        sequence_output: float Tensor [batch_size, seq_length, hidden_size].

    Returns:
        (start_logits, end_logits), float32 Tensors [batch_size, seq_length].
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(2, kernel_initializer=truncated_normal(initializer_range),
                                        dtype="float32", name="dense")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.built = True

    def call(self, sequence_output):
        logits = self.dense(ops.cast(sequence_output, "float32"))  # (B, T, 2)
        return logits[..., 0], logits[..., 1]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]), tuple(input_shape[:-1])

    def get_config(self):
        return {**super().get_config(), "initializer_range": self.initializer_range}


# Registered under their first names, so that task folders saved before the move load.
@keras.saving.register_keras_serializable(package="kbert", name="_BoolMask")
class BoolMask(keras.layers.Layer):
    """padding_mask (int) -> bool mask for the LSTMs."""

    def call(self, padding_mask):
        return ops.cast(padding_mask, "bool")

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package="kbert", name="_StopGradient")
class StopGradient(keras.layers.Layer):
    """Feature-based use: the encoder's features are fixed inputs of the head."""

    def call(self, x):
        return ops.stop_gradient(x)

    def compute_output_shape(self, input_shape):
        return input_shape
