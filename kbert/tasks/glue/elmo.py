"""GLUE with ELMo (`--model elmo`), feature-based as in the ELMo paper: the biLM is
frozen; a ScalarMix of its layers feeds a BiLSTM, whose states are max- and mean-pooled
over the real words into a sentence vector u, and a classifier reads u. For pairs the
same mix, BiLSTM and pooling encode both sentences (u, v) and the classifier reads
[u, v, |u - v|, u * v] (InferSent's pair features; the ELMo paper's SNLI model was
ESIM, whose cross-attention this simpler head leaves out).

Examples are kept as text until the `tf.data` pipeline, which makes each one's
character ids (`char_inputs`), so a large task is never held as a
[examples, words, characters] array; the word masks are computed up front (as
`str.split` splits, the tokenizer's convention), cut at `max_seq_length` words with a
warning.
"""

from __future__ import annotations

import logging

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from kbert.layers.initializers import truncated_normal
from kbert.layers.scalar_mix import ScalarMix
from kbert.tasks.glue.model import ClassifierHead
from kbert.tasks.ner.model import _BoolMask

logger = logging.getLogger(__name__)

DEFAULT_LSTM_UNITS = 256


def encode_texts(task, examples, seq_length: int) -> dict:
    """Examples -> {"text", "padding_mask" [N, seq_length] (int8)} and, for pairs, the
    same with `_b`; logs how many were cut to `seq_length` words."""
    out, cut = {}, 0
    sides = [("", "text_a")] + ([("_b", "text_b")] if task.is_pair else [])
    longer = np.zeros(len(examples), bool)
    for suffix, field in sides:
        texts = [getattr(e, field) or "" for e in examples]
        lengths = np.array([len(t.split()) for t in texts], np.int64)
        longer |= lengths > seq_length
        mask = (np.arange(seq_length)[None, :] < np.minimum(lengths, seq_length)[:, None])
        out["text" + suffix] = np.array(texts, dtype=object)
        out["padding_mask" + suffix] = mask.astype(np.int8)
    cut = int(longer.sum())
    if cut:
        logger.warning("%d of %d examples have a sentence longer than max_seq_length=%d "
                       "words; it was cut", cut, len(examples), seq_length)
    return out


def char_inputs(tokenizer, seq_length: int):
    """A `tf.data` map: one encoded example (features, or (features, label)) -> the
    model's inputs: `char_ids` [seq_length, C] and an int32 `padding_mask` per side."""
    width = tokenizer.max_characters_per_token

    def side(text):
        ids = tokenizer(tf.reshape(text, [1]))["char_ids"][0, :seq_length]  # (W, C)
        return tf.pad(ids, [[0, seq_length - tf.shape(ids)[0]], [0, 0]])

    def convert(features, *rest):
        x = {}
        for suffix in ("", "_b"):
            if "text" + suffix in features:
                x["char_ids" + suffix] = tf.ensure_shape(side(features["text" + suffix]),
                                                         [seq_length, width])
                x["padding_mask" + suffix] = tf.cast(features["padding_mask" + suffix],
                                                     tf.int32)
        return (x, *rest) if rest else x

    return convert


@keras.saving.register_keras_serializable(package="kbert")
class MaskedPooling(keras.layers.Layer):
    """[B, T, H] states and a [B, T] mask -> [B, 2H]: the max and the mean over real
    positions (zeros for a row without any). It consumes the Keras mask of `x`."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def compute_mask(self, inputs, mask=None):
        return None

    def call(self, x, padding_mask, mask=None):
        mask = ops.expand_dims(ops.cast(padding_mask, x.dtype), -1)
        count = ops.sum(mask, axis=1)
        mean = ops.sum(x * mask, axis=1) / ops.maximum(count, 1.0)
        low = ops.cast(-1e9 if x.dtype == "float32" else -6e4, x.dtype)
        top = ops.max(ops.where(mask > 0, x, low), axis=1)
        top = ops.where(count > 0, top, ops.zeros_like(top))
        return ops.concatenate([top, mean], axis=-1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], 2 * input_shape[-1])


@keras.saving.register_keras_serializable(package="kbert")
class PairFeatures(keras.layers.Layer):
    """u, v -> [u, v, |u - v|, u * v]."""

    def call(self, u, v):
        return ops.concatenate([u, v, ops.abs(u - v), u * v], axis=-1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], 4 * input_shape[-1])


def build_elmo_classifier(elmo, num_labels: int, regression: bool = False,
                          pair: bool = False, lstm_units: int = DEFAULT_LSTM_UNITS,
                          dropout: float | None = None) -> keras.Model:
    """ELMo inputs (`char_ids`, `padding_mask`; with `pair`, also `_b`) ->
    {"logits"} or {"score"} (see the module docstring). `elmo` is used frozen: the
    caller sets `elmo.trainable = False` (the command line does). `dropout` (default
    the encoder's, 0.1) is applied to the mix and before the output layer."""
    dropout = elmo.dropout_rate if dropout is None else dropout
    inputs = elmo.keras_inputs()
    names = [("char_ids", "padding_mask")]
    if pair:
        second = elmo.keras_inputs()
        inputs["char_ids_b"] = keras.Input(second["char_ids"].shape[1:], dtype="int32",
                                           name="char_ids_b")
        inputs["padding_mask_b"] = keras.Input((None,), dtype="int32", name="padding_mask_b")
        names.append(("char_ids_b", "padding_mask_b"))
    mix = ScalarMix(elmo.num_layers + 1, name="scalar_mix")
    bilstm = keras.layers.Bidirectional(keras.layers.LSTM(lstm_units, return_sequences=True),
                                        name="bilstm")
    to_bool, pool = _BoolMask(name="mask"), MaskedPooling(name="pooling")
    drop = keras.layers.Dropout(dropout, name="mix_dropout")
    vectors = []
    for chars, mask in names:
        hidden = elmo.features({"char_ids": inputs[chars], "padding_mask": inputs[mask]},
                               training=False)["hidden_states"]
        x = drop(mix(hidden, padding_mask=inputs[mask]))
        x = bilstm(x, mask=to_bool(inputs[mask]))
        vectors.append(pool(x, inputs[mask]))
    sentence = PairFeatures(name="pair_features")(*vectors) if pair else vectors[0]
    hidden = keras.layers.Dense(lstm_units, activation="relu",
                                kernel_initializer=truncated_normal(0.02),
                                name="hidden")(sentence)
    out = ClassifierHead(1 if regression else num_labels, dropout, 0.02,
                         name="classifier")(hidden)
    if regression:
        return keras.Model(inputs, {"score": keras.layers.Reshape((), name="score")(out)},
                           name="elmo_regressor")
    return keras.Model(inputs, {"logits": keras.layers.Identity(name="logits")(out)},
                       name="elmo_classifier")
