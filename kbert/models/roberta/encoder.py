"""RobertaEncoder and RobertaMaskedLM: RoBERTa (Liu et al., 2019) as Keras 3 models.

The encoder is BERT's (post-LN blocks, erf GELU) with RoBERTa's embeddings: one token
type, and positions counted from `pad_token_id + 1` over the real tokens (fairseq's
`make_positions`; padding reads row `pad_token_id`). Variables carry Hugging Face's
names (`kbert.models.roberta.checkpoints`)."""

from __future__ import annotations

import os

import keras
from keras import ops

from kbert import hub
from kbert.layers.activations import get_activation
from kbert.layers.embeddings import PositionEmbedding, TokenEmbedding
from kbert.layers.initializers import initializer_from, truncated_normal
from kbert.layers.masks import padding_bias
from kbert.layers.transformer import TransformerBlock
from kbert.models.base import Backbone, Pretrained, Quantizable, Wrapper
from kbert.models.interface import TransformerSizes
from kbert.models.metrics import TotalOverCount, masked_lm_loss, total_loss
from kbert.models.roberta.config import RobertaConfig


@keras.saving.register_keras_serializable(package="kbert")
class RobertaEmbeddings(keras.layers.Layer):
    """Token + position (+ the one token type) embeddings, LayerNorm, dropout.

    Call args: token_ids, padding_mask: int [B, T] (right padding, as the tokenizer
    packs). Position of a real token t (0-based): pad_token_id + 1 + t."""

    def __init__(self, config: RobertaConfig | dict, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = RobertaConfig.from_dict(config)
        self.config = config
        init = initializer_from(None, config.initializer_range)
        policy = self.dtype_policy
        self.word_embeddings = TokenEmbedding(config.vocab_size, config.hidden_size,
                                              embeddings_initializer=init, dtype=policy,
                                              name="word_embeddings")
        self.position_embeddings = PositionEmbedding(
            config.max_position_embeddings, config.hidden_size,
            keras.initializers.serialize(truncated_normal(config.initializer_range)),
            dtype=policy, name="position_embeddings")
        self.token_type_embeddings = keras.layers.Embedding(
            config.type_vocab_size, config.hidden_size,
            embeddings_initializer=truncated_normal(config.initializer_range), dtype=policy,
            name="token_type_embeddings")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=config.layer_norm_epsilon, dtype=policy, name="LayerNorm")
        self.dropout_layer = keras.layers.Dropout(config.dropout, dtype=policy)

    def build(self, token_ids_shape, padding_mask_shape=None):
        self.word_embeddings.build(token_ids_shape)
        self.position_embeddings.build()
        self.token_type_embeddings.build(token_ids_shape)
        self.layer_norm.build(tuple(token_ids_shape) + (self.config.hidden_size,))
        self.built = True

    def call(self, token_ids, padding_mask, training=None):
        limit = self.config.max_sequence_length
        if token_ids.shape[1] is not None and token_ids.shape[1] > limit:
            raise ValueError(f"{self.name}: sequence length {token_ids.shape[1]} exceeds the "
                             f"{limit} positions of the table; pack to seq_length <= {limit}")
        mask = ops.cast(padding_mask, "int32")
        positions = ops.cumsum(mask, axis=1) * mask + self.config.pad_token_id
        x = (self.word_embeddings(token_ids)
             + self.position_embeddings(token_ids, positions=positions)
             + self.token_type_embeddings(ops.zeros_like(token_ids)))
        return self.dropout_layer(self.layer_norm(x), training=training)

    def compute_output_shape(self, token_ids_shape, padding_mask_shape=None):
        return tuple(token_ids_shape) + (self.config.hidden_size,)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}


@keras.saving.register_keras_serializable(package="kbert")
class RobertaEncoder(Backbone, Quantizable, keras.Model, TransformerSizes, Pretrained):
    """RoBERTa encoder. Inputs: dict of int [B, T] `token_ids`, `padding_mask`.
    Outputs: `sequence_output` [B, T, H], `pooled_output` [B, H] (`RobertaModel`'s
    pooler on `<s>` where the config has one, else the `<s>` state) and `hidden_states`
    (num_layers + 1 Tensors, the embeddings first).

    Example:
    >>> import numpy as np
    >>> encoder = RobertaEncoder(RobertaConfig.preset("tiny"))
    >>> out = encoder({"token_ids": np.array([[0, 5, 2]]), "padding_mask": np.ones((1, 3))})
    >>> tuple(out["sequence_output"].shape), len(out["hidden_states"])
    ((1, 3, 32), 3)
    """

    family = "roberta"
    # from_pretrained: a Hugging Face `RobertaModel` / `RobertaForMaskedLM` folder (a
    # folder without pooler weights, masked-LM, gives an encoder without a pooler) or a
    # kbert folder; save_pretrained: a kbert folder with Hugging Face's tensor names.

    def __init__(self, config: RobertaConfig | dict, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = RobertaConfig.from_dict(config)
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        embeddings = RobertaEmbeddings(config, dtype=dtype, name="embeddings")
        init = keras.initializers.serialize(truncated_normal(config.initializer_range))
        blocks = [TransformerBlock(
            config.hidden_size, config.num_heads, config.intermediate_size,
            hidden_act=config.hidden_act, dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            layer_norm_epsilon=config.layer_norm_epsilon, norm_first=False,
            kernel_initializer=init, dtype=dtype, name=f"transformer_layer_{i}")
            for i in range(config.num_layers)]
        pooler = keras.layers.Dense(
            config.hidden_size, activation="tanh",
            kernel_initializer=truncated_normal(config.initializer_range), dtype=dtype,
            name="pooler") if config.pooler else None
        x = embeddings(token_ids, padding_mask)
        bias = padding_bias(padding_mask)
        hidden_states = [x]
        for block in blocks:
            x = block(x, attention_bias=bias)
            hidden_states.append(x)
        first = x[:, 0, :]
        pooled = pooler(first) if pooler is not None else first
        super().__init__(inputs={"token_ids": token_ids, "padding_mask": padding_mask},
                         outputs={"sequence_output": x, "pooled_output": pooled,
                                  "hidden_states": hidden_states}, **kwargs)
        self.config = config
        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.pooler = pooler

    @property
    def max_sequence_length(self) -> int:
        return self.config.max_sequence_length

    def set_pooler_trainable(self, trainable: bool) -> None:
        if self.pooler is not None:
            self.pooler.trainable = bool(trainable)



@keras.saving.register_keras_serializable(package="kbert")
class RobertaMaskedLM(Wrapper, Quantizable, keras.Model):
    """A `RobertaEncoder` with `RobertaLMHead` (dense, GELU, LayerNorm, the tied token
    table, a bias). Inputs: the encoder's; output `logits` float32 [B, T, vocab]. With
    `masked_lm_positions` int [B, P] in the inputs (the fill_mask export's and
    `BertPretrainer`'s form), the output is `mlm_logits` [B, P, vocab] at those
    positions only.

    Training (RoBERTa's objective: the masked LM alone, no next sentence): `fit` on
    inputs with `masked_lm_positions` and targets `masked_lm_ids`, `masked_lm_weights`
    [B, P] (0 on padding predictions), as `DynamicMasking` makes them; the loss is the
    weighted mean cross-entropy over the predictions. Compile with an optimizer only.
    """

    def __init__(self, encoder: RobertaEncoder | dict, **kwargs):
        super().__init__(**kwargs)
        if isinstance(encoder, dict):
            encoder = RobertaEncoder(encoder, dtype=kwargs.get("dtype"))
        self.encoder = encoder
        c = encoder.config
        self.activation = get_activation(c.hidden_act)
        self.dense = keras.layers.Dense(c.hidden_size,
                                        kernel_initializer=truncated_normal(c.initializer_range),
                                        dtype=encoder.dtype_policy, name="lm_dense")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=c.layer_norm_epsilon, dtype=encoder.dtype_policy, name="lm_layer_norm")
        self.trackers = {name: TotalOverCount(name)
                         for name in ("masked_lm_accuracy", "masked_lm_loss")}

    def build(self, input_shape=None):
        c = self.encoder.config
        self.dense.build((None, c.hidden_size))
        self.layer_norm.build((None, c.hidden_size))
        self.bias = self.add_weight(name="lm_bias", shape=(c.vocab_size,),
                                    initializer="zeros", dtype="float32", autocast=False)
        self.built = True

    def call(self, inputs, training=None):
        out = self.encoder({k: inputs[k] for k in ("token_ids", "padding_mask")},
                           training=training)
        states = out["sequence_output"]
        positions = inputs.get("masked_lm_positions") if isinstance(inputs, dict) else None
        if positions is not None:
            states = ops.take_along_axis(
                states, ops.expand_dims(ops.cast(positions, "int32"), -1), axis=1)
        x = self.layer_norm(self.activation(self.dense(states)))
        table = self.encoder.embeddings.word_embeddings.embeddings
        logits = ops.matmul(ops.cast(x, "float32"), ops.transpose(ops.cast(table, "float32")))
        return {"mlm_logits" if positions is not None else "logits": logits + self.bias}

    @property
    def metrics(self):
        mine = list(self.trackers.values())
        return [m for m in super().metrics if all(m is not n for n in mine)] + mine

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = masked_lm_loss(y["masked_lm_ids"], y["masked_lm_weights"], y_pred["mlm_logits"],
                              self.trackers)
        return total_loss(self, loss)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype=None) -> "RobertaMaskedLM":
        """A Hugging Face `RobertaForMaskedLM` folder (its `lm_head.*`), or a kbert one."""
        from kbert.convert import initialization
        from kbert.models.roberta import checkpoints

        with initialization.deferred():  # as Pretrained.from_pretrained
            return checkpoints.load_masked_lm(cls, RobertaEncoder, hub.resolve(path),
                                              dtype=dtype)

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None,
                        format: str = "kbert") -> None:  # noqa: A002
        """A kbert folder, or (`format="huggingface"`) a `RobertaForMaskedLM` one."""
        from kbert.models.base import check_save_format, refuse_quantized
        from kbert.models.roberta import checkpoints

        check_save_format(self.encoder, format)
        refuse_quantized(self)
        (checkpoints.save_hf if format == "huggingface" else checkpoints.save)(
            self, path, tokenizer=tokenizer)
