"""ELMo's task hooks (the registry reaches them by name).

GLUE with ELMo (`--model elmo`), feature-based as in the ELMo paper: the biLM is
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

import dataclasses
import logging

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from kbert.layers.heads import BoolMask, ClassifierHead, IGNORE_LABEL, classifier_model
from kbert.layers.initializers import truncated_normal
from kbert.layers.scalar_mix import ScalarMix
from kbert.models.elmo.bilm import ELMo
from kbert.models.elmo.config import ELMoConfig
from kbert.models.registry import Family
from kbert.tokenizers.elmo import ELMoCharTokenizer

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
    to_bool, pool = BoolMask(name="mask"), MaskedPooling(name="pooling")
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
    return classifier_model(inputs, out, regression, "elmo")


# ------------------------------------------------------------------ NER
# NER with ELMo (`--model elmo`): words in, one label a word.
# 
# ELMo reads whole words (its character CNN makes each word's vector), so there are no
# pieces to align: a sentence is its words, cut into consecutive windows of
# `max_seq_length` words when longer (logged), each word labelled and predicted in its
# window. Character ids are made in the `tf.data` pipeline, one window at a time, so a
# corpus is never held as a [sentences, words, characters] array.


@dataclasses.dataclass
class WordWindows:
    """Windows of words, their `labels` [num_windows, max_words] (-1 on padding) and
    `padding_mask`, and where each sentence's words went (`word_window`,
    `word_position`, as `NerFeatures` has them)."""

    words: list  # per window: list of str
    labels: np.ndarray
    padding_mask: np.ndarray
    word_window: list
    word_position: list

    def dataset(self, tokenizer) -> tf.data.Dataset:
        """Unbatched ({"char_ids" [max_words, C], "padding_mask"}, {"logits": labels})."""
        width = self.labels.shape[1]
        words = tf.ragged.constant(self.words, dtype=tf.string, ragged_rank=1) \
            if any(self.words) else tf.RaggedTensor.from_row_lengths(
                tf.constant([], tf.string), tf.zeros([len(self.words)], tf.int64))

        def encode(row, labels):
            x = tokenizer(tf.RaggedTensor.from_row_lengths(row, tf.shape(row, tf.int64)[:1]))
            n = tf.shape(row)[0]
            char_ids = tf.pad(x["char_ids"][0], [[0, width - n], [0, 0]])
            return ({"char_ids": char_ids, "padding_mask": tf.sequence_mask(n, width, tf.int32)},
                    {"logits": labels})

        ds = tf.data.Dataset.from_tensor_slices((words, self.labels))
        return ds.map(encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def word_windows(sentences: list[list[str]], max_words: int, tags=None, labels=None
                 ) -> WordWindows:
    """Sentences of words (and their tags, with the label list) -> windows."""
    if max_words < 1:
        raise ValueError(f"max_seq_length={max_words}: at least one word a window")
    label_id = {label: i for i, label in enumerate(labels or [])}
    windows, window_labels, word_window, word_position = [], [], [], []
    for n, words in enumerate(sentences):
        ids = []
        if tags is not None:
            for j, tag in enumerate(tags[n]):
                if tag not in label_id:
                    raise ValueError(f"sentence {n}, word {j} ({words[j]!r}): tag {tag!r} is "
                                     f"not in the label list {labels}")
                ids.append(label_id[tag])
        base = len(windows)
        for start in range(0, max(1, len(words)), max_words):
            windows.append(list(words[start:start + max_words]))
            window_labels.append(ids[start:start + max_words])
        positions = np.arange(len(words), dtype=np.int64)
        word_window.append(base + positions // max_words)
        word_position.append(positions % max_words)
    count = len(windows)
    label_arr = np.full((count, max_words), IGNORE_LABEL, np.int32)
    mask = np.zeros((count, max_words), np.int32)
    for i, (words, ids) in enumerate(zip(windows, window_labels)):
        mask[i, :len(words)] = 1
        label_arr[i, :len(ids)] = ids
    return WordWindows(windows, label_arr, mask, word_window, word_position)


# ------------------------------------------------------------------ registry hooks
def glue_model(encoder, task, tokenizer, options: dict) -> keras.Model:
    """Frozen biLM, its mixed layers read by a BiLSTM of `options["lstm_units"]` per
    direction (default `DEFAULT_LSTM_UNITS`)."""
    encoder.trainable = False
    return build_elmo_classifier(encoder, task.num_labels, regression=task.is_regression,
                                 pair=task.is_pair,
                                 lstm_units=options.get("lstm_units") or DEFAULT_LSTM_UNITS)


def glue_encode(task, tokenizer, examples, seq_length: int) -> dict:
    return encode_texts(task, examples, seq_length)


def glue_examples(tokenizer, seq_length: int):
    return char_inputs(tokenizer, seq_length)


def ner_features(tokenizer, sentences, seq_length, tags=None, labels=None) -> WordWindows:
    return word_windows(sentences, seq_length, tags, labels)


from kbert.models.elmo.pretraining import pretrain  # noqa: E402,F401 (the pretrain hook)


def _recognizes(folder: str) -> bool:
    """bilm-tf / AllenNLP folders: `options.json` with `lstm` and `char_cnn`."""
    import os

    from kbert.io import read_json

    path = os.path.join(folder, "options.json")
    if not os.path.exists(path):
        return False
    d = read_json(path)
    return isinstance(d, dict) and ELMoConfig.is_reference_dict(d)


# The family, registered by the registry when it loads the package (`family_packages`).
FAMILY = Family("elmo", ELMoConfig, ELMo, ELMoCharTokenizer, recognizes=_recognizes,
                feature_based=True,
                description="elmo trains a head on a frozen biLM (feature-based, as the ELMo "
                            "paper) and needs --init_from an ELMo folder",
                folder_hint="a bilm-tf / AllenNLP ELMo folder, or one that "
                            "ELMoLanguageModel.save_pretrained wrote")


# The hooks this family defines (`kbert.models.registry.HOOK_NAMES`).
HOOKS = ("glue_model", "glue_encode", "glue_examples", "ner_features", "pretrain")
