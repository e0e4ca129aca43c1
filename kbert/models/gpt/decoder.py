"""GPTDecoder and GPTLanguageModel: GPT-1 and GPT-2 as Keras 3 models."""

from __future__ import annotations

import math
import os

import keras
from keras import ops

from kbert import hub
from kbert.layers.embeddings import PositionEmbedding, TokenEmbedding
from kbert.layers.heads import last_token_state
from kbert.layers.initializers import normal
from kbert.layers.masks import key_mask, positions_from_mask
from kbert.layers.transformer import TransformerBlock
from kbert.models.base import Backbone, Pretrained, Quantizable
from kbert.models.generative import GenerativeLM
from kbert.models.gpt.config import GPTConfig
from kbert.models.interface import TransformerSizes


@keras.saving.register_keras_serializable(package="kbert")
class GPTDecoder(Backbone, Quantizable, keras.Model, TransformerSizes, Pretrained):
    """The GPT Transformer decoder: token + learned position embeddings, L blocks of
    masked (causal) self-attention, and, for GPT-2, a final LayerNorm.

    GPT-1 (Radford et al., 2018) uses post-LN blocks, GPT-2 (Radford et al., 2019)
    pre-LN blocks and a LayerNorm after the last one (`GPTConfig.norm_first`). Both use
    the tanh GELU. Initialization is GPT-2's: normal(0.02), with the two residual
    projections of each block scaled by 1 / sqrt(2 * num_layers).

    Inputs are a dict of int Tensors [batch_size, seq_length]: `token_ids` and
    `padding_mask` (1 on real tokens). Rows may be padded on the right or on the left:
    positions count from each row's first real token. Outputs: `sequence_output`
    [batch_size, seq_length, hidden_size] and `hidden_states`, num_layers + 1 Tensors,
    the embeddings first; as in Hugging Face's GPT-2, the last is `sequence_output`
    (after the final LayerNorm).

    Example:
    >>> import numpy as np
    >>> decoder = GPTDecoder(GPTConfig.preset("tiny"))
    >>> out = decoder({"token_ids": np.array([[5, 6, 7]]),
    ...                "padding_mask": np.ones((1, 3), "int32")})
    >>> tuple(out["sequence_output"].shape), len(out["hidden_states"])
    ((1, 3, 32), 3)
    """

    def __init__(self, config: GPTConfig | dict, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = GPTConfig.from_dict(config)
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        layers = _new_layers(config, dtype)
        token_embedding, position_embedding, dropout, blocks, final_norm = layers

        x = token_embedding(token_ids) + position_embedding(
            token_ids, positions=positions_from_mask(padding_mask))
        x = dropout(x)
        mask = key_mask(padding_mask)  # (B, 1, T): queries see real keys, causally
        hidden_states = [x]
        for block in blocks:
            x = block(x, attention_mask=mask, causal=True)
            hidden_states.append(x)
        if final_norm is not None:
            x = final_norm(x)
            hidden_states[-1] = x
        super().__init__(inputs={"token_ids": token_ids, "padding_mask": padding_mask},
                         outputs={"sequence_output": x, "hidden_states": hidden_states},
                         **kwargs)
        self.config = config
        self.token_embedding = token_embedding
        self.position_embedding = position_embedding
        self.embedding_dropout = dropout
        self.transformer_layers = blocks
        self.final_layer_norm = final_norm

    # ------------------------------------------------------------ model interface
    family = "gpt"
    # from_pretrained: a kbert GPT folder, a Hugging Face `gpt2` or `openai-gpt` folder,
    # or an OpenAI GPT-2 TF checkpoint folder (`hparams.json`, `model.ckpt.*`);
    # save_pretrained: a kbert folder in Hugging Face's GPT-2 tensor layout.

    def features(self, inputs, training=None) -> dict:
        """Adds `pooled_output`: the state at each row's last real token (the GPT
        paper's "extract" position, the only one that has seen the whole input)."""
        out = dict(self(inputs, training=training))
        mask = ops.cast(inputs["padding_mask"], "int32")
        out["padding_mask"] = mask
        out["pooled_output"] = last_token_state(out["sequence_output"], mask)
        return out

    def with_vocab_size(self, vocab_size: int, seed: int | None = None) -> "GPTDecoder":
        """A decoder with the same weights and `vocab_size` token embeddings: the rows
        this one has, then new rows drawn from normal(0, initializer_range), as the
        GPT paper adds its fine-tuning tokens (start, delimiter, extract). The draw is
        NumPy's `default_rng(seed)`, or with `seed=None` NumPy's global state, which
        `keras.utils.set_random_seed` (the task commands' --seed) seeds."""
        import dataclasses

        import numpy as np

        old = self.config.vocab_size
        if vocab_size < old:
            raise ValueError(f"vocab_size={vocab_size} is below the model's {old}")
        if vocab_size == old:
            return self
        config = dataclasses.replace(self.config, vocab_size=vocab_size)
        bigger = GPTDecoder(config, dtype=self.dtype_policy, name=self.name)
        rng = np.random.default_rng(seed) if seed is not None else np.random
        table = self.token_embedding.embeddings.numpy()
        extra = rng.normal(0.0, self.config.initializer_range,
                           (vocab_size - old, table.shape[1])).astype(table.dtype)
        values = {id(v): v.numpy() for v in self.weights}
        for new_var, old_var in zip(bigger.weights, self.weights):
            if old_var is self.token_embedding.embeddings:
                new_var.assign(np.concatenate([table, extra]))
            else:
                new_var.assign(values[id(old_var)])
        return bigger

    # --------------------------------------------------------------- cached decoding
    def cache_shape(self, batch_size, length):
        """[B*N, S, D]: the shape of each layer's keys, and of its values, for S
        positions (the heads in the batch dimension, see `MultiHeadAttention`)."""
        c = self.config
        return (batch_size * c.num_heads, length, c.hidden_size // c.num_heads)

    def empty_cache(self, batch_size, length):
        """The cache for `call_with_cache`: a (keys, values) pair of zeros per layer.

        One pair per layer rather than one stacked tensor: a decoding step then writes
        only its position, and reads each layer's keys and values without a copy
        (slicing a stacked cache and stacking it again copied the whole cache four
        times a step: a fifth of a GPT-2 124M step at batch 8 on a 2-core CPU, see
        docs/benchmarks.md)."""
        shape = self.cache_shape(batch_size, length)
        return tuple((ops.zeros(shape, self.compute_dtype), ops.zeros(shape, self.compute_dtype))
                     for _ in range(self.config.num_layers))

    def call_with_cache(self, token_ids, positions, key_padding_mask, cache, cache_index,
                        training=False):
        """Decodes `token_ids` [B, T] written at cache positions `cache_index ..
        cache_index + T - 1`.

        Args:
            token_ids: int [B, T].
            positions: int [B, T], each token's position (see `positions_from_mask`).
            key_padding_mask: int [B, S], 1 on cache positions that hold real tokens
                (prompt padding is 0; positions not decoded yet are hidden by causality).
            cache: a (keys, values) pair per layer, each float [B*N, S, D]
                (`empty_cache`).
            cache_index: int scalar.

        Returns:
            (sequence_output [B, T, H], updated cache).
        """
        x = self.token_embedding(token_ids) + self.position_embedding(
            token_ids, positions=positions)
        x = self.embedding_dropout(x, training=training)
        mask = key_mask(key_padding_mask)  # (B, 1, S)
        caches = []
        for block, layer_cache in zip(self.transformer_layers, cache):
            x, layer_cache = block(x, attention_mask=mask, causal=True, cache=layer_cache,
                                   cache_index=cache_index, training=training)
            caches.append(tuple(layer_cache))
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        return x, tuple(caches)

    # ------------------------------------------------------------------ checkpoints


@keras.saving.register_keras_serializable(package="kbert")
class GPTLanguageModel(Backbone, GenerativeLM, Quantizable, keras.Model):
    """A GPTDecoder with its output layer tied to the token embeddings: `logits`
    float32 [batch_size, seq_length, vocab_size], the next token's scores at every
    position.

    `from_pretrained` loads the decoder and, where the folder has one, the tokenizer
    (`self.tokenizer`), which `generate` needs to take and give strings.

    Example:
    >>> import numpy as np
    >>> lm = GPTLanguageModel(GPTConfig.preset("tiny"))
    >>> lm({"token_ids": np.array([[5, 6]]), "padding_mask": np.ones((1, 2), "int32")}
    ...    )["logits"].shape
    TensorShape([1, 2, 99])
    """

    def __init__(self, decoder: GPTDecoder | GPTConfig | dict, dtype=None, **kwargs):
        if not isinstance(decoder, GPTDecoder):
            decoder = GPTDecoder(decoder, dtype=dtype, name="gpt_decoder")
        inputs = {"token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids"),
                  "padding_mask": keras.Input(shape=(None,), dtype="int32",
                                              name="padding_mask")}
        x = decoder(inputs)["sequence_output"]
        logits = decoder.token_embedding(x, reverse=True)
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
        self.decoder = decoder
        self.config = decoder.config
        self.tokenizer = None  # set by from_pretrained, or by the user

    # ------------------------------------------------- generation protocol
    # (`GenerativeLM`: end token, vocabulary and positions from the config)
    def generation_cache(self, batch_size, length):
        """The decoder's empty key/value cache for `length` positions."""
        return self.decoder.empty_cache(batch_size, length)

    def generation_step(self, token_ids, positions, key_mask, cache, index):
        """(float32 logits [B, V] at the last of `token_ids`, the updated cache)."""
        hidden, cache = self.decoder.call_with_cache(token_ids, positions, key_mask, cache,
                                                     index)
        return self.decoder.token_embedding.logits(hidden[:, -1]), cache

    config_key = "decoder"  # serialization (`Backbone`): the decoder's config

    def serialized_dtype(self):
        return self.decoder.dtype_policy

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype=None, load_tokenizer=True,
                        quantize: str | None = None, **config_overrides) -> "GPTLanguageModel":
        """The decoder's folder formats (see `GPTDecoder.from_pretrained`, which also
        says what `dtype` and `quantize` do); the tokenizer too when the folder has its
        files."""
        path = hub.resolve(path)
        decoder = GPTDecoder.from_pretrained(path, dtype=dtype, quantize=quantize,
                                             **config_overrides)
        tokenizer = None
        if load_tokenizer:
            from kbert.tokenizers.gpt import GPTTokenizer

            if GPTTokenizer.folder_has_files(path):
                tokenizer = GPTTokenizer.from_pretrained(path)
                tokenizer.fit_positions(decoder.config.max_position_embeddings,
                                        os.fspath(path))
        model = cls(decoder, name="gpt_language_model")
        model.tokenizer = tokenizer
        return model

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None,
                        format: str = "kbert") -> None:  # noqa: A002
        """The decoder's folder with the tokenizer's files (`tokenizer`, else the one
        loaded with the model; see `Pretrained.save_pretrained`; `format="huggingface"`:
        `GPT2LMHeadModel`'s)."""
        self.decoder.save_pretrained(path, tokenizer=tokenizer or self.tokenizer,
                                     format=format)


def _new_layers(config: GPTConfig, dtype):
    init = keras.initializers.serialize(normal(config.initializer_range))
    residual = keras.initializers.serialize(
        normal(config.initializer_range / math.sqrt(2 * config.num_layers)))
    token_embedding = TokenEmbedding(config.vocab_size, config.hidden_size,
                                     embeddings_initializer=normal(config.initializer_range),
                                     dtype=dtype, name="token_embedding")
    # GPT-2 initializes position embeddings with stddev 0.01 (OpenAI's model.py).
    position_embedding = PositionEmbedding(config.max_position_embeddings, config.hidden_size,
                                           initializer=normal(0.01), dtype=dtype,
                                           name="position_embedding")
    dropout = keras.layers.Dropout(config.embedding_dropout, dtype=dtype,
                                   name="embedding_dropout")
    blocks = [
        TransformerBlock(
            config.hidden_size, config.num_heads, config.intermediate_size,
            hidden_act=config.hidden_act, dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            layer_norm_epsilon=config.layer_norm_epsilon, norm_first=config.norm_first,
            kernel_initializer=init, output_kernel_initializer=residual, dtype=dtype,
            name=f"transformer_layer_{i}")
        for i in range(config.num_layers)
    ]
    final_norm = (keras.layers.LayerNormalization(epsilon=config.layer_norm_epsilon,
                                                  dtype=dtype, name="final_layer_norm")
                  if config.norm_first else None)
    return token_embedding, position_embedding, dropout, blocks, final_norm
