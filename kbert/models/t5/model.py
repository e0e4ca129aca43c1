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

import keras
from keras import ops

from kbert.layers.dense import Dense
from kbert.layers.embeddings import TokenEmbedding
from kbert.layers.masks import key_mask
from kbert.layers.t5 import RelativePositionBias, RMSNorm, T5Block
from kbert.models.seq2seq import Seq2SeqLM, Seq2SeqStack, decode_with_cache
from kbert.models.t5.config import T5Config


@keras.saving.register_keras_serializable(package="kbert")
class T5Stack(Seq2SeqStack):
    """T5's encoder (`decoder=False`) or decoder stack: dropout on the token vectors,
    the blocks sharing one `RelativePositionBias` (bidirectional buckets in the
    encoder, causal in the decoder), a final RMSNorm and dropout."""

    config_class = T5Config

    def __init__(self, config: T5Config | dict, decoder: bool = False, **kwargs):
        super().__init__(config, decoder, **kwargs)
        c = self.config
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
        x, new = decode_with_cache(self.blocks, x, cache, cache_index, cross_caches,
                                   encoder_padding_mask, training, position_bias=bias)
        return self.final_norm(x), new



@keras.saving.register_keras_serializable(package="kbert")
class T5Seq2SeqLM(Seq2SeqLM):
    """T5's encoder-decoder with its output layer: `logits` float32 [B, Td, V].

    `from_pretrained` reads a kbert folder or Hugging Face's (`t5-small`,
    `google/t5-v1_1-base`, a Hub name) and, where the folder has `spiece.model`, the
    tokenizer (`self.tokenizer`), which `generate` needs for strings. The shared parts
    (teacher forcing's `shift_right`, the generation protocol, `generate`, folders) are
    `kbert.models.seq2seq.Seq2SeqLM`'s.
    """

    family = "t5"

    def __init__(self, config: T5Config | dict, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = T5Config.from_dict(config)
        c = config
        factor = c.initializer_factor
        token_embedding = TokenEmbedding(
            c.vocab_size, c.hidden_size,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=factor),
            dtype=dtype, name="token_embedding")
        stacks = (T5Stack(c, decoder=False, dtype=dtype, name="encoder"),
                  T5Stack(c, decoder=True, dtype=dtype, name="decoder"))
        lm_head = None if c.tie_word_embeddings else Dense(
            c.vocab_size, use_bias=False,
            kernel_initializer=keras.initializers.RandomNormal(stddev=factor),
            dtype=dtype, name="lm_head")
        super().__init__(c, token_embedding, *stacks,
                         lambda decoded: _logits(c, token_embedding, lm_head, decoded),
                         **kwargs)
        self.lm_head = lm_head

    def _logits(self, x):
        return _logits(self.config, self.token_embedding, self.lm_head, x)

    @property
    def max_positions(self) -> int:
        return 1 << 30  # relative positions: no table to run out of

    def decoder_cache_shape(self, rows, length):
        c = self.config
        return (rows * c.num_heads, length, c.key_value_size)


def _logits(config: T5Config, token_embedding, lm_head, x):
    """float32 logits of decoder states: scaled by hidden_size ** -0.5 where the config
    says, then the `lm_head` or (tied) the token table."""
    if config.scale_decoder_outputs:
        x = x * ops.cast(config.hidden_size ** -0.5, x.dtype)
    if lm_head is not None:
        return ops.cast(lm_head(x), "float32")
    return ops.cast(token_embedding(x, reverse=True), "float32")
