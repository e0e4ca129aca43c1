"""BERT's pretraining heads and losses, as Google's `run_pretraining.py` has them.

Masked LM: the encoder's states at `masked_lm_positions` go through a dense layer with
the encoder's activation, a LayerNorm, and the output layer tied to the word embeddings
plus its own bias (`cls/predictions/...`). Next sentence: a 2-way layer on the pooled
output (`cls/seq_relationship/...`, 1 = "B is a random sentence"). Losses: the masked-LM
loss is `sum(weights * nll) / (sum(weights) + 1e-5)` over the predictions, the
next-sentence loss the mean over the batch, the total their sum; metrics
`masked_lm_accuracy`, `masked_lm_loss` (weighted by `masked_lm_weights`),
`next_sentence_accuracy`, `next_sentence_loss`.

Weights load from Google folders (`bert_model.ckpt` with `cls/*`), Hugging Face
`BertForPreTraining` folders (`cls.predictions...`, `cls.seq_relationship...`) and
kbert folders (the encoder's files plus `pretraining_heads.safetensors`, Google's names).
"""

from __future__ import annotations

import logging
import os

import keras
import numpy as np
import tensorflow as tf

from kbert import convert, hub
from kbert.layers.activations import get_activation
from kbert.layers.initializers import truncated_normal
from kbert.models.bert import checkpoints
from kbert.models.bert.encoder import BertEncoder
from kbert.models.metrics import TotalOverCount, masked_lm_loss, total_loss
from kbert.models.base import Quantizable, Wrapper

logger = logging.getLogger(__name__)

HEADS_FILE = "pretraining_heads.safetensors"
# Google's names -> (Hugging Face's, transposed).
HEAD_NAMES = {
    "cls/predictions/transform/dense/kernel": ("cls.predictions.transform.dense.weight", True),
    "cls/predictions/transform/dense/bias": ("cls.predictions.transform.dense.bias", False),
    "cls/predictions/transform/LayerNorm/gamma": (
        "cls.predictions.transform.LayerNorm.weight", False),
    "cls/predictions/transform/LayerNorm/beta": (
        "cls.predictions.transform.LayerNorm.bias", False),
    "cls/predictions/output_bias": ("cls.predictions.bias", False),
    "cls/seq_relationship/output_weights": ("cls.seq_relationship.weight", False),
    "cls/seq_relationship/output_bias": ("cls.seq_relationship.bias", False),
}
TARGETS = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


@keras.saving.register_keras_serializable(package="kbert")
class BertPretrainer(Wrapper, Quantizable, keras.Model):
    """A `BertEncoder` with BERT's masked-LM and next-sentence heads (see the module
    docstring).

    Inputs: the encoder's (`token_ids`, `segment_ids`, `padding_mask`) plus
    `masked_lm_positions` int [B, P]. Outputs: `mlm_logits` float32 [B, P, vocab] and
    `nsp_logits` float32 [B, 2]. `fit` takes targets `masked_lm_ids` [B, P],
    `masked_lm_weights` [B, P] (0 on padding predictions) and `next_sentence_labels`
    [B] or [B, 1]: the features `create_data` writes. Compile with an optimizer only.
    """

    def __init__(self, encoder: BertEncoder | dict, **kwargs):
        super().__init__(**kwargs)
        if isinstance(encoder, dict):  # a BertConfig's fields
            encoder = BertEncoder(encoder, dtype=kwargs.get("dtype"))
        self.encoder = encoder
        c = encoder.config
        self.activation = get_activation(c.hidden_act)
        init = truncated_normal(c.initializer_range)
        self.transform = keras.layers.Dense(c.hidden_size, kernel_initializer=init,
                                            dtype=encoder.dtype_policy, name="transform_dense")
        self.transform_norm = keras.layers.LayerNormalization(
            epsilon=c.layer_norm_epsilon, dtype=encoder.dtype_policy,
            name="transform_layer_norm")
        self.trackers = {name: TotalOverCount(name) for name in (
            "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
            "next_sentence_loss")}

    def build(self, input_shape=None):
        c = self.encoder.config
        self.transform.build((None, c.hidden_size))
        self.transform_norm.build((None, c.hidden_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(c.vocab_size,),
                                           initializer="zeros", dtype="float32",
                                           autocast=False)
        self.nsp_weights = self.add_weight(
            name="seq_relationship_weights", shape=(2, c.hidden_size),
            initializer=truncated_normal(c.initializer_range), dtype="float32",
            autocast=False)
        self.nsp_bias = self.add_weight(name="seq_relationship_bias", shape=(2,),
                                        initializer="zeros", dtype="float32", autocast=False)
        self.built = True

    @property
    def metrics(self):
        mine = list(self.trackers.values())
        return [m for m in super().metrics if all(m is not n for n in mine)] + mine

    def call(self, inputs, training=None):
        out = self.encoder({k: inputs[k] for k in ("token_ids", "segment_ids",
                                                    "padding_mask")}, training=training)
        positions = tf.cast(inputs["masked_lm_positions"], tf.int32)
        states = tf.gather(out["sequence_output"], positions, batch_dims=1)  # (B, P, H)
        x = self.transform_norm(self.activation(self.transform(states)))
        table = self.encoder.embeddings.word_embeddings.embeddings
        mlm = tf.matmul(tf.cast(x, tf.float32), tf.cast(table, tf.float32),
                        transpose_b=True) + self.output_bias
        pooled = tf.cast(out["pooled_output"], tf.float32)
        nsp = tf.matmul(pooled, self.nsp_weights, transpose_b=True) + self.nsp_bias
        return {"mlm_logits": mlm, "nsp_logits": nsp}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        mlm_loss = masked_lm_loss(y["masked_lm_ids"], y["masked_lm_weights"],
                                  y_pred["mlm_logits"], self.trackers)
        labels = tf.reshape(tf.cast(y["next_sentence_labels"], tf.int32), [-1])
        nsp = y_pred["nsp_logits"]
        nsp_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=nsp)
        nsp_loss = tf.reduce_mean(nsp_nll)
        t, predictions = self.trackers, tf.cast(tf.size(nsp_nll), tf.float32)
        nsp_hits = tf.equal(tf.argmax(nsp, -1, output_type=tf.int32), labels)
        t["next_sentence_accuracy"].update_state(
            tf.reduce_sum(tf.cast(nsp_hits, tf.float32)), predictions)
        t["next_sentence_loss"].update_state(tf.reduce_sum(nsp_nll), predictions)
        return total_loss(self, mlm_loss + nsp_loss)

    # ------------------------------------------------------------ weights
    def head_variables(self) -> dict:
        """Google's name -> the head variable."""
        if not self.built:
            self.build()
        return {
            "cls/predictions/transform/dense/kernel": self.transform.kernel,
            "cls/predictions/transform/dense/bias": self.transform.bias,
            "cls/predictions/transform/LayerNorm/gamma": self.transform_norm.gamma,
            "cls/predictions/transform/LayerNorm/beta": self.transform_norm.beta,
            "cls/predictions/output_bias": self.output_bias,
            "cls/seq_relationship/output_weights": self.nsp_weights,
            "cls/seq_relationship/output_bias": self.nsp_bias,
        }

    @classmethod
    def from_pretrained(cls, path, dtype=None) -> "BertPretrainer":
        """A Google folder with `cls/*` variables, a Hugging Face `BertForPreTraining`
        folder, or a kbert folder written by `save_pretrained`. A missing or
        mis-shaped head variable is an error naming it. Loaded as
        `Pretrained.from_pretrained` loads (no random values for loaded weights, tensor
        by tensor)."""
        from kbert.convert import initialization

        with initialization.deferred():
            return cls._load(hub.resolve(path), dtype)

    @classmethod
    def _load(cls, folder, dtype) -> "BertPretrainer":
        fmt = checkpoints.detect_format(folder)
        if fmt == "google":
            from kbert.models.bert.config import BertConfig

            config = BertConfig.from_json_file(os.path.join(folder, "bert_config.json"))
            tensors, source = convert.read_tf_checkpoint(
                folder, lambda n: n.startswith(("bert/", "cls/"))
                and not n.endswith(("/adam_m", "/adam_v")))
            display = {}
        else:
            config, tensors, display, fmt, source = checkpoints.read_checkpoint(folder)
        if fmt == "kbert":
            heads_path = os.path.join(folder, HEADS_FILE)
            if not os.path.exists(heads_path):
                raise FileNotFoundError(f"{folder}: no {HEADS_FILE} (a kbert folder of a "
                                        "BertEncoder has no pretraining heads)")
            heads = convert.read_safetensors(heads_path)
            source_heads = heads_path
        else:
            prefix = "cls/" if fmt == "google" else "cls."
            heads = tensors.subset(lambda k: k.startswith(prefix))
            tensors = tensors.subset(lambda k: not k.startswith(prefix))
            source_heads = source
        encoder = BertEncoder(config, dtype=dtype)
        checkpoints.assign(encoder, tensors, fmt, source, display)
        model = cls(encoder)
        model.build()
        targets = model.head_variables()
        if fmt == "hf":
            rules = [convert.Rule(name, (hf,), convert.transpose if t else convert.identity)
                     for name, (hf, t) in HEAD_NAMES.items()]
            owned = lambda key: key in {hf for hf, _ in HEAD_NAMES.values()}  # noqa: E731
        else:
            rules = [convert.Rule(name, (name,)) for name in HEAD_NAMES]
            owned = lambda key: True  # noqa: E731
        convert.load_into(targets, heads, rules, source_heads, "BertPretrainer", owned=owned,
                          display=display)
        logger.info("Loaded BertPretrainer (%s format) from %s", fmt, source)
        return model

    def save_pretrained(self, path, tokenizer=None) -> None:
        """A kbert folder: the encoder's files and `pretraining_heads.safetensors`."""
        from kbert.io import atomic_file
        from kbert.models.base import refuse_quantized

        refuse_quantized(self)
        path = os.fspath(path)
        self.encoder.save_pretrained(path, tokenizer=tokenizer)
        heads = {k: np.ascontiguousarray(v.numpy()) for k, v in self.head_variables().items()}
        with atomic_file(os.path.join(path, HEADS_FILE), "wb") as f:
            f.write(_safetensors_bytes(heads))  # small: the heads without the token table

    # ------------------------------------------------------------ inputs
    @staticmethod
    def split_features(features: dict):
        """`create_data`'s parsed features -> (inputs, targets) for `fit`."""
        inputs = {"token_ids": features["input_ids"], "segment_ids": features["segment_ids"],
                  "padding_mask": features["input_mask"],
                  "masked_lm_positions": features["masked_lm_positions"]}
        return inputs, {k: features[k] for k in TARGETS}


def _safetensors_bytes(tensors: dict) -> bytes:
    from safetensors.numpy import save

    return save(tensors)
