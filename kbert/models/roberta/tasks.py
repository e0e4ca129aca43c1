"""RoBERTa's task hooks (the registry reaches them by name, `Family.hook`): the GLUE head
of `RobertaForSequenceClassification`, and the pretraining recipe."""

from __future__ import annotations

import keras

from kbert.layers.initializers import truncated_normal
from kbert.models.roberta.pretraining import pretrain  # noqa: F401 (the pretrain hook)


@keras.saving.register_keras_serializable(package="kbert")
class RobertaClassificationHead(keras.layers.Layer):
    """`RobertaClassificationHead`: on the `<s>` state, dropout, a dense layer with tanh,
    dropout, and the output layer (float32 outputs). It reads the sequence output, not
    the encoder's pooler (`RobertaForSequenceClassification` builds none)."""

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

    def call(self, first_state, training=None):
        x = self.dense(self.dropout(first_state, training=training))
        return self.out_proj(self.dropout(x, training=training))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.num_outputs,)

    def get_config(self):
        return {**super().get_config(), "num_outputs": self.num_outputs,
                "hidden_size": self.hidden_size, "dropout": self.rate,
                "initializer_range": self.initializer_range}


def glue_model(encoder, task, tokenizer, options: dict) -> keras.Model:
    """`RobertaForSequenceClassification`'s model: the head on the `<s>` state of the
    sequence output; the pooler (where the folder had one) is frozen, never read."""
    encoder.set_pooler_trainable(False)
    inputs = encoder.keras_inputs()
    sequence = encoder.features(inputs)["sequence_output"]
    first = sequence[:, 0, :]  # the <s> state
    head = RobertaClassificationHead(1 if task.is_regression else task.num_labels,
                                     encoder.hidden_size, encoder.dropout_rate,
                                     encoder.initializer_range, name="classifier")
    out = head(first)
    if task.is_regression:
        return keras.Model(inputs, {"score": keras.layers.Reshape((), name="score")(out)},
                           name="roberta_regressor")
    return keras.Model(inputs, {"logits": keras.layers.Identity(name="logits")(out)},
                       name="roberta_classifier")
