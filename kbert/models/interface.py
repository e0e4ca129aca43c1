"""What `kbert.tasks` and `kbert.export` need from an encoder, whatever its family.

A family's encoder (BERT's `BertEncoder`, GPT's decoder, ELMo's biLM, or a user's
own) is a Keras model whose input is a dict of the tensors its tokenizer produces,
and which also subclasses `EncoderModel`. Task heads and exporters go through this
interface only: they read `features()`, the sizes below and `sentence_encoder()`,
and never change the encoder they are given (freezing a part, such as BERT's pooler,
is the task command's explicit call to `set_pooler_trainable`).
"""

from __future__ import annotations

from typing import ClassVar


class EncoderModel:
    """The model interface of kbert's families.

    Subclasses set `family` (the registry name) and implement `hidden_size`,
    `num_layers`, `dropout_rate`, `initializer_range` and, where positions are
    bounded, `max_sequence_length`. `features` must return, for the encoder's input
    dict:
        "sequence_output": float Tensor [B, T, H], the top layer;
        "hidden_states": list of num_layers + 1 Tensors [B, T, H'], lowest first
            (embeddings), for feature-based use;
        "padding_mask": int Tensor [B, T], 1 on real tokens;
        "pooled_output": float Tensor [B, H], the family's sentence vector (BERT's
            pooler on [CLS]; a decoder's state at the last real token; ELMo's mean).
    """

    family: ClassVar[str] = ""

    @property
    def hidden_size(self) -> int:
        raise NotImplementedError

    @property
    def num_layers(self) -> int:
        raise NotImplementedError

    @property
    def dropout_rate(self) -> float:
        """The dropout a task head uses before its output layer."""
        return 0.1

    @property
    def initializer_range(self) -> float:
        """The stddev a task head's output layer is initialized with."""
        return 0.02

    @property
    def max_sequence_length(self) -> int | None:
        """The longest input the encoder takes (its position table), or None."""
        return None

    def features(self, inputs, training=None) -> dict:
        """The outputs listed above, for `inputs` (the encoder's input dict)."""
        out = dict(self(inputs, training=training))
        out.setdefault("padding_mask", inputs["padding_mask"])
        return out

    def keras_inputs(self) -> dict:
        """Symbolic `keras.Input`s of the encoder's input dict, for a functional head
        (default: the functional encoder's own)."""
        return self.input

    def sentence_encoder(self) -> "EncoderModel":
        """The encoder a sentence-level head should call: the same weights, possibly
        computing less (BERT's last layer on [CLS] only). Default: self."""
        return self

    def set_pooler_trainable(self, trainable: bool) -> None:
        """Freezes or unfreezes a pooler that token-level heads never read (BERT's).
        Families without one do nothing."""


class TransformerSizes(EncoderModel):
    """The interface's sizes read from a Transformer config with BERT's and GPT's
    field names (`hidden_size`, `num_layers`, `dropout`, `initializer_range`,
    `max_position_embeddings`) in `self.config`."""

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def num_layers(self) -> int:
        return self.config.num_layers

    @property
    def dropout_rate(self) -> float:
        return self.config.dropout

    @property
    def initializer_range(self) -> float:
        return self.config.initializer_range

    @property
    def max_sequence_length(self) -> int:
        return self.config.max_position_embeddings


def dtype_from_config(config: dict):
    """Pops the serialized dtype policy of a model's `get_config()` dict (a Keras
    config dict or a name) and returns it deserialized."""
    dtype = config.pop("dtype", None)
    if isinstance(dtype, dict):
        import keras

        dtype = keras.saving.deserialize_keras_object(dtype)
    return dtype


def find_encoder(model):
    """The `EncoderModel` of `model`: the model itself or one of its layers; None if
    it has none."""
    if isinstance(model, EncoderModel):
        return model
    return next((layer for layer in getattr(model, "layers", [])
                 if isinstance(layer, EncoderModel)), None)
