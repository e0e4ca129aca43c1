"""NER heads: fine-tuning (dense softmax over the sequence output) and feature-based
(frozen encoder, chosen layers, 2-layer BiLSTM), as in the BERT paper's section 5.3."""

from __future__ import annotations

import keras

from kbert.layers.heads import BoolMask, StopGradient
from kbert.layers.initializers import truncated_normal
from kbert.layers.scalar_mix import ScalarMix

from kbert.tasks.flags import LAYER_CHOICES  # noqa: E402 (the flag choices, TF-free)


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


def prepare_encoder(encoder, mode: str) -> None:
    """What the NER command does to the encoder before `build_model`: "finetune"
    freezes the pooler, which a token head never reads (no missing gradients, weights
    kept); "feature" freezes the whole encoder (its features are fixed inputs)."""
    if mode == "feature":
        encoder.trainable = False
    else:
        encoder.set_pooler_trainable(False)


def build_model(encoder, labels, mode: str = "finetune", layers: str = "concat_last4",
                lstm_units: int = 768, dropout: float | None = None) -> keras.Model:
    """A token classifier on `encoder` (the model interface): inputs ->
    {"logits": [batch, seq, num_labels]}. `encoder` is not changed: freezing is
    `prepare_encoder`'s (the command line's) explicit step.

    Args:
        labels: the label list (or its length).
        mode: "finetune": a dense softmax layer on `sequence_output`, trained with the
            encoder; "feature": the chosen `layers` of the encoder's `hidden_states`
            (read with training=False, gradients stopped) feed a 2-layer BiLSTM
            (`lstm_units` per direction) and a dense layer.
        layers: feature mode: "last", "sum_last4", "concat_last4" (the paper's best),
            "sum_all", "scalar_mix" (learned ELMo-style weights), "embeddings",
            "second_to_last".
    """
    num_labels = labels if isinstance(labels, int) else len(labels)
    if mode == "feature" and layers in ("sum_last4", "concat_last4") \
            and encoder.num_layers < 4:
        raise ValueError(f"layers={layers!r} needs 4 layers; the encoder has "
                         f"{encoder.num_layers}")
    rate = encoder.dropout_rate if dropout is None else dropout
    inputs = encoder.keras_inputs()
    init = truncated_normal(encoder.initializer_range)
    if mode == "finetune":
        x = encoder.features(inputs)["sequence_output"]
    elif mode == "feature":
        hidden = encoder.features(inputs, training=False)["hidden_states"]
        x = select_layers([StopGradient(name=f"features_{i}")(h) for i, h in enumerate(hidden)],
                          layers)
        mask = BoolMask(name="mask")(inputs["padding_mask"])
        for i in range(2):
            x = keras.layers.Bidirectional(
                keras.layers.LSTM(lstm_units, return_sequences=True), name=f"bilstm_{i + 1}")(
                x, mask=mask)
    else:
        raise ValueError(f"mode={mode!r}: use 'finetune' or 'feature'")
    x = keras.layers.Dropout(rate, name="dropout")(x)
    logits = keras.layers.Dense(num_labels, kernel_initializer=init, dtype="float32",
                                name="logits")(x)
    return keras.Model(inputs, {"logits": logits}, name=f"{encoder.family}_ner_{mode}")


def ner_loss():
    """Cross-entropy over labelled positions (first pieces); -1 marks the others."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
