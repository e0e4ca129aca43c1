"""BART (Lewis et al., 2020): a denoising encoder-decoder, BERT's post-LN blocks in both
stacks with cross-attention in the decoder's (`TransformerBlock(cross_attention=True)`),
learned positions with fairseq's offset of 2, a LayerNorm on the embeddings, and one
token table for the encoder, the decoder and the output layer.

    lm = kbert.BartSeq2SeqLM.from_pretrained("facebook/bart-large-cnn")
    lm.generate("article text ...", sampler="beam", num_beams=4)

Inputs are keras-hub's names (`encoder_token_ids`, `encoder_padding_mask`,
`decoder_token_ids`, `decoder_padding_mask`); output `logits` float32 [B, Td, V].
Positions count from each row's first real token, so that left-padded rows (as the
generation loop pads prompts) read what right-padded ones do.
"""

from __future__ import annotations

import math
import os

import keras
from keras import ops

from kbert import hub
from kbert.layers.embeddings import PositionEmbedding, TokenEmbedding
from kbert.layers.initializers import normal
from kbert.layers.masks import key_mask, positions_from_mask
from kbert.layers.transformer import TransformerBlock
from kbert.models.bart.config import BartConfig
from kbert.models.base import Pretrained, Quantizable

INPUTS = ("encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
          "decoder_padding_mask")
POSITION_OFFSET = 2  # fairseq's learned positions start at row 2


@keras.saving.register_keras_serializable(package="kbert")
class BartStack(keras.layers.Layer):
    """BART's encoder (`decoder=False`) or decoder: token vectors (scaled where the
    config says) + learned positions, LayerNorm, dropout, the post-LN blocks."""

    def __init__(self, config: BartConfig, decoder: bool = False, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = BartConfig.from_dict(config)
        self.config, self.is_decoder = config, decoder
        c = config
        init = keras.initializers.serialize(normal(c.initializer_range))
        self.position_embedding = PositionEmbedding(
            c.max_position_embeddings + POSITION_OFFSET, c.hidden_size,
            initializer=normal(c.initializer_range), dtype=self.dtype_policy,
            name="position_embedding")
        self.embedding_layer_norm = keras.layers.LayerNormalization(
            epsilon=c.layer_norm_epsilon, dtype=self.dtype_policy, name="embedding_layer_norm")
        self.dropout = keras.layers.Dropout(c.dropout, dtype=self.dtype_policy)
        heads = c.decoder_heads if decoder else c.encoder_heads
        width = c.decoder_intermediate_size if decoder else c.encoder_intermediate_size
        self.blocks = [
            TransformerBlock(c.hidden_size, heads, width, hidden_act=c.hidden_act,
                             dropout=c.dropout, attention_dropout=c.attention_dropout,
                             activation_dropout=c.activation_dropout,
                             layer_norm_epsilon=c.layer_norm_epsilon, kernel_initializer=init,
                             cross_attention=decoder, dtype=self.dtype_policy,
                             name=f"block_{i}")
            for i in range(c.decoder_layers if decoder else c.encoder_layers)]
        self.embed_scale = math.sqrt(c.hidden_size) if c.scale_embedding else 1.0

    def build(self, input_shape, *args, **kwargs):
        self.position_embedding.build()
        self.embedding_layer_norm.build(input_shape)
        for block in self.blocks:
            block.build(input_shape)
        self.built = True

    def _embed(self, x, positions, training):
        if self.embed_scale != 1.0:
            x = x * ops.cast(self.embed_scale, x.dtype)
        x = x + self.position_embedding(x, positions=positions + POSITION_OFFSET)
        return self.dropout(self.embedding_layer_norm(x), training=training)

    def call(self, x, padding_mask, encoder_output=None, encoder_padding_mask=None,
             training=None):
        """x: the token vectors [B, T, H] (unscaled); padding_mask int [B, T]."""
        x = self._embed(x, positions_from_mask(padding_mask), training)
        mask = key_mask(padding_mask)
        cross_mask = None if encoder_padding_mask is None else key_mask(encoder_padding_mask)
        for block in self.blocks:
            x = block(x, attention_mask=mask, causal=self.is_decoder,
                      encoder_output=encoder_output, encoder_mask=cross_mask,
                      training=training)
        return x

    def call_with_cache(self, x, cache, cache_index, cross_caches, encoder_padding_mask,
                        training=False):
        """The decoder on x [B, T, H] at positions `cache_index ..` (see
        `T5Stack.call_with_cache`). Returns (output, updated cache)."""
        length = ops.shape(x)[1]
        positions = ops.expand_dims(ops.arange(length) + cache_index, 0)
        x = self._embed(x, positions, training)
        cross_mask = key_mask(encoder_padding_mask)
        new = []
        for block, layer_cache, cross in zip(self.blocks, cache, cross_caches):
            x, layer_cache = block(x, causal=True, cache=layer_cache, cache_index=cache_index,
                                   cross_cache=cross, encoder_mask=cross_mask,
                                   training=training)
            new.append(tuple(layer_cache))
        return x, tuple(new)

    def compute_output_spec(self, x, *args, **kwargs):
        return keras.KerasTensor(x.shape, dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(),
                "decoder": self.is_decoder}


@keras.saving.register_keras_serializable(package="kbert")
class FinalLogitsBias(keras.layers.Layer):
    """BART's `final_logits_bias` [V] added to the logits (zeros in the released
    models; a buffer, not trained, in Hugging Face's)."""

    def __init__(self, vocab_size: int, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)

    def build(self, input_shape=None):
        self.bias = self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros",
                                    trainable=False)

    def call(self, logits):
        return logits + ops.cast(self.bias, logits.dtype)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size}


@keras.saving.register_keras_serializable(package="kbert")
class BartSeq2SeqLM(Quantizable, keras.Model, Pretrained):
    """BART's encoder-decoder with its output layer (the token table + final bias):
    `logits` float32 [B, Td, V]. `from_pretrained` reads a kbert folder or Hugging
    Face's (`facebook/bart-base`, a Hub name) and, where the folder has `vocab.json` and
    `merges.txt`, the tokenizer (`self.tokenizer`)."""

    family = "bart"
    checkpoints = "kbert.models.bart.checkpoints"

    def __init__(self, config: BartConfig | dict, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = BartConfig.from_dict(config)
        c = config
        token_embedding = TokenEmbedding(c.vocab_size, c.hidden_size,
                                         embeddings_initializer=normal(c.initializer_range),
                                         dtype=dtype, name="token_embedding")
        encoder = BartStack(c, decoder=False, dtype=dtype, name="encoder")
        decoder = BartStack(c, decoder=True, dtype=dtype, name="decoder")
        final_bias = FinalLogitsBias(c.vocab_size, dtype=dtype, name="final_logits_bias")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUTS}
        encoded = encoder(token_embedding(inputs["encoder_token_ids"]),
                          inputs["encoder_padding_mask"])
        decoded = decoder(token_embedding(inputs["decoder_token_ids"]),
                          inputs["decoder_padding_mask"], encoded,
                          inputs["encoder_padding_mask"])
        logits = final_bias(token_embedding(decoded, reverse=True))
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)
        self.config = c
        self.token_embedding, self.encoder, self.decoder = token_embedding, encoder, decoder
        self.final_logits_bias = final_bias
        self.tokenizer = None

    def shift_right(self, token_ids):
        """The decoder's input for targets [B, T]: `decoder_start_token_id` (`</s>`),
        then the targets but the last; label padding (< 0) becomes `<pad>` (as
        `transformers`' `shift_tokens_right`)."""
        ids = ops.cast(token_ids, "int32")
        start = ops.full((ops.shape(ids)[0], 1), self.config.decoder_start_token_id, "int32")
        shifted = ops.concatenate([start, ids[:, :-1]], axis=1)
        return ops.where(shifted < 0, self.config.pad_token_id, shifted)

    # ------------------------------------------------- generation protocol
    is_encoder_decoder = True

    @property
    def end_token_id(self) -> int:
        return self.config.end_token_id

    @property
    def max_positions(self) -> int:
        return self.config.max_position_embeddings

    @property
    def max_input_length(self) -> int:
        return self.config.max_position_embeddings

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    def generation_start(self, token_ids, padding_mask, capacity):
        """As `T5Seq2SeqLM.generation_start`; the decoder's prompt is `</s>`, then `<s>`
        where the config forces it (bart-large: `forced_bos_token_id`)."""
        rows = ops.shape(token_ids)[0]
        encoded = self.encoder(self.token_embedding(token_ids), padding_mask)
        cross = tuple(block.cross_attention.project_key_value(encoded)
                      for block in self.decoder.blocks)
        c = self.config
        prompt = [c.decoder_start_token_id] + (
            [] if c.forced_bos_token_id is None else [c.forced_bos_token_id])
        head = c.hidden_size // c.decoder_heads
        shape = (rows * c.decoder_heads, len(prompt) + capacity, head)
        self_cache = tuple((ops.zeros(shape, self.compute_dtype),
                            ops.zeros(shape, self.compute_dtype))
                           for _ in self.decoder.blocks)
        cache = {"self": self_cache, "cross": cross,
                 "encoder_mask": ops.cast(padding_mask, "int32")}
        start = ops.tile(ops.convert_to_tensor([prompt], "int32"), (rows, 1))
        logits, cache = self.generation_step(start, None, None, cache, 0)
        return logits, cache, start

    def generation_step(self, token_ids, positions, key_mask, cache, index):
        x, self_cache = self.decoder.call_with_cache(
            self.token_embedding(token_ids), cache["self"], index, cache["cross"],
            cache["encoder_mask"])
        logits = self.final_logits_bias(self.token_embedding.logits(x[:, -1]))
        return ops.cast(logits, "float32"), dict(cache, self=self_cache)

    def generate(self, texts, max_new_tokens: int = 32, sampler: str = "greedy", **options):
        """Text to text (see `T5Seq2SeqLM.generate`)."""
        from kbert.models import generation

        return generation.seq2seq_text(self, texts, max_new_tokens, sampler=sampler,
                                       **options)

    def generate_ids(self, token_ids, padding_mask, max_new_tokens: int = 32,
                     sampler: str = "greedy", **options):
        """The output ids [B * num_return_sequences, max_new_tokens] for encoder inputs
        [B, P] (after a row's `</s>`: `</s>` again; a forced `<s>` is not among them)."""
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
                        quantize: str | None = None, **config_overrides) -> "BartSeq2SeqLM":
        path = hub.resolve(path)
        model = super().from_pretrained(path, dtype=dtype, quantize=quantize,
                                        **config_overrides)
        if load_tokenizer:
            from kbert.tokenizers.bart import BartTokenizer

            if BartTokenizer.folder_has_files(path):
                model.tokenizer = BartTokenizer.from_pretrained(path)
        return model

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None,
                        format: str = "kbert") -> None:  # noqa: A002
        super().save_pretrained(path, tokenizer=tokenizer or self.tokenizer, format=format)
