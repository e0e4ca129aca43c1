"""T5 (Raffel et al., 2020): an encoder-decoder Transformer with T5's pre-norm blocks
(`kbert.layers.t5`), one token table shared by the encoder, the decoder and (T5.1.0)
the output layer, and a relative position bias per stack.

    lm = kbert.T5Seq2SeqLM.from_pretrained("t5-small")
    lm.generate("translate English to German: That is good.")

Inputs are keras-hub's names: `encoder_token_ids`, `encoder_padding_mask`,
`decoder_token_ids`, `decoder_padding_mask` (int [B, T]); the output `logits` float32
[B, Td, V] scores the next decoder token at each position. In training the decoder's
input is the target shifted right behind the start token (`shift_right`), as teacher
forcing.
"""

from __future__ import annotations

import os

import keras
from keras import ops

from kbert import hub
from kbert.layers.dense import Dense
from kbert.layers.embeddings import TokenEmbedding
from kbert.layers.masks import key_mask
from kbert.layers.t5 import RelativePositionBias, RMSNorm, T5Block
from kbert.models.base import Pretrained, Quantizable
from kbert.models.t5.config import T5Config

INPUTS = ("encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
          "decoder_padding_mask")


@keras.saving.register_keras_serializable(package="kbert")
class T5Stack(keras.layers.Layer):
    """T5's encoder (`decoder=False`) or decoder stack: dropout on the token vectors,
    the blocks sharing one `RelativePositionBias` (bidirectional buckets in the
    encoder, causal in the decoder), a final RMSNorm and dropout."""

    def __init__(self, config: T5Config, decoder: bool = False, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = T5Config.from_dict(config)
        self.config, self.is_decoder = config, decoder
        c = config
        factor = c.initializer_factor
        self.position_bias = RelativePositionBias(
            c.num_heads, c.relative_attention_num_buckets, c.relative_attention_max_distance,
            bidirectional=not decoder,
            initializer=keras.initializers.RandomNormal(stddev=factor * c.hidden_size ** -0.5),
            dtype=self.dtype_policy, name="relative_attention_bias")
        self.blocks = [
            T5Block(c.hidden_size, c.num_heads, c.key_value_size, c.intermediate_size,
                    c.hidden_act, c.gated, c.dropout, c.layer_norm_epsilon,
                    cross_attention=decoder, dtype=self.dtype_policy, name=f"block_{i}")
            for i in range(c.num_decoder_layers if decoder else c.num_layers)]
        self.final_norm = RMSNorm(c.layer_norm_epsilon, dtype=self.dtype_policy,
                                  name="final_layer_norm")
        self.dropout = keras.layers.Dropout(c.dropout, dtype=self.dtype_policy)

    def build(self, input_shape, *args, **kwargs):
        self.position_bias.build()
        for block in self.blocks:
            block.build(input_shape)
        self.final_norm.build(input_shape)
        self.built = True

    def call(self, x, padding_mask, encoder_output=None, encoder_padding_mask=None,
             training=None):
        """x: the token vectors [B, T, H]; padding_mask int [B, T]."""
        length = ops.shape(x)[1]
        bias = self.position_bias.bias(length, length)
        mask = key_mask(padding_mask)
        cross_mask = None if encoder_padding_mask is None else key_mask(encoder_padding_mask)
        x = self.dropout(x, training=training)
        for block in self.blocks:
            x = block(x, position_bias=bias, attention_mask=mask, causal=self.is_decoder,
                      encoder_output=encoder_output, encoder_mask=cross_mask,
                      training=training)
        return self.dropout(self.final_norm(x), training=training)

    def call_with_cache(self, x, cache, cache_index, cross_caches, encoder_padding_mask,
                        training=False):
        """The decoder on x [B, T, H] written at positions `cache_index ..`: a
        (keys, values) self-attention cache per block and the blocks' projected
        encoder keys and values (`cross_caches`). Returns (output, updated cache)."""
        length = ops.shape(x)[1]
        bias = self.position_bias.bias(length, ops.shape(cache[0][0])[1], cache_index)
        cross_mask = key_mask(encoder_padding_mask)
        new = []
        for block, layer_cache, cross in zip(self.blocks, cache, cross_caches):
            x, layer_cache = block(x, position_bias=bias, causal=True, cache=layer_cache,
                                   cache_index=cache_index, cross_cache=cross,
                                   encoder_mask=cross_mask, training=training)
            new.append(tuple(layer_cache))
        return self.final_norm(x), tuple(new)

    def compute_output_spec(self, x, *args, **kwargs):
        return keras.KerasTensor(x.shape, dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(),
                "decoder": self.is_decoder}


@keras.saving.register_keras_serializable(package="kbert")
class T5Seq2SeqLM(Quantizable, keras.Model, Pretrained):
    """T5's encoder-decoder with its output layer: `logits` float32 [B, Td, V].

    `from_pretrained` reads a kbert folder or Hugging Face's (`t5-small`,
    `google/t5-v1_1-base`, a Hub name) and, where the folder has `spiece.model`, the
    tokenizer (`self.tokenizer`), which `generate` needs for strings.
    """

    family = "t5"
    checkpoints = "kbert.models.t5.checkpoints"

    def __init__(self, config: T5Config | dict, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = T5Config.from_dict(config)
        c = config
        factor = c.initializer_factor
        token_embedding = TokenEmbedding(
            c.vocab_size, c.hidden_size,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=factor),
            dtype=dtype, name="token_embedding")
        encoder = T5Stack(c, decoder=False, dtype=dtype, name="encoder")
        decoder = T5Stack(c, decoder=True, dtype=dtype, name="decoder")
        lm_head = None if c.tie_word_embeddings else Dense(
            c.vocab_size, use_bias=False,
            kernel_initializer=keras.initializers.RandomNormal(stddev=factor),
            dtype=dtype, name="lm_head")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUTS}
        encoded = encoder(token_embedding(inputs["encoder_token_ids"]),
                          inputs["encoder_padding_mask"])
        decoded = decoder(token_embedding(inputs["decoder_token_ids"]),
                          inputs["decoder_padding_mask"], encoded,
                          inputs["encoder_padding_mask"])
        logits = _logits(c, token_embedding, lm_head, decoded)
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
        self.config = c
        self.token_embedding, self.encoder, self.decoder = token_embedding, encoder, decoder
        self.lm_head = lm_head
        self.tokenizer = None  # set by from_pretrained, or by the user

    def _logits(self, x):
        return _logits(self.config, self.token_embedding, self.lm_head, x)

    # ------------------------------------------------------------------ helpers
    def shift_right(self, token_ids):
        """The decoder's input for targets [B, T] in teacher forcing: the start token,
        then the targets but the last (as `transformers`' `_shift_right`; label -100
        or -1 padding becomes the pad id)."""
        ids = ops.cast(token_ids, "int32")
        start = ops.full((ops.shape(ids)[0], 1), self.config.decoder_start_token_id, "int32")
        shifted = ops.concatenate([start, ids[:, :-1]], axis=1)
        return ops.where(shifted < 0, self.config.pad_token_id, shifted)

    # ------------------------------------------------- generation protocol
    # (kbert.models.generation: an encoder-decoder starts with `generation_start`,
    # which runs the encoder once; the loop then feeds the decoder.)
    is_encoder_decoder = True

    @property
    def end_token_id(self) -> int:
        return self.config.end_token_id

    @property
    def max_positions(self) -> int:
        return 1 << 30  # relative positions: no table to run out of

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    def generation_start(self, token_ids, padding_mask, capacity):
        """The encoder on the prompts [B, P] (any padding), the blocks' projected
        encoder keys and values, an empty self-attention cache for the decoder's start
        token and `capacity` new ones, and the start token's logits. Returns (logits
        [B, V], cache, the decoder's prompt [B, 1])."""
        rows = ops.shape(token_ids)[0]
        encoded = self.encoder(self.token_embedding(token_ids), padding_mask)
        cross = tuple(block.cross_attention.project_key_value(encoded)
                      for block in self.decoder.blocks)
        c = self.config
        shape = (rows * c.num_heads, 1 + capacity, c.key_value_size)
        self_cache = tuple((ops.zeros(shape, self.compute_dtype),
                            ops.zeros(shape, self.compute_dtype))
                           for _ in self.decoder.blocks)
        cache = {"self": self_cache, "cross": cross,
                 "encoder_mask": ops.cast(padding_mask, "int32")}
        start = ops.full((rows, 1), c.decoder_start_token_id, "int32")
        logits, cache = self.generation_step(start, None, None, cache, 0)
        return logits, cache, start

    def generation_step(self, token_ids, positions, key_mask, cache, index):
        """(float32 logits [B, V] at the last of the decoder's `token_ids`, the updated
        cache); `index` is the decoder position of the first (0: the start token)."""
        x, self_cache = self.decoder.call_with_cache(
            self.token_embedding(token_ids), cache["self"], index, cache["cross"],
            cache["encoder_mask"])
        return self._logits(x[:, -1]), dict(cache, self=self_cache)

    def generate(self, texts, max_new_tokens: int = 32, sampler: str = "greedy",
                 **options):
        """Text to text: each input's output text (up to, without, `</s>`); a list
        for a list. `options`: those of `GPTLanguageModel.generate` (temperature,
        top_k, top_p, seed, num_beams, repetition_penalty, ...,
        num_return_sequences)."""
        from kbert.models import generation

        return generation.seq2seq_text(self, texts, max_new_tokens, sampler=sampler,
                                       **options)

    def generate_ids(self, token_ids, padding_mask, max_new_tokens: int = 32,
                     sampler: str = "greedy", **options):
        """The output ids [B * num_return_sequences, max_new_tokens] for encoder inputs
        [B, P] (after a row's `</s>`: `</s>` again)."""
        from kbert.models import generation

        return generation.generate_ids(self, token_ids, padding_mask, max_new_tokens,
                                       sampler=sampler, **options)

    # ------------------------------------------------------------------ serialization
    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name,
                "trainable": self.trainable,
                "dtype": keras.saving.serialize_keras_object(self.dtype_policy)}

    @classmethod
    def from_config(cls, config):
        from kbert.models.interface import dtype_from_config

        config = dict(config)
        dtype = dtype_from_config(config)
        return cls(config.pop("config"), dtype=dtype, **config)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype=None, load_tokenizer=True,
                        quantize: str | None = None, **config_overrides) -> "T5Seq2SeqLM":
        """The model of a folder (`Pretrained.from_pretrained`), with its tokenizer
        where the folder has `spiece.model`."""
        path = hub.resolve(path)
        model = super().from_pretrained(path, dtype=dtype, quantize=quantize,
                                        **config_overrides)
        if load_tokenizer:
            from kbert.tokenizers.t5 import T5Tokenizer

            if T5Tokenizer.folder_has_files(path):
                model.tokenizer = T5Tokenizer.from_pretrained(path)
        return model

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None,
                        format: str = "kbert") -> None:  # noqa: A002
        super().save_pretrained(path, tokenizer=tokenizer or self.tokenizer, format=format)


def _logits(config: T5Config, token_embedding, lm_head, x):
    """float32 logits of decoder states: scaled by hidden_size ** -0.5 where the config
    says, then the `lm_head` or (tied) the token table."""
    if config.scale_decoder_outputs:
        x = x * ops.cast(config.hidden_size ** -0.5, x.dtype)
    if lm_head is not None:
        return ops.cast(lm_head(x), "float32")
    return ops.cast(token_embedding(x, reverse=True), "float32")
