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

import dataclasses
import math

import keras
from keras import ops

from kbert.layers.embeddings import PositionEmbedding, TokenEmbedding
from kbert.layers.initializers import normal
from kbert.layers.masks import key_mask, positions_from_mask
from kbert.layers.transformer import TransformerBlock
from kbert.models.bart.config import BartConfig
from kbert.models.seq2seq import Seq2SeqLM, Seq2SeqStack, decode_with_cache

POSITION_OFFSET = 2  # fairseq's learned positions start at row 2


@keras.saving.register_keras_serializable(package="kbert")
class BartStack(Seq2SeqStack):
    """BART's encoder (`decoder=False`) or decoder: token vectors (scaled where the
    config says) + learned positions, LayerNorm, dropout, the post-LN blocks."""

    config_class = BartConfig

    def __init__(self, config: BartConfig | dict, decoder: bool = False, **kwargs):
        super().__init__(config, decoder, **kwargs)
        c = self.config
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
        return decode_with_cache(self.blocks, x, cache, cache_index, cross_caches,
                                 encoder_padding_mask, training)



@keras.saving.register_keras_serializable(package="kbert")
class BartSourceEncoder(keras.layers.Layer):
    """BART's translation mode (Lewis et al., 2020, section 3.4): a new Transformer
    encoder in front of BART, initialised at random, whose output stands in for the
    source's token vectors (BART's encoder adds its positions and reads on). Its own
    token table and a `BartStack` of `config.source_encoder_layers` blocks (BART's
    widths); BART's tokenizer feeds it (byte-level BPE: any language's text)."""

    def __init__(self, config: BartConfig | dict, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = BartConfig.from_dict(config)
        c = self.config = config
        self.token_embedding = TokenEmbedding(
            c.vocab_size, c.hidden_size, embeddings_initializer=normal(c.initializer_range),
            dtype=self.dtype_policy, name="token_embedding")
        self.stack = BartStack(dataclasses.replace(c, encoder_layers=c.source_encoder_layers),
                               dtype=self.dtype_policy, name="stack")

    def build(self, input_shape, *args, **kwargs):
        self.token_embedding.build(input_shape)
        self.stack.build(tuple(input_shape) + (self.config.hidden_size,))
        self.built = True

    def call(self, token_ids, padding_mask, training=None):
        return self.stack(self.token_embedding(token_ids), padding_mask, training=training)

    def compute_output_spec(self, token_ids, *args, **kwargs):
        return keras.KerasTensor(tuple(token_ids.shape) + (self.config.hidden_size,),
                                 dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}


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
class BartSeq2SeqLM(Seq2SeqLM):
    """BART's encoder-decoder with its output layer (the token table + final bias):
    `logits` float32 [B, Td, V]. `from_pretrained` reads a kbert folder or Hugging
    Face's (`facebook/bart-base`, a Hub name) and, where the folder has `vocab.json` and
    `merges.txt`, the tokenizer (`self.tokenizer`). The shared parts are
    `kbert.models.seq2seq.Seq2SeqLM`'s."""

    family = "bart"

    def __init__(self, config: BartConfig | dict, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = BartConfig.from_dict(config)
        c = config
        token_embedding = TokenEmbedding(c.vocab_size, c.hidden_size,
                                         embeddings_initializer=normal(c.initializer_range),
                                         dtype=dtype, name="token_embedding")
        stacks = (BartStack(c, decoder=False, dtype=dtype, name="encoder"),
                  BartStack(c, decoder=True, dtype=dtype, name="decoder"))
        final_bias = FinalLogitsBias(c.vocab_size, dtype=dtype, name="final_logits_bias")
        source_encoder = BartSourceEncoder(c, dtype=dtype, name="source_encoder") \
            if c.source_encoder_layers else None
        super().__init__(c, token_embedding, *stacks,
                         lambda decoded: final_bias(token_embedding(decoded, reverse=True)),
                         source_encoder=source_encoder, **kwargs)
        self.final_logits_bias = final_bias

    def stage_one_variables(self) -> list:
        """What the first of the translation mode's two stages trains (BART's paper,
        section 3.4): the new source encoder, BART's encoder positions and the input
        projections (query, key, value) of its first encoder layer's self-attention."""
        if self.source_encoder is None:
            raise ValueError("BartSeq2SeqLM.stage_one_variables: the model has no source "
                             "encoder (config.source_encoder_layers=0)")
        attention = self.encoder.blocks[0].attention
        return [*self.source_encoder.trainable_variables,
                self.encoder.position_embedding.embeddings,
                *(v for layer in (attention.query, attention.key, attention.value)
                  for v in (layer.kernel, layer.bias))]

    def _logits(self, x):
        logits = self.final_logits_bias(self.token_embedding.logits(x))
        return ops.cast(logits, "float32")

    @property
    def max_input_length(self) -> int:
        return self.config.max_position_embeddings

    @property
    def forced_end_token_id(self) -> int | None:
        """`forced_eos_token_id`: the token `generate` forces at a row's last step."""
        return self.config.forced_eos_token_id

    def decoder_prompt(self) -> list[int]:
        """`</s>`, then `<s>` where the config forces it (bart-large's
        `forced_bos_token_id`)."""
        c = self.config
        return [c.decoder_start_token_id] + (
            [] if c.forced_bos_token_id is None else [c.forced_bos_token_id])

    def decoder_cache_shape(self, rows, length):
        c = self.config
        return (rows * c.decoder_heads, length, c.hidden_size // c.decoder_heads)
