"""Samplers: how a step's token is chosen from its processed scores (greedy, top-k,
top-p, each row its own settings), the uniform draws they read, and the beam search
settings (`BeamSearch`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

SAMPLERS = ("greedy", "top_k", "top_p", "beam")


EARLY_STOPPING = (True, False, "never")


def check_settings(sampler: str, temperature: float, top_k, top_p) -> None:
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler={sampler!r}: choose from {SAMPLERS}")
    if not temperature >= 0:
        raise ValueError(f"temperature={temperature}: must be 0 (greedy) or more")
    if sampler == "top_k" and (top_k is None or int(top_k) < 1):
        raise ValueError(f"sampler='top_k' needs top_k >= 1 (got {top_k})")
    if sampler == "top_p" and (top_p is None or not 0 < float(top_p) <= 1):
        raise ValueError(f"sampler='top_p' needs 0 < top_p <= 1 (got {top_p})")


def _shift(x, n: int):
    """Logical right shift of int32 bits (TensorFlow's is arithmetic for signed ints)."""
    return tf.bitwise.bitwise_and(tf.bitwise.right_shift(x, n), (1 << (32 - n)) - 1)


def _mix(x):
    """MurmurHash3's 32-bit finalizer on int32 bits (multiplication wraps)."""
    x = tf.bitwise.bitwise_xor(x, _shift(x, 16)) * tf.constant(-2048144789, tf.int32)
    x = tf.bitwise.bitwise_xor(x, _shift(x, 13)) * tf.constant(-1028477387, tf.int32)
    return tf.bitwise.bitwise_xor(x, _shift(x, 16))


def uniform(seeds, index, step):
    """float32 [B] in (0, 1), one number per row, from its int32 [B, 2] seed, the int32
    [B] index of its sequence among its prompt's, and the int32 step, by integer
    hashing. TensorFlow's stateless random ops draw other numbers under XLA than
    without it; int32 arithmetic is the same on both."""
    seeds = tf.convert_to_tensor(seeds, tf.int32)
    x = _mix(tf.convert_to_tensor(step, tf.int32) + tf.constant(0x632BE5AB, tf.int32))
    x = _mix(tf.bitwise.bitwise_xor(tf.convert_to_tensor(index, tf.int32), x))
    x = _mix(tf.bitwise.bitwise_xor(seeds[:, 0], x))
    x = _mix(tf.bitwise.bitwise_xor(seeds[:, 1], x))
    return (tf.cast(_shift(x, 8), tf.float32) + 0.5) * (1.0 / (1 << 24))


def _categorical(logits, u):
    """One draw per row of softmax(logits) [B, n] whose columns are sorted best first,
    by the inverse CDF at u [B] (-inf columns, at the end, are never drawn)."""
    probs = tf.nn.softmax(logits, axis=-1)
    cdf = tf.cumsum(probs, axis=-1)
    u = u * cdf[:, -1]
    pick = tf.reduce_sum(tf.cast(cdf <= u[:, None], tf.int32), axis=-1)
    last = tf.reduce_sum(tf.cast(probs > 0, tf.int32), axis=-1) - 1
    return tf.maximum(tf.minimum(pick, last), 0)


def _log_prob(scores, chosen_score):
    """log softmax(scores)[chosen] from the chosen column's score."""
    return chosen_score - tf.reduce_logsumexp(scores, axis=-1)


def _draw(ranked, ids, u):
    """A draw `u` [B] from softmax(ranked) [B, R] (-inf: left out): the drawn column's
    token id (`ids` [B, R]) and its log-probability."""
    pick = _categorical(ranked, u)
    return (tf.gather(ids, pick, batch_dims=1),
            _log_prob(ranked, tf.gather(ranked, pick, batch_dims=1)))


class Sampler:
    """Picks the next token: `sampler(scores [B, V] float32, u [B] uniform draws) ->
    (int32 ids [B], float32 log-probabilities [B] of the ids under the distribution
    sampled)`. `key()` names the setting (one compiled loop per model and key)."""

    def __call__(self, scores, u):
        raise NotImplementedError

    def key(self) -> tuple:
        return (type(self).__name__,)


class GreedySampler(Sampler):
    """The most likely token."""

    def __call__(self, scores, u):
        token = tf.argmax(scores, axis=-1, output_type=tf.int32)
        return token, _log_prob(scores, tf.reduce_max(scores, axis=-1))


class TopKSampler(Sampler):
    """Sampled among the k most likely tokens after dividing the logits by
    `temperature` (Fan et al., 2018)."""

    def __init__(self, k: int, temperature: float = 1.0):
        self.k, self.temperature = int(k), float(temperature)

    def __call__(self, scores, u):
        scores = scores / self.temperature
        k = min(self.k, scores.shape[-1]) if scores.shape[-1] else self.k
        values, indices = tf.math.top_k(scores, k=k)  # (B, k), best first
        return _draw(values, indices, u)

    def key(self) -> tuple:
        return ("top_k", self.k, self.temperature)


class TopPSampler(Sampler):
    """Sampled among the fewest most likely tokens whose probabilities sum to at least
    p (nucleus sampling, Holtzman et al., 2020), after dividing the logits by
    `temperature`; the token that crosses p is kept, and so is always the best one."""

    def __init__(self, p: float, temperature: float = 1.0):
        self.p, self.temperature = float(p), float(temperature)

    def __call__(self, scores, u):
        scores = scores / self.temperature
        order = tf.argsort(scores, axis=-1, direction="DESCENDING", stable=True)
        sorted_scores = tf.gather(scores, order, batch_dims=1)
        probs = tf.nn.softmax(sorted_scores, axis=-1)
        before = tf.cumsum(probs, axis=-1, exclusive=True)
        keep = before < self.p
        keep = tf.concat([tf.ones_like(keep[:, :1]), keep[:, 1:]], axis=-1)  # the best
        sorted_scores = tf.where(keep, sorted_scores, tf.constant(-np.inf, scores.dtype))
        return _draw(sorted_scores, order, u)

    def key(self) -> tuple:
        return ("top_p", self.p, self.temperature)


class RowSampler(Sampler):
    """Each row with its own settings, given at run time (the per-request signature of
    the generate export; `generate` with lists): `temperature` [R] (0: greedy),
    `top_k` [R] (0: off), `top_p` [R] (1.0: off), applied in transformers' order
    (temperature, top-k, then top-p on what top-k kept). One compiled loop serves
    every mix of settings; a batch of greedy rows skips the sort."""
    per_row = True

    def __call__(self, scores, u, rows=None):
        temperature, top_k, top_p = rows["temperature"], rows["top_k"], rows["top_p"]
        greedy = temperature <= 0
        best = tf.argmax(scores, axis=-1, output_type=tf.int32)
        best_lp = _log_prob(scores, tf.reduce_max(scores, axis=-1))

        def sampled():
            scaled = scores / tf.where(greedy, 1.0, temperature)[:, None]
            order = tf.argsort(scaled, axis=-1, direction="DESCENDING", stable=True)
            ranked = tf.gather(scaled, order, batch_dims=1)
            vocab = tf.shape(scores)[1]
            k = tf.where(top_k > 0, tf.minimum(top_k, vocab), vocab)
            ranks = tf.range(vocab)[None, :]
            ranked = tf.where(ranks < k[:, None], ranked, tf.constant(-np.inf, ranked.dtype))
            before = tf.cumsum(tf.nn.softmax(ranked, axis=-1), axis=-1, exclusive=True)
            keep = tf.logical_or(before < top_p[:, None], ranks == 0)
            ranked = tf.where(keep, ranked, tf.constant(-np.inf, ranked.dtype))
            token, log_prob = _draw(ranked, order, u)
            return tf.where(greedy, best, token), tf.where(greedy, best_lp, log_prob)

        return tf.cond(tf.reduce_all(greedy), lambda: (best, best_lp), sampled)

    def key(self) -> tuple:
        return ("per_row",)


@dataclasses.dataclass(frozen=True)
class BeamSearch:
    """Beam search as `transformers`' `generate(num_beams=...)` (see the module
    docstring). Not a `Sampler`: it keeps num_beams rows per prompt. `num_beams=None`:
    given with each call (`decode(..., num_beams=k)`, a tensor: one loop for every
    width, as the `generate` export's per-request beams; not under XLA)."""
    num_beams: int | None = 4
    length_penalty: float = 1.0
    early_stopping: bool | str = False

    def __post_init__(self):
        if self.num_beams is not None and int(self.num_beams) < 1:
            raise ValueError(f"num_beams={self.num_beams}: must be at least 1")
        if self.early_stopping not in EARLY_STOPPING:
            raise ValueError(f"early_stopping={self.early_stopping!r}: choose from "
                             f"{EARLY_STOPPING}")

    def key(self) -> tuple:
        return ("beam", None if self.num_beams is None else int(self.num_beams),
                float(self.length_penalty), self.early_stopping)


def get_sampler(sampler, temperature: float = 1.0, top_k=None, top_p=None,
                vocab_size: int | None = None, num_beams: int = 4,
                length_penalty: float = 1.0, early_stopping=False):
    """A `Sampler` (or `BeamSearch`) from `generate`'s arguments (either passes through).
    `top_k` past the vocabulary samples from all of it (as transformers)."""
    if isinstance(sampler, (Sampler, BeamSearch)):
        return sampler
    check_settings(sampler, temperature, top_k, top_p)
    if sampler == "greedy" or (sampler != "beam" and temperature == 0):  # 0: greedy
        return GreedySampler()
    if sampler == "beam":
        return BeamSearch(int(num_beams), float(length_penalty), early_stopping)
    if sampler == "top_k":
        k = int(top_k) if vocab_size is None else min(int(top_k), int(vocab_size))
        return TopKSampler(k, temperature)
    return TopPSampler(float(top_p), temperature)
