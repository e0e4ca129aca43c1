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


def classifier_model(inputs, out, regression: bool, family: str) -> keras.Model:
    """A sequence classifier over `inputs` from its head's output `out` [B, labels]: the
    output the task commands, exports and task folders read, `score` [B] for a
    regression (the model `FAMILY_regressor`), else `logits` [B, labels]
    (`FAMILY_classifier`)."""
    if regression:
        return keras.Model(inputs, {"score": keras.layers.Reshape((), name="score")(out)},
                           name=f"{family}_regressor")
    return keras.Model(inputs, {"logits": keras.layers.Identity(name="logits")(out)},
                       name=f"{family}_classifier")


@keras.saving.register_keras_serializable(package="kbert")
class TanhClassifierHead(keras.layers.Layer):
    """Dropout, a dense layer with tanh, dropout, and the output layer (float32
    outputs): `RobertaClassificationHead` (on the `<s>` state of the sequence output,
    not a pooler) and `BartClassificationHead` (on the decoder's state at the final
    `</s>`). Weights `dense` and `out_proj`, as theirs."""

    def __init__(self, num_outputs: int, hidden_size: int, dropout: float = 0.1,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs, self.hidden_size = int(num_outputs), int(hidden_size)
        self.rate, self.initializer_range = float(dropout), initializer_range
        init = truncated_normal(initializer_range)
        self.dropout = keras.layers.Dropout(self.rate)
        self.dense = keras.layers.Dense(self.hidden_size, activation="tanh",
                                        kernel_initializer=init, name="dense")
        self.out_proj = keras.layers.Dense(self.num_outputs, kernel_initializer=init,
                                           dtype="float32", name="out_proj")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.out_proj.build(tuple(input_shape[:-1]) + (self.hidden_size,))
        self.built = True

    def call(self, state, training=None):
        x = self.dense(self.dropout(state, training=training))
        return self.out_proj(self.dropout(x, training=training))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.num_outputs,)

    def get_config(self):
        return {**super().get_config(), "num_outputs": self.num_outputs,
                "hidden_size": self.hidden_size, "dropout": self.rate,
                "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package="kbert")
class LastTokenState(keras.layers.Layer):
    """[B, T, H] states and the [B, T] padding mask -> [B, H], each row's state at its
    last real position (right or left padding): the only position of a decoder that
    has seen the whole input (the GPT paper's extract token)."""

    def call(self, sequence_output, padding_mask):
        mask = ops.cast(padding_mask, "int32")
        positions = ops.cumsum(ops.ones_like(mask), axis=1) - 1  # 0 .. T-1
        index = ops.max(positions * mask, axis=1)  # the largest real position, (B,)
        return ops.take_along_axis(sequence_output, index[:, None, None], axis=1)[:, 0]

    def compute_output_spec(self, sequence_output, padding_mask):
        shape = sequence_output.shape
        return keras.KerasTensor((shape[0], shape[2]), dtype=sequence_output.dtype)


def last_token_state(sequence_output, padding_mask):
    """`LastTokenState` as a function (eager or symbolic inputs)."""
    return LastTokenState()(sequence_output, padding_mask)


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
