"""The SQuAD span head: start and end vectors over the encoder's sequence output."""

from __future__ import annotations

import keras

from kbert.layers.heads import SpanHead


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
