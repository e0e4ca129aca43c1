"""Sentence(-pair) classification and regression on an encoder's sentence vector."""

from __future__ import annotations

import keras

from kbert.layers.heads import ClassifierHead, classifier_model


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
    return classifier_model(inputs, out, regression, encoder.family)
