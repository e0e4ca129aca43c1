"""NER heads: fine-tuning (dense softmax over the sequence output) and feature-based
(frozen encoder, chosen layers, 2-layer BiLSTM), as in the BERT paper's section 5.3."""

from __future__ import annotations

import keras
from keras import ops

from kbert.layers.initializers import truncated_normal
from kbert.layers.scalar_mix import ScalarMix

LAYER_CHOICES = ("last", "sum_last4", "concat_last4", "sum_all", "scalar_mix",
                 "embeddings", "second_to_last")


@keras.saving.register_keras_serializable(package="kbert")
class _BoolMask(keras.layers.Layer):
    """padding_mask (int) -> bool mask for the LSTMs."""

    def call(self, padding_mask):
        return ops.cast(padding_mask, "bool")

    def compute_output_shape(self, input_shape):
        return input_shape


def select_layers(hidden_states, layers: str):
    """The paper's feature choices over `hidden_states` (embeddings output first)."""
    if layers == "last":
        return hidden_states[-1]
    if layers == "second_to_last":
        return hidden_states[-2]
    if layers == "embeddings":
        return hidden_states[0]
    if layers == "sum_last4":
        return keras.layers.Add(name="sum_last4")(hidden_states[-4:])
    if layers == "concat_last4":
        return keras.layers.Concatenate(name="concat_last4")(hidden_states[-4:])
    if layers == "sum_all":
        return keras.layers.Add(name="sum_all")(hidden_states[1:])
    if layers == "scalar_mix":
        return ScalarMix(len(hidden_states), name="scalar_mix")(hidden_states)
    raise ValueError(f"layers={layers!r}: choose one of {LAYER_CHOICES}")


def build_model(encoder, labels, mode: str = "finetune", layers: str = "concat_last4",
                lstm_units: int = 768, dropout: float | None = None) -> keras.Model:
    """A token classifier on `encoder`: inputs -> {"logits": [batch, seq, num_labels]}.

    Args:
        labels: the label list (or its length).
        mode: "finetune" trains the encoder (all but its pooler, which a token head
            does not read) with a dense softmax layer on `sequence_output`; "feature"
            freezes the encoder and feeds the chosen `layers` to a 2-layer BiLSTM
            (`lstm_units` per direction) and a dense layer.
        layers: feature mode: "last", "sum_last4", "concat_last4" (the paper's best),
            "sum_all", "scalar_mix" (learned ELMo-style weights), "embeddings",
            "second_to_last".
    """
    num_labels = labels if isinstance(labels, int) else len(labels)
    if mode == "feature" and layers in ("sum_last4", "concat_last4") \
            and encoder.config.num_layers < 4:
        raise ValueError(f"layers={layers!r} needs 4 layers; the encoder has "
                         f"{encoder.config.num_layers}")
    rate = encoder.config.dropout if dropout is None else dropout
    inputs = encoder.input
    init = truncated_normal(encoder.config.initializer_range)
    if mode == "finetune":
        # A token head never reads the pooler, so it gets no gradient (as in the
        # original); frozen, it keeps its weights and Keras does not warn each run.
        encoder.pooler.trainable = False
        x = encoder(inputs)["sequence_output"]
    elif mode == "feature":
        encoder.trainable = False
        x = select_layers(encoder(inputs, training=False)["hidden_states"], layers)
        mask = _BoolMask(name="mask")(inputs["padding_mask"])
        for i in range(2):
            x = keras.layers.Bidirectional(
                keras.layers.LSTM(lstm_units, return_sequences=True), name=f"bilstm_{i + 1}")(
                x, mask=mask)
    else:
        raise ValueError(f"mode={mode!r}: use 'finetune' or 'feature'")
    x = keras.layers.Dropout(rate, name="dropout")(x)
    logits = keras.layers.Dense(num_labels, kernel_initializer=init, dtype="float32",
                                name="logits")(x)
    return keras.Model(inputs, {"logits": logits}, name=f"bert_ner_{mode}")


def ner_loss():
    """Cross-entropy over labelled positions (first pieces); -1 marks the others."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
