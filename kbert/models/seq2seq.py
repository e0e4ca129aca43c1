"""What T5's and BART's encoder-decoders share: teacher forcing's decoder input, the
generation protocol's encoder-decoder start (`kbert.models.generation`), text to text,
serialization and folders.

A subclass is a functional Keras model over the four inputs (`INPUTS`) with
`token_embedding`, `encoder` and `decoder` stacks (the decoder's `blocks` each with a
`cross_attention` and the stack a `call_with_cache`), a `config` with
`decoder_start_token_id`, `pad_token_id`, `end_token_id` and `vocab_size`, and:
    _logits(x)              float32 logits of decoder states (the output layer)
    decoder_prompt()        the ids the decoder starts from (its start token, and a
                            forced first token where the model has one)
    decoder_cache_shape(rows, length)
                            the shape of each self-attention key / value cache
    tokenizer_class         the tokenizer `from_pretrained` loads where the folder has
                            its files (`folder_has_files`)
"""

from __future__ import annotations

import os

import keras
from keras import ops

from kbert import hub
from kbert.layers.masks import key_mask as padding_key_mask
from kbert.models.base import Backbone, Pretrained, Quantizable
from kbert.models.generative import GenerativeLM

INPUTS = ("encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
          "decoder_padding_mask")


def decode_with_cache(blocks, x, cache, cache_index, cross_caches, encoder_padding_mask,
                      training=False, **block_options):
    """A decoder stack's blocks on x [B, T, H] written at positions `cache_index ..`:
    each block with its (keys, values) self-attention cache and its projected encoder
    keys and values (`cross_caches`), `block_options` passed on (T5's position bias).
    Returns (output, the updated cache: a tuple per block)."""
    cross_mask = padding_key_mask(encoder_padding_mask)
    new = []
    for block, layer_cache, cross in zip(blocks, cache, cross_caches):
        x, layer_cache = block(x, causal=True, cache=layer_cache, cache_index=cache_index,
                               cross_cache=cross, encoder_mask=cross_mask, training=training,
                               **block_options)
        new.append(tuple(layer_cache))
    return x, tuple(new)


class Seq2SeqStack(keras.layers.Layer):
    """The base of an encoder-decoder's two stacks (`decoder=False`: the encoder): the
    config (the family's dataclass, `config_class`, or its dict), `is_decoder`, the
    output spec (the input's shape) and serialization."""

    config_class: type = None

    def __init__(self, config, decoder: bool = False, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = self.config_class.from_dict(config)
        self.config, self.is_decoder = config, decoder

    def compute_output_spec(self, x, *args, **kwargs):
        return keras.KerasTensor(x.shape, dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(),
                "decoder": self.is_decoder}


class Seq2SeqLM(Backbone, GenerativeLM, Quantizable, keras.Model, Pretrained):
    """The shared part of `T5Seq2SeqLM` and `BartSeq2SeqLM` (see the module docstring)."""

    is_encoder_decoder = True

    def __init__(self, config, token_embedding, encoder, decoder, output,
                 source_encoder=None, **kwargs):
        """The functional graph over `INPUTS`: the `encoder` stack on the embedded
        source, the `decoder` stack on the embedded target and the encoder's states,
        `output(decoder states)` the logits; the config and the three layers kept.
        `source_encoder(ids, padding_mask)`, where given, makes the source's vectors
        instead of the token table (BART's translation mode; `embed_source`)."""
        inputs = self.model_inputs()
        source = inputs["encoder_token_ids"]
        source = token_embedding(source) if source_encoder is None else source_encoder(
            source, inputs["encoder_padding_mask"])
        encoded = encoder(source, inputs["encoder_padding_mask"])
        decoded = decoder(token_embedding(inputs["decoder_token_ids"]),
                          inputs["decoder_padding_mask"], encoded,
                          inputs["encoder_padding_mask"])
        super().__init__(inputs=inputs, outputs={"logits": output(decoded)}, **kwargs)
        self.config = config
        self.token_embedding, self.encoder, self.decoder = token_embedding, encoder, decoder
        self.source_encoder = source_encoder
        self.tokenizer = None  # set by from_pretrained, or by the user

    def embed_source(self, token_ids, padding_mask, training=None):
        """The vectors the encoder stack reads for source ids [B, T]: the token table's,
        or the source encoder's where the model has one."""
        if self.source_encoder is None:
            return self.token_embedding(token_ids)
        return self.source_encoder(token_ids, padding_mask, training=training)

    @staticmethod
    def model_inputs() -> dict:
        return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUTS}

    def shift_right(self, token_ids):
        """The decoder's input for targets [B, T] in teacher forcing: the start token,
        then the targets but the last; label padding (< 0: -100, -1) becomes the pad id
        (`transformers`' `_shift_right` / `shift_tokens_right`)."""
        ids = ops.cast(token_ids, "int32")
        start = ops.full((ops.shape(ids)[0], 1), self.config.decoder_start_token_id, "int32")
        shifted = ops.concatenate([start, ids[:, :-1]], axis=1)
        return ops.where(shifted < 0, self.config.pad_token_id, shifted)

    # ------------------------------------------------- generation protocol
    def decoder_prompt(self) -> list[int]:
        return [self.config.decoder_start_token_id]

    def generation_start(self, token_ids, padding_mask, capacity):
        """The encoder on the prompts [B, P] (any padding) once, every decoder block's
        projected encoder keys and values (read as they are at every step), an empty
        self-attention cache for the decoder's prompt and `capacity` new tokens, and the
        logits after the prompt. Returns (logits [B, V], cache, the decoder's prompt
        [B, P'])."""
        rows = ops.shape(token_ids)[0]
        encoded = self.encoder(self.embed_source(token_ids, padding_mask), padding_mask)
        cross = tuple(block.cross_attention.project_key_value(encoded)
                      for block in self.decoder.blocks)
        prompt = self.decoder_prompt()
        shape = self.decoder_cache_shape(rows, len(prompt) + capacity)
        self_cache = tuple((ops.zeros(shape, self.compute_dtype),
                            ops.zeros(shape, self.compute_dtype))
                           for _ in self.decoder.blocks)
        cache = {"self": self_cache, "cross": cross,
                 "encoder_mask": ops.cast(padding_mask, "int32")}
        start = ops.tile(ops.convert_to_tensor([prompt], "int32"), (rows, 1))
        logits, cache = self.generation_step(start, None, None, cache, 0)
        return logits, cache, start

    def generation_step(self, token_ids, positions, key_mask, cache, index):
        """(float32 logits [B, V] at the last of the decoder's `token_ids`, the updated
        cache); `index` is the decoder position of the first (0: the start token)."""
        x, self_cache = self.decoder.call_with_cache(
            self.token_embedding(token_ids), cache["self"], index, cache["cross"],
            cache["encoder_mask"])
        return self._logits(x[:, -1]), dict(cache, self=self_cache)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype=None, load_tokenizer=True,
                        quantize: str | None = None, **config_overrides):
        """The model of a folder (`Pretrained.from_pretrained`), with its tokenizer
        (`self.tokenizer`) where the folder has the tokenizer's files."""
        from kbert.models import registry

        path = hub.resolve(path)
        model = super().from_pretrained(path, dtype=dtype, quantize=quantize,
                                        **config_overrides)
        if load_tokenizer:  # the family's tokenizer, as the registry has it
            tokenizer_class = registry.get_family(model.config.family).tokenizer_class
            if tokenizer_class.folder_has_files(path):
                model.tokenizer = tokenizer_class.from_pretrained(path)
        return model

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None,
                        format: str = "kbert") -> None:  # noqa: A002
        super().save_pretrained(path, tokenizer=tokenizer or self.tokenizer, format=format)
