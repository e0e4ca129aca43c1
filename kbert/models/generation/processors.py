"""Logits processors, applied before the sampler in transformers' order: repetition
penalty, no-repeat n-grams, min_new_tokens and the forced end token."""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Processing:
    """Which logits processors a compiled loop applies (their values are per-row
    tensors at run time: one compiled loop serves every penalty and minimum)."""
    repetition_penalty: bool = False
    no_repeat_ngram_size: int = 0  # the size, or with ngram_per_row the largest size
    min_new_tokens: bool = False
    ngram_per_row: bool = False
    forced_end: int | None = None  # transformers' forced_eos_token_id

    @classmethod
    def of(cls, repetition_penalty=1.0, no_repeat_ngram_size=0, min_new_tokens=0,
           forced_end=None):
        penalties = np.atleast_1d(np.asarray(repetition_penalty, np.float64))
        if not np.all(penalties > 0):
            raise ValueError(f"repetition_penalty={repetition_penalty}: must be more than 0")
        sizes = np.atleast_1d(np.asarray(no_repeat_ngram_size or 0))
        if np.any(sizes < 0):
            raise ValueError(f"no_repeat_ngram_size={no_repeat_ngram_size}: must be >= 0")
        minimum = np.atleast_1d(np.asarray(min_new_tokens or 0))
        if np.any(minimum < 0):
            raise ValueError(f"min_new_tokens={min_new_tokens}: must be >= 0")
        per_row = len(set(sizes.tolist())) > 1
        return cls(bool(np.any(penalties != 1.0)), int(sizes.max()),
                   bool(np.any(minimum > 0)), per_row,
                   None if forced_end is None else int(forced_end))

    @property
    def needs_sequence(self) -> bool:
        return self.no_repeat_ngram_size > 0

    def processors(self) -> list:
        """The processors this setting applies, in transformers' order."""
        out = []
        if self.repetition_penalty:
            out.append(RepetitionPenalty())
        if self.no_repeat_ngram_size:
            out.append(NoRepeatNGram(self.no_repeat_ngram_size, self.ngram_per_row))
        if self.min_new_tokens:
            out.append(MinNewTokens())
        if self.forced_end is not None:
            out.append(ForcedEnd(self.forced_end))
        return out

    def apply(self, scores, t, state, penalty, min_new, ends, ngram=None, last=None):
        """scores [R, V] at step t -> the processed scores. `state` holds `seq` [R, W]
        (the tokens so far, prompt included, `length` = prompt width + t of them) and
        `present` [R, V] (tokens seen); `penalty` [R] float32, `min_new` [R] int32,
        `ngram` [R] int32 (the sizes, with `ngram_per_row`); `ends` the end and stop
        token ids; `last` [R] bool: the row's last step."""
        step = Step(t, state, penalty, min_new, tuple(ends), ngram, last)
        for processor in self.processors():
            scores = processor(scores, step)
        return scores


@dataclasses.dataclass(frozen=True)
class Step:
    """What a processor reads besides the scores: the step `t`, the loop's `state`
    (`seq`, `width`, `present`), each row's `penalty`, `min_new` and `ngram` size, the
    end and stop ids `ends`, and `last` [R] bool (the row's last step)."""
    t: object
    state: dict
    penalty: object
    min_new: object
    ends: tuple
    ngram: object = None
    last: object = None


class RepetitionPenalty:
    """CTRL's penalty (transformers' RepetitionPenaltyLogitsProcessor): the score of a
    token already seen is divided by the row's penalty if positive, multiplied if
    negative."""

    def __call__(self, scores, step):
        p = step.penalty[:, None]
        penalized = tf.where(scores < 0, scores * p, scores / p)
        return tf.where(step.state["present"] > 0, penalized, scores)


@dataclasses.dataclass(frozen=True)
class NoRepeatNGram:
    """A token that would repeat an n-gram of the sequence gets -inf (transformers'
    NoRepeatNGramLogitsProcessor); `per_row`: each row its size (up to `size`), one
    pass per size."""
    size: int
    per_row: bool = False

    def __call__(self, scores, step):
        length = step.state["width"] + step.t
        if not self.per_row:
            return _ban_repeated_ngrams(scores, step.state["seq"], length, self.size)
        for n in range(1, self.size + 1):
            banned = _ban_repeated_ngrams(scores, step.state["seq"], length, n)
            scores = tf.where(tf.equal(step.ngram, n)[:, None], banned, scores)
        return scores


class MinNewTokens:
    """The end and stop tokens get -inf before a row's `min_new` new tokens
    (transformers' MinNewTokensLengthLogitsProcessor)."""

    def __call__(self, scores, step):
        if not step.ends:
            return scores
        vocab = tf.shape(scores)[1]
        is_end = tf.reduce_any(tf.equal(tf.range(vocab)[None, :],
                                        tf.constant(list(step.ends), tf.int32)[:, None]),
                               axis=0)
        early = (step.t < step.min_new)[:, None]
        return tf.where(tf.logical_and(early, is_end[None, :]),
                        tf.constant(-np.inf, scores.dtype), scores)


@dataclasses.dataclass(frozen=True)
class ForcedEnd:
    """At a row's last step `token` is the only one left: score 0, every other -inf
    (transformers' ForcedEOSTokenLogitsProcessor)."""
    token: int

    def __call__(self, scores, step):
        if step.last is None:
            return scores
        vocab = tf.shape(scores)[1]
        forced = tf.where(tf.equal(tf.range(vocab), self.token)[None, :],
                          tf.constant(0, scores.dtype), tf.constant(-np.inf, scores.dtype))
        return tf.where(step.last[:, None], forced, scores)


def forced_end_of(lm, forced_eos_token_id=-1):
    """The token forced at a row's last step: `forced_eos_token_id` (transformers'
    argument; None: none), or with -1 the model's own (`lm.forced_end_token_id`: BART's
    config says `forced_eos_token_id`, transformers' default for BART)."""
    if forced_eos_token_id == -1:
        return lm.forced_end_token_id
    if forced_eos_token_id is not None and not 0 <= int(forced_eos_token_id) < lm.vocab_size:
        raise ValueError(f"forced_eos_token_id={forced_eos_token_id} is outside the "
                         f"vocabulary (0..{lm.vocab_size - 1})")
    return forced_eos_token_id


def _ban_repeated_ngrams(scores, seq, length, n: int):
    """-inf for every token that would complete an n-gram already in seq[:, :length]
    (transformers' NoRepeatNGramLogitsProcessor: the last n - 1 tokens matched against
    every earlier window)."""
    width = tf.shape(seq)[1]
    windows = tf.maximum(width - n + 1, 0)
    starts = tf.range(windows)
    match = tf.broadcast_to(starts[None, :] <= length - n,  # windows that end before
                            tf.shape(seq[:, :windows]))        # `length`
    for j in range(n - 1):
        at = tf.maximum(length - n + 1 + j, 0)
        match = tf.logical_and(match, tf.equal(seq[:, j:j + windows],
                                               tf.gather(seq, at[None], axis=1)))
    banned = seq[:, n - 1:n - 1 + windows]
    rows = tf.broadcast_to(tf.range(tf.shape(seq)[0])[:, None], tf.shape(banned))
    index = tf.stack([rows, tf.where(match, banned, 0)], axis=-1)
    hit = tf.tensor_scatter_nd_max(tf.zeros(tf.shape(scores), tf.int32), index,
                                   tf.cast(match, tf.int32))
    return tf.where(hit > 0, tf.constant(-np.inf, scores.dtype), scores)


def mark_present(present, tokens):
    """present [R, V] int32 with each row's token [R] (or tokens [R, T]) set to 1."""
    tokens = tf.reshape(tokens, [tf.shape(present)[0], -1])
    rows = tf.broadcast_to(tf.range(tf.shape(tokens)[0])[:, None], tf.shape(tokens))
    index = tf.stack([rows, tf.maximum(tokens, 0)], axis=-1)
    return tf.tensor_scatter_nd_max(present, index, tf.cast(tokens >= 0, tf.int32))
