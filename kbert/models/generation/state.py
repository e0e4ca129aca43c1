"""The decoding state every loop starts from: left padding, shape buckets, the cache
of the prompts' pass, cache reordering, and `Setting` (what a compiled loop depends on)."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from kbert.layers.masks import positions_from_mask
from kbert.models.generation.samplers import BeamSearch
from kbert.models.generation.processors import Processing, mark_present
from kbert.models.generation.stopping import StopStrings

NEG_SCORE = -1.0e9  # transformers' "very large negative" score in beam search


def left_pad(token_ids, padding_mask, pad_id: int = 0):
    """Moves each row's real tokens (mask 1; right or left padded) to the right end."""
    ids = tf.convert_to_tensor(token_ids, tf.int32)
    mask = tf.cast(tf.convert_to_tensor(padding_mask), tf.bool)
    ragged = tf.ragged.boolean_mask(ids, mask)
    width = tf.shape(ids, tf.int64)[1]
    reversed_rows = tf.reverse(ragged, axis=[1]).to_tensor(
        pad_id, shape=tf.stack([ragged.nrows(), width]))
    new_mask = tf.reverse(tf.sequence_mask(ragged.row_lengths(), width, tf.int32), axis=[1])
    return tf.reverse(reversed_rows, axis=[1]), new_mask


# Shape buckets of the XLA-compiled loop (see the module docstring).
PROMPT_BUCKET = 32


NEW_TOKENS_BUCKET = 32


def round_up(n, multiple):
    return (n + multiple - 1) // multiple * multiple


def bucket(token_ids, padding_mask, max_new_tokens, buckets=True):
    """Left-padded prompts [B, P] and a number of new tokens -> the prompts left-padded
    to a multiple of PROMPT_BUCKET, and the cache's new-token slots (capacity), a
    multiple of NEW_TOKENS_BUCKET; without `buckets`, the input and max_new_tokens."""
    token_ids = tf.convert_to_tensor(token_ids, tf.int32)
    padding_mask = tf.convert_to_tensor(padding_mask, tf.int32)
    max_new_tokens = tf.convert_to_tensor(max_new_tokens, tf.int32)
    if not buckets:
        return token_ids, padding_mask, max_new_tokens
    width = tf.shape(token_ids)[1]
    extra = round_up(width, PROMPT_BUCKET) - width
    token_ids = tf.pad(token_ids, [[0, 0], [extra, 0]])
    padding_mask = tf.pad(padding_mask, [[0, 0], [extra, 0]])
    return token_ids, padding_mask, round_up(max_new_tokens, NEW_TOKENS_BUCKET)


@dataclasses.dataclass(frozen=True)
class Setting:
    """Everything a compiled loop depends on (the key of `compiled_functions`)."""
    sampler: object  # a Sampler or a BeamSearch
    processing: Processing
    ends: tuple      # end and stop token ids: a row stops at any (not returned)
    fill: int        # the id written after a row stopped
    pad: int         # the id of prompt padding in the sequence the processors read
    stop: StopStrings | None
    jit_compile: bool

    def key(self) -> tuple:
        return (self.sampler.key(), self.processing, self.ends, self.fill, self.pad,
                None if self.stop is None else self.stop.key(), self.jit_compile)


def isin(tokens, ids):
    if not ids:
        return tf.zeros(tf.shape(tokens), tf.bool)
    return tf.reduce_any(tf.equal(tokens[..., None], tf.constant(list(ids), tf.int32)),
                         axis=-1)


def start_state(lm, setting, token_ids, padding_mask, capacity, rows_per_prompt=1):
    """The prompt's pass and the state every loop starts from (rows repeated
    `rows_per_prompt` times, beam search's num_beams)."""
    if not isinstance(rows_per_prompt, int) or rows_per_prompt > 1:  # a tensor: per call
        token_ids = tf.repeat(token_ids, rows_per_prompt, axis=0)
        padding_mask = tf.repeat(padding_mask, rows_per_prompt, axis=0)
    if lm.is_encoder_decoder:  # the prompts are the encoder's input
        logits, cache, token_ids = lm.generation_start(token_ids, padding_mask, capacity)
        padding_mask = tf.ones_like(token_ids)  # the decoder's own prompt (start token)
        rows, width = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
        key_mask = tf.ones([rows, width + capacity], tf.int32)
    else:
        rows, width = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
        cache = lm.generation_cache(rows, width + capacity)
        key_mask = tf.concat([padding_mask, tf.ones([rows, capacity], tf.int32)], 1)
        logits, cache = lm.generation_step(token_ids, positions_from_mask(padding_mask),
                                           key_mask, cache, 0)
    state = {"logits": logits, "cache": cache, "width": width}
    processing = setting.processing
    if processing.needs_sequence or isinstance(setting.sampler, BeamSearch):
        prompt = tf.where(padding_mask > 0, token_ids, setting.pad)
        state["seq"] = tf.concat([prompt, tf.fill([rows, capacity], setting.fill)], 1)
    if processing.repetition_penalty:
        real = tf.where(padding_mask > 0, token_ids, -1)
        state["present"] = mark_present(tf.zeros([rows, lm.vocab_size], tf.int32), real)
    if setting.stop is not None:
        state["tail"] = setting.stop.empty(rows)
    return state, key_mask, tf.reduce_sum(padding_mask, axis=1)


def loop_shapes(state):
    return tf.nest.map_structure(lambda x: tf.TensorShape([None] * x.shape.rank), state)
