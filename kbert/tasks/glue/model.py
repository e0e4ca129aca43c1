"""Sentence(-pair) classification and regression on an encoder's sentence vector."""

from __future__ import annotations

import keras
from keras import ops

from kbert.layers.initializers import truncated_normal


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


def build_classifier(encoder, num_labels: int, regression: bool = False) -> keras.Model:
    """Encoder inputs -> {"logits": [batch, num_labels]}, or {"score": [batch]} for
    regression (one output, trained with mean squared error).

    Built through the model interface (`kbert.models.interface.EncoderModel`): the head
    reads `pooled_output` from `encoder.sentence_encoder()`, which for BERT is
    `with_output_range(1)`: the same layers and weights, with the last layer computed
    for the [CLS] position only, the one the pooler reads. Outputs and gradients are
    those of the full encoder; a training step is cheaper by most of one layer
    (measured in `benchmarks/bench_bert.py`). `encoder` itself is not changed.
    """
    inputs = encoder.input
    pooled = encoder.sentence_encoder().features(inputs)["pooled_output"]
    head = ClassifierHead(1 if regression else num_labels, encoder.dropout_rate,
                          encoder.initializer_range, name="classifier")
    out = head(pooled)
    if regression:
        return keras.Model(inputs, {"score": keras.layers.Reshape((), name="score")(out)},
                           name=f"{encoder.family}_regressor")
    return keras.Model(inputs, {"logits": keras.layers.Identity(name="logits")(out)},
                       name=f"{encoder.family}_classifier")
