"""A small model family that is not BERT, registered the way a real family is: a
config, an encoder with the model interface, a tokenizer without assets.

- `ByteTokenizer`: one id per UTF-8 character (code point + 1, capped at 256),
  packed with `pack_decoder` (no special tokens, no segments), no files.
- `MeanEncoder`: token embeddings, `num_layers` dense tanh layers, the masked mean of
  the top layer as the sentence vector.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import ClassVar

import keras
import tensorflow as tf
from keras import ops

from kbert.io import atomic_directory, read_json
from kbert.models.config import ModelConfig
from kbert.models.interface import EncoderModel
from kbert.models.registry import Family
from kbert.tokenizers.base import Tokenizer
from kbert.tokenizers.packing import pack_decoder

NAME = "meanbag"


@dataclasses.dataclass
class MeanConfig(ModelConfig):
    family: ClassVar[str] = NAME
    PRESETS: ClassVar[dict] = {"tiny": {}}
    vocab_size: int = 257
    hidden_size: int = 24
    num_layers: int = 2


class ByteTokenizer(Tokenizer):
    def __init__(self, seq_length: int = 64):
        super().__init__(name="byte_tokenizer")
        self.seq_length = int(seq_length)

    @property
    def vocab_size(self) -> int:
        return 257

    def tokenize(self, texts):
        cps = tf.strings.unicode_decode(self.as_batch(texts), "UTF-8", errors="replace")
        return tf.cast(tf.minimum(cps, 255) + 1, tf.int64)

    def detokenize(self, ids):
        ids = ids if isinstance(ids, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(ids)
        ids = tf.ragged.boolean_mask(ids, ids > 0)
        return tf.strings.unicode_encode(tf.cast(ids - 1, tf.int32), "UTF-8")

    def __call__(self, texts, texts_b=None, seq_length=None):
        if texts_b is not None:
            raise ValueError("ByteTokenizer packs single texts only")
        return pack_decoder(self.tokenize(texts), int(seq_length or self.seq_length))

    def config(self):
        return {"tokenizer_class": "ByteTokenizer", "seq_length": self.seq_length}

    @classmethod
    def from_pretrained(cls, path, seq_length=None, **_):
        d = read_json(os.path.join(path, "tokenizer_config.json"))
        return cls(seq_length or d["seq_length"])


@keras.saving.register_keras_serializable(package="kbert_test")
class MaskedMean(keras.layers.Layer):
    def call(self, x, padding_mask):
        m = ops.cast(ops.expand_dims(padding_mask, -1), x.dtype)
        return ops.sum(x * m, axis=1) / ops.maximum(ops.sum(m, axis=1), 1.0)

    def compute_output_shape(self, x_shape, padding_mask_shape):
        return (x_shape[0], x_shape[2])


@keras.saving.register_keras_serializable(package="kbert_test")
class MeanEncoder(keras.Model, EncoderModel):
    family = NAME

    def __init__(self, config, **kwargs):
        if isinstance(config, dict):
            config = MeanConfig.from_dict(config)
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
        x = keras.layers.Embedding(config.vocab_size, config.hidden_size,
                                   name="embeddings")(token_ids)
        hidden = [x]
        for i in range(config.num_layers):
            x = keras.layers.Dense(config.hidden_size, activation="tanh", name=f"layer_{i}")(x)
            hidden.append(x)
        pooled = MaskedMean(name="mean")(x, padding_mask)
        super().__init__({"token_ids": token_ids, "padding_mask": padding_mask},
                         {"sequence_output": x, "pooled_output": pooled,
                          "hidden_states": hidden}, **kwargs)
        self.config = config

    @property
    def hidden_size(self):
        return self.config.hidden_size

    @property
    def num_layers(self):
        return self.config.num_layers

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def save_pretrained(self, path, tokenizer):
        with atomic_directory(path) as tmp:
            self.config.to_json_file(os.path.join(tmp, "config.json"))
            self.save_weights(os.path.join(tmp, "model.weights.h5"))
            tokenizer.save_pretrained(tmp)

    @classmethod
    def from_pretrained(cls, path, **_):
        encoder = cls(MeanConfig.from_json_file(os.path.join(path, "config.json")))
        encoder.load_weights(os.path.join(path, "model.weights.h5"))
        return encoder


FAMILY = Family(NAME, MeanConfig, MeanEncoder, ByteTokenizer)


def write_sst2_like(root: str, n_train: int = 600, n_dev: int = 120, seed: int = 0) -> str:
    """A single-sentence task in SST-2's files: label 1 iff the review says "good"."""
    import random

    rng = random.Random(seed)
    words = ["the", "film", "was", "plot", "acting", "very", "quite", "story", "ending"]

    def sentence():
        label = rng.randint(0, 1)
        w = [rng.choice(words) for _ in range(rng.randint(3, 8))]
        w.insert(rng.randint(0, len(w)), "good" if label else "bad")
        return " ".join(w), label

    folder = os.path.join(root, "SST-2")
    os.makedirs(folder, exist_ok=True)
    for name, n in (("train.tsv", n_train), ("dev.tsv", n_dev)):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            for _ in range(n):
                f.write("%s\t%d\n" % sentence())
    with open(os.path.join(folder, "test.tsv"), "w", encoding="utf-8") as f:
        f.write("index\tsentence\n")
        for i in range(10):
            f.write(f"{i}\t{sentence()[0]}\n")
    return folder


def outputs_json(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "eval_results.json"), encoding="utf-8") as f:
        return json.load(f)
