"""The SQuAD span head: start and end vectors over the encoder's sequence output."""

from __future__ import annotations

import keras
from keras import ops

from kbert.layers.initializers import truncated_normal


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


def build_model(encoder) -> keras.Model:
    """A span model on an encoder (the model interface): encoder inputs ->
    {"start_logits", "end_logits"}.

    The span head reads the sequence output only; a pooler then gets no gradient. The
    command line freezes it (`encoder.set_pooler_trainable(False)`, weights kept and
    saved); this function does not change `encoder`."""
    inputs = encoder.input
    start, end = SpanHead(encoder.initializer_range, name="span_head")(
        encoder.features(inputs)["sequence_output"])
    outputs = {"start_logits": keras.layers.Identity(name="start_logits")(start),
               "end_logits": keras.layers.Identity(name="end_logits")(end)}
    return keras.Model(inputs, outputs, name=f"{encoder.family}_squad")


def span_losses():
    """The paper's loss, the mean of start and end cross-entropy, as Keras losses."""
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return ({"start_logits": ce, "end_logits": ce},
            {"start_logits": 0.5, "end_logits": 0.5})
