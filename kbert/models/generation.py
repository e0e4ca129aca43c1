"""Text generation for any causal LM, with a preallocated key/value cache, compiled once
and reused.

A causal LM offers the generation protocol (GPT's `GPTLanguageModel` does):
    end_token_id, max_positions, vocab_size   (ints; end_token_id may be None)
    generation_cache(batch, length)           -> an empty key/value cache
    generation_step(token_ids, positions, key_mask, cache, index)
                                              -> (float32 logits [B, V] of the last
                                                  position, the updated cache)
    reorder_generation_cache(cache, rows)     (optional) -> the cache of rows `rows`
                                                  [B'] of the batch; the default
                                                  gathers every cache tensor on its
                                                  first axis, read as batch-major
                                                  ([B * anything, ...]).
An encoder-decoder (T5, BART) fits the same loop with one more method:
    generation_start(token_ids, padding_mask, capacity)
                                              -> (logits [B, V] after the decoder's
                                                  start, the cache, the decoder's
                                                  prompt [B, P'] (its start token))
runs the encoder once on the prompts (the encoder's input) and holds its projected
keys and values (and its padding) in the cache beside the decoder's self-attention
cache; `generation_step` then feeds the decoder, at decoder positions. The processors
read the decoder's tokens (start token and continuation), as transformers' do for
encoder-decoders.

Each step, in the order of `transformers`' `generate` (4.5x-5.x):
    1. logits processors (`Processing`): `repetition_penalty` (CTRL's rule: a score of
       a token already in the prompt or the continuation is divided by the penalty if
       positive, multiplied if negative; prompt padding is not counted, as
       transformers >= 5 does), `no_repeat_ngram_size` (a token that would repeat an
       n-gram of the sequence gets -inf; the sequence includes a left-padded batch's
       padding as the end token, as transformers reads `input_ids` with
       pad_token_id = eos), `min_new_tokens` (the end and stop tokens get -inf before
       that many new tokens);
    2. the sampler (`Sampler`): greedy (the most likely token); top_k (sampled among
       the k most likely, Fan et al., 2018); top_p (nucleus sampling, Holtzman et al.,
       2020: the fewest most likely tokens whose probabilities sum to at least p; the
       token that crosses p is kept, and so is always the most likely one); temperature
       divides the logits before top_k / top_p sampling (0 is greedy, kbert's own
       convention); or beam search
       (`BeamSearch`, transformers' algorithm: log-probabilities, processors, 2 x
       num_beams candidates a step, hypotheses finished at the end token or the last
       step, scores divided by length ** length_penalty, `early_stopping` True, False
       or "never" with transformers' finishing rules).
Every step also gives the chosen token's log-probability under the processed
distribution (transformers' `compute_transition_scores(..., normalize_logits=True)` for
greedy and sampling, its beam scores for beam search).

Seeds. A row's random draws depend only on its seed, the index k of the sequence among
those returned for its prompt (`num_return_sequences`), and the step: never on its
position in the batch or on the other rows (so server-side batching cannot change a
text). The uniform numbers come from integer hashing of (seed, k, step) (`uniform`),
which XLA and TensorFlow's kernels compute alike, so a seed gives the same text with
XLA (`generate`'s default) and without it (the generate SavedModel). The token drawn is
the first whose cumulative probability exceeds the number; the two paths round the
logits differently in the last bits, so a draw that falls within that rounding of a
boundary (about one in a million) can still differ.

Stopping. A row stops at the model's end token, at any token id in `stop`, and (with
a tokenizer that gives `token_bytes`, GPT-2's byte-level BPE) as soon as its
continuation's bytes contain one of the `stop` strings: the loop keeps each row's last
bytes and matches them in-graph, so the row stops early. The text is then cut before
the first stop string (`generate_text`); the end and stop tokens are not returned.
With other tokenizers (GPT-1's) stop strings only cut the text.

Shapes. The prompts are left-aligned to the right (left padding), so that every row's
next token is written at the same cache index; positions count from each row's first
real token, and the padding is masked out of attention (as Hugging Face's `generate`
does for decoder-only models). One `tf.function` per decoding setting, with dynamic
batch, prompt and continuation lengths in its signature, serves every later call. With
XLA (the default, see `_use_xla`), XLA compiles once per batch size and per shape
bucket: the prompt is left-padded to a multiple of `PROMPT_BUCKET` tokens, the cache
holds a multiple of `NEW_TOKENS_BUCKET` new tokens, and the batch is padded with copies
of its last row to a power of two up to `BATCH_BUCKET_CAP` rows (then a multiple of it;
`batch_bucket`), so that other batch sizes reuse the compiled loops too. The cost: up to
twice the rows' work below the cap (5 prompts decode as 8 rows; 1, 2, 4, 8 ... as
themselves), and at most 63 extra rows above it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random

import numpy as np
import tensorflow as tf
from keras import ops

from kbert.layers.dense import separate_bias_add
from kbert.layers.masks import positions_from_mask

logger = logging.getLogger(__name__)

SAMPLERS = ("greedy", "top_k", "top_p", "beam")
EARLY_STOPPING = (True, False, "never")
_NEG = -1.0e9  # transformers' "very large negative" score in beam search


def check_settings(sampler: str, temperature: float, top_k, top_p) -> None:
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler={sampler!r}: choose from {SAMPLERS}")
    if not temperature >= 0:
        raise ValueError(f"temperature={temperature}: must be 0 (greedy) or more")
    if sampler == "top_k" and (top_k is None or int(top_k) < 1):
        raise ValueError(f"sampler='top_k' needs top_k >= 1 (got {top_k})")
    if sampler == "top_p" and (top_p is None or not 0 < float(top_p) <= 1):
        raise ValueError(f"sampler='top_p' needs 0 < top_p <= 1 (got {top_p})")


# ------------------------------------------------------------------------ random draws
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


# ----------------------------------------------------------------------------- samplers
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
        pick = _categorical(values, u)
        return (tf.gather(indices, pick, batch_dims=1),
                _log_prob(values, tf.gather(values, pick, batch_dims=1)))

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
        pick = _categorical(sorted_scores, u)
        return (tf.gather(order, pick, batch_dims=1),
                _log_prob(sorted_scores, tf.gather(sorted_scores, pick, batch_dims=1)))

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
            pick = _categorical(ranked, u)
            return (tf.where(greedy, best, tf.gather(order, pick, batch_dims=1)),
                    tf.where(greedy, best_lp,
                             _log_prob(ranked, tf.gather(ranked, pick, batch_dims=1))))

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


def choose(logits, sampler: str, temperature: float, top_k, top_p, u):
    """float32 logits [B, V] -> int32 token ids [B] (`get_sampler`'s sampler) at the
    uniform draws u [B]."""
    return get_sampler(sampler, temperature, top_k, top_p)(logits, u)[0]


# ----------------------------------------------------------------------- processors
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

    def apply(self, scores, t, state, penalty, min_new, ends, ngram=None, last=None):
        """scores [R, V] at step t -> the processed scores. `state` holds `seq` [R, W]
        (the tokens so far, prompt included, `length` = prompt width + t of them) and
        `present` [R, V] (tokens seen); `penalty` [R] float32, `min_new` [R] int32,
        `ngram` [R] int32 (the sizes, with `ngram_per_row`); `ends` the end and stop
        token ids; `last` [R] bool: the row's last step (where `forced_end` is the only
        token left: score 0, every other -inf, as transformers'
        ForcedEOSTokenLogitsProcessor)."""
        if self.repetition_penalty:
            p = penalty[:, None]
            penalized = tf.where(scores < 0, scores * p, scores / p)
            scores = tf.where(state["present"] > 0, penalized, scores)
        if self.no_repeat_ngram_size and not self.ngram_per_row:
            scores = _ban_repeated_ngrams(scores, state["seq"], state["width"] + t,
                                          self.no_repeat_ngram_size)
        elif self.no_repeat_ngram_size:  # each row its size: one pass per size
            for n in range(1, self.no_repeat_ngram_size + 1):
                banned = _ban_repeated_ngrams(scores, state["seq"], state["width"] + t, n)
                scores = tf.where(tf.equal(ngram, n)[:, None], banned, scores)
        if self.min_new_tokens and ends:
            vocab = tf.shape(scores)[1]
            is_end = tf.reduce_any(tf.equal(tf.range(vocab)[None, :],
                                            tf.constant(list(ends), tf.int32)[:, None]),
                                   axis=0)
            early = (t < min_new)[:, None]
            scores = tf.where(tf.logical_and(early, is_end[None, :]),
                              tf.constant(-np.inf, scores.dtype), scores)
        if self.forced_end is not None and last is not None:
            vocab = tf.shape(scores)[1]
            forced = tf.where(tf.equal(tf.range(vocab), self.forced_end)[None, :],
                              tf.constant(0, scores.dtype),
                              tf.constant(-np.inf, scores.dtype))
            scores = tf.where(last[:, None], forced, scores)
        return scores


def forced_end_of(lm, forced_eos_token_id=-1):
    """The token forced at a row's last step: `forced_eos_token_id` (transformers'
    argument; None: none), or with -1 the model's own (`lm.forced_end_token_id`: BART's
    config says `forced_eos_token_id`, transformers' default for BART)."""
    if forced_eos_token_id == -1:
        return getattr(lm, "forced_end_token_id", None)
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


def _mark_present(present, tokens):
    """present [R, V] int32 with each row's token [R] (or tokens [R, T]) set to 1."""
    tokens = tf.reshape(tokens, [tf.shape(present)[0], -1])
    rows = tf.broadcast_to(tf.range(tf.shape(tokens)[0])[:, None], tf.shape(tokens))
    index = tf.stack([rows, tf.maximum(tokens, 0)], axis=-1)
    return tf.tensor_scatter_nd_max(present, index, tf.cast(tokens >= 0, tf.int32))


# ------------------------------------------------------------------------ stop strings
class StopStrings:
    """In-graph matching of stop strings on the bytes of each row's continuation: the
    last `width` bytes of each row are kept; a row has stopped when one of the strings
    occurs in them."""

    def __init__(self, strings, token_bytes):
        self.strings = tuple(s.encode("utf-8") if isinstance(s, str) else bytes(s)
                             for s in strings)
        if not all(self.strings):
            raise ValueError("stop: an empty string would stop at once")
        longest = max(map(len, token_bytes))
        table = np.full((len(token_bytes), max(longest, 1)), -1, np.int32)
        for i, b in enumerate(token_bytes):
            table[i, :len(b)] = list(b)
        self.table, self.lengths = table, np.array([len(b) for b in token_bytes], np.int32)
        self.width = max(map(len, self.strings)) + table.shape[1]

    def key(self) -> tuple:
        return self.strings

    def empty(self, rows):
        return tf.fill([rows, self.width], -2)

    def update(self, tail, token):
        """(tail [R, width], tokens [R]) -> (the new tail, [R] bool: a string occurs)."""
        new = tf.gather(tf.constant(self.table), token)
        length = tf.gather(tf.constant(self.lengths), token)
        joined = tf.concat([tail, new], axis=1)
        tail = tf.gather(joined, length[:, None] + tf.range(self.width)[None, :],
                         batch_dims=1)
        found = tf.zeros([tf.shape(tail)[0]], tf.bool)
        for s in self.strings:
            m = len(s)
            spots = self.width - m + 1
            hit = tf.ones([tf.shape(tail)[0], spots], tf.bool)
            for j, byte in enumerate(s):
                hit = tf.logical_and(hit, tf.equal(tail[:, j:j + spots], byte))
            found = tf.logical_or(found, tf.reduce_any(hit, axis=1))
        return tail, found


def cut_at_stop(text: str, strings) -> tuple[str, bool]:
    """The text before the first of the stop strings, and whether one occurred."""
    spots = [text.find(s) for s in strings if isinstance(s, str)]
    spots = [i for i in spots if i >= 0]
    return (text[:min(spots)], True) if spots else (text, False)


# ------------------------------------------------------------------------ shapes
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


def _use_xla() -> bool:
    """XLA for the decoding loop, on every device. On CPUs too: a decoding step is about
    fifty small ops per layer around its matrix products, and XLA fuses them (GPT-2
    124M on a 2-core CPU, 128 new tokens: 1.2x the plain graph's tokens/s at batch 1,
    1.5x at batch 8; docs/benchmarks.md). Compiling takes a few seconds per batch size
    and shape bucket."""
    return True


def _round_up(n, multiple):
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
    extra = _round_up(width, PROMPT_BUCKET) - width
    token_ids = tf.pad(token_ids, [[0, 0], [extra, 0]])
    padding_mask = tf.pad(padding_mask, [[0, 0], [extra, 0]])
    return token_ids, padding_mask, _round_up(max_new_tokens, NEW_TOKENS_BUCKET)


def reorder_cache(lm, cache, rows):
    """The cache of batch rows `rows` [B'] (beam search): the model's
    `reorder_generation_cache`, else every tensor gathered on its first axis read as
    [batch, ...] (GPT's [B * heads, S, D] caches are batch-major)."""
    if hasattr(lm, "reorder_generation_cache"):
        return lm.reorder_generation_cache(cache, rows)
    batch = tf.shape(rows)[0]

    def gather(x):
        shape = tf.shape(x)
        grouped = tf.reshape(x, tf.concat([[batch, -1], shape[1:]], 0))
        return tf.reshape(tf.gather(grouped, rows), shape)

    return tf.nest.map_structure(gather, cache)


# ----------------------------------------------------------------------- the loops
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


def _isin(tokens, ids):
    if not ids:
        return tf.zeros(tf.shape(tokens), tf.bool)
    return tf.reduce_any(tf.equal(tokens[..., None], tf.constant(list(ids), tf.int32)),
                         axis=-1)


def _start(lm, setting, token_ids, padding_mask, capacity, rows_per_prompt=1):
    """The prompt's pass and the state every loop starts from (rows repeated
    `rows_per_prompt` times, beam search's num_beams)."""
    if not isinstance(rows_per_prompt, int) or rows_per_prompt > 1:  # a tensor: per call
        token_ids = tf.repeat(token_ids, rows_per_prompt, axis=0)
        padding_mask = tf.repeat(padding_mask, rows_per_prompt, axis=0)
    if hasattr(lm, "generation_start"):  # an encoder-decoder: the prompts are its input
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
        state["present"] = _mark_present(tf.zeros([rows, lm.vocab_size], tf.int32), real)
    if setting.stop is not None:
        state["tail"] = setting.stop.empty(rows)
    return state, key_mask, tf.reduce_sum(padding_mask, axis=1)


def _loop_shapes(state):
    return tf.nest.map_structure(lambda x: tf.TensorShape([None] * x.shape.rank), state)


def _sample_step(lm, setting, state, t, const):
    """One step of greedy or sampled decoding: (state, t) -> state (`_sample_loop`'s
    body, and `stream`'s step)."""
    scores = setting.processing.apply(state["logits"], t, state, const["penalty"],
                                      const["min_new"], setting.ends, const["ngram"],
                                      last=t + 1 >= const["max_new"])
    u = uniform(const["seeds"], const["index"], t)
    if getattr(setting.sampler, "per_row", False):
        token, logprob = setting.sampler(scores, u, const)
    else:
        token, logprob = setting.sampler(scores, u)
    active = tf.logical_not(state["done"])
    hit = tf.logical_and(active, _isin(token, setting.ends))
    token = tf.where(active, token, setting.fill)
    state = dict(state)
    state["length"] = state["length"] + tf.cast(
        tf.logical_and(active, tf.logical_not(hit)), tf.int32)
    done = tf.logical_or(state["done"], hit)
    if setting.stop is not None:
        state["tail"], found = setting.stop.update(state["tail"], token)
        done = tf.logical_or(done, tf.logical_and(active, found))
    state["done"] = tf.logical_or(done, t + 1 >= const["max_new"])  # each row's budget
    state["out"] = ops.slice_update(state["out"], (0, t), token[:, None])
    state["logprobs"] = ops.slice_update(state["logprobs"], (0, t),
                                         tf.where(active, logprob, 0.0)[:, None])
    if "seq" in state:
        state["seq"] = ops.slice_update(state["seq"], (0, state["width"] + t), token[:, None])
    if "present" in state:
        state["present"] = _mark_present(state["present"], token)
    state["logits"], state["cache"] = lm.generation_step(
        token[:, None], (const["lengths"] + t)[:, None], const["key_mask"], state["cache"],
        state["width"] + t)
    return state


def _sample_start(lm, setting, token_ids, padding_mask, capacity, const):
    """The state and constants greedy and sampled decoding start from (the loop's and
    `stream`'s)."""
    state, key_mask, lengths = _start(lm, setting, token_ids, padding_mask, capacity)
    rows = tf.shape(token_ids)[0]
    state.update(done=tf.zeros([rows], tf.bool), length=tf.zeros([rows], tf.int32),
                 out=tf.fill([rows, capacity], setting.fill),
                 logprobs=tf.zeros([rows, capacity], tf.float32))
    return state, dict(const, key_mask=key_mask, lengths=lengths)


def _sample_loop(lm, setting, token_ids, padding_mask, max_new_tokens, capacity, const):
    state, const = _sample_start(lm, setting, token_ids, padding_mask, capacity, const)

    def cond(t, state):
        return tf.logical_and(t < max_new_tokens, tf.logical_not(tf.reduce_all(state["done"])))

    def body(t, state):
        return t + 1, _sample_step(lm, setting, state, t, const)

    _, state = tf.while_loop(cond, body, (tf.constant(0), state),
                             shape_invariants=(tf.TensorShape([]), _loop_shapes(state)))
    return {"token_ids": state["out"], "logprobs": state["logprobs"],
            "lengths": state["length"], "scores": tf.reduce_sum(state["logprobs"], axis=1)}


def _gather_beams(x, index):
    """x [B, M, ...] -> x [B, K, ...] at index [B, K]."""
    return tf.gather(x, index, batch_dims=1)


def _beam_loop(lm, setting, token_ids, padding_mask, max_new_tokens, capacity, const):
    """transformers' `_beam_search` (4.5x-5.x), step for step: see the module docstring."""
    beam = setting.sampler
    # num_beams: a Python int, or the call's (a scalar tensor) when the setting has None
    k = const["num_beams"] if beam.num_beams is None else beam.num_beams
    penalty_power = float(beam.length_penalty)
    batch = tf.shape(token_ids)[0]
    state, key_mask, lengths = _start(lm, setting, token_ids, padding_mask, capacity, k)
    vocab = lm.vocab_size
    width = state["width"]
    total = width + capacity
    keep = max(2, 1 + len(setting.ends)) * k
    top_mask = tf.range(keep) < k

    def unflat(x):
        return tf.reshape(x, tf.concat([[batch, k], tf.shape(x)[1:]], 0))

    def flat(x):
        return tf.reshape(x, tf.concat([[batch * k], tf.shape(x)[2:]], 0))

    seq = unflat(state.pop("seq"))  # (B, K, W)
    state.update(
        running=seq, running_scores=tf.tile(
            tf.where(tf.range(k) == 0, 0.0, _NEG)[None, :], [batch, 1]),
        running_lp=tf.zeros([batch, k, capacity], tf.float32),
        running_len=tf.zeros([batch, k], tf.int32),
        sequences=seq, beam_scores=tf.fill([batch, k], _NEG),
        sequence_lp=tf.zeros([batch, k, capacity], tf.float32),
        sequence_len=tf.zeros([batch, k], tf.int32),
        finished=tf.zeros([batch, k], tf.bool),
        unsatisfied=tf.ones([batch], tf.bool), hits=tf.zeros([batch, keep], tf.bool))
    penalty, min_new = const["penalty"], const["min_new"]

    def power(n):  # (n ** length_penalty) in double, then float32, as Python does it
        return tf.cast(tf.pow(tf.cast(n, tf.float64), penalty_power), tf.float32)

    def cond(t, s):
        improvable = tf.reduce_any(s["unsatisfied"])
        if beam.early_stopping is True:
            improvable = tf.logical_and(improvable,
                                        tf.logical_not(tf.reduce_all(s["finished"])))
        going = tf.logical_not(tf.reduce_all(s["hits"]))
        return tf.logical_and(tf.logical_and(t < max_new_tokens, improvable), going)

    def body(t, s):
        s = dict(s)
        cur = width + t
        view = {"seq": flat(s["running"]), "width": width, "present": s.get("present")}
        log_probs = tf.nn.log_softmax(s["logits"], axis=-1)
        log_probs = setting.processing.apply(
            log_probs, t, view, penalty, min_new, setting.ends, const["ngram"],
            last=tf.fill([tf.shape(log_probs)[0]], t + 1 >= max_new_tokens))  # (B*K, V)
        grouped = unflat(log_probs) + s["running_scores"][:, :, None]
        top_scores, top_index = tf.math.top_k(tf.reshape(grouped, [batch, k * vocab]), keep)
        parent, token = top_index // vocab, top_index % vocab  # (B, 2K)
        token_lp = tf.gather(tf.reshape(log_probs, [batch, k * vocab]), top_index,
                             batch_dims=1)
        cand = _gather_beams(s["running"], parent)
        cand = ops.slice_update(cand, (0, 0, cur), token[:, :, None])
        cand_lp = ops.slice_update(_gather_beams(s["running_lp"], parent), (0, 0, t),
                                   token_lp[:, :, None])
        hits = tf.logical_or(_isin(token, setting.ends),
                             tf.fill(tf.shape(token), t + 1 >= max_new_tokens))
        if setting.stop is not None:
            tails = _gather_beams(unflat(s["tail"]), parent)
            new_tails, found = setting.stop.update(tf.reshape(tails, [batch * keep, -1]),
                                                   tf.reshape(token, [-1]))
            hits = tf.logical_or(hits, tf.reshape(found, [batch, keep]))
        # the running beams of the next step: the best candidates that did not finish
        running_scores = top_scores + tf.cast(hits, tf.float32) * _NEG
        _, next_index = tf.math.top_k(running_scores, k)
        s["running"] = _gather_beams(cand, next_index)
        s["running_scores"] = _gather_beams(running_scores, next_index)
        s["running_lp"] = _gather_beams(cand_lp, next_index)
        chosen_parent = _gather_beams(parent, next_index)  # (B, K)
        # finished hypotheses: the best num_beams of the old and the new
        just = tf.logical_and(hits, top_mask[None, :])
        scores = top_scores / power(t + 1)
        if beam.early_stopping is True:
            full = tf.reduce_all(s["finished"], axis=1, keepdims=True)
            scores += tf.cast(full, tf.float32) * _NEG
        scores += tf.cast(tf.logical_not(s["unsatisfied"]), tf.float32)[:, None] * _NEG
        scores += tf.cast(tf.logical_not(just), tf.float32) * _NEG
        merged_scores = tf.concat([s["beam_scores"], scores], axis=1)
        _, best = tf.math.top_k(merged_scores, k)
        s["sequences"] = _gather_beams(tf.concat([s["sequences"], cand], 1), best)
        s["sequence_lp"] = _gather_beams(tf.concat([s["sequence_lp"], cand_lp], 1), best)
        new_len = tf.fill([batch, keep], t + 1)
        s["sequence_len"] = _gather_beams(tf.concat([s["sequence_len"], new_len], 1), best)
        s["beam_scores"] = _gather_beams(merged_scores, best)
        s["finished"] = _gather_beams(tf.concat([s["finished"], just], 1), best)
        s["hits"] = hits
        # the cache, the seen tokens and the stop-string bytes follow their beams
        rows = tf.reshape(chosen_parent + tf.range(batch)[:, None] * k, [-1])
        cache = reorder_cache(lm, s["cache"], rows)
        new_token = tf.reshape(_gather_beams(token, next_index), [-1])
        if "present" in s:
            s["present"] = _mark_present(tf.gather(s["present"], rows), new_token)
        if setting.stop is not None:
            tails = tf.reshape(new_tails, [batch, keep, -1])
            s["tail"] = flat(_gather_beams(tails, next_index))
        positions = lengths + t  # (B*K,)
        s["logits"], s["cache"] = lm.generation_step(new_token[:, None], positions[:, None],
                                                     key_mask, cache, cur)
        # can a running beam still beat the worst finished one?
        if beam.early_stopping == "never" and penalty_power > 0.0:
            hypothetical = power(max_new_tokens)
        else:
            hypothetical = power(t + 1)
        best_running = s["running_scores"][:, :1] / hypothetical
        worst = tf.where(s["finished"], tf.reduce_min(s["beam_scores"], 1, keepdims=True),
                         _NEG)
        s["unsatisfied"] = tf.logical_and(
            s["unsatisfied"], tf.reduce_any(best_running > worst, axis=1))
        return t + 1, s

    _, state = tf.while_loop(cond, body, (tf.constant(0), state),
                             shape_invariants=(tf.TensorShape([]), _loop_shapes(state)))
    new = state["sequences"][:, :, width:total]  # (B, K, C)
    length = state["sequence_len"]
    ended = tf.logical_and(
        tf.range(capacity)[None, None, :] == (length - 1)[:, :, None],
        _isin(new, setting.ends))
    kept = tf.range(capacity)[None, None, :] < length[:, :, None]
    # lengths without the end token; tokens after it are the fill id
    stops = tf.reduce_any(ended, axis=2)
    out = tf.where(tf.logical_and(kept, tf.logical_not(ended)), new, setting.fill)
    return {"token_ids": out, "logprobs": tf.where(kept, state["sequence_lp"], 0.0),
            "lengths": length - tf.cast(stops, tf.int32), "scores": state["beam_scores"]}


def _build(lm, setting: Setting):
    beam = isinstance(setting.sampler, BeamSearch)
    # On CPUs, XLA's fused one-vector product + bias reads the weights more slowly than
    # its product alone (see kbert.layers.dense; GPT-2 124M's block products: 23.3
    # against 19.5 ms a step, bench_gpt.py --only products). Not on GPUs, where the
    # fused add is free.
    split_bias = setting.jit_compile and not tf.config.list_logical_devices("GPU")

    @tf.function(input_signature=[
        tf.TensorSpec([None, None], tf.int32, name="token_ids"),
        tf.TensorSpec([None, None], tf.int32, name="padding_mask"),
        tf.TensorSpec([], tf.int32, name="max_new_tokens"),
        tf.TensorSpec([None, 2], tf.int32, name="seeds"),
        tf.TensorSpec([None], tf.int32, name="index"),
        tf.TensorSpec([None], tf.float32, name="repetition_penalty"),
        tf.TensorSpec([None], tf.int32, name="min_new_tokens"),
        tf.TensorSpec([], tf.int32, name="capacity"),
        {"max_new": tf.TensorSpec([None], tf.int32, name="row_max_new_tokens"),
         "ngram": tf.TensorSpec([None], tf.int32, name="no_repeat_ngram_size"),
         "temperature": tf.TensorSpec([None], tf.float32, name="temperature"),
         "top_k": tf.TensorSpec([None], tf.int32, name="top_k"),
         "top_p": tf.TensorSpec([None], tf.float32, name="top_p"),
         "num_beams": tf.TensorSpec([], tf.int32, name="num_beams")}], autograph=False,
        jit_compile=setting.jit_compile)
    def run(token_ids, padding_mask, max_new_tokens, seeds, index, penalty, min_new,
            capacity, rows):
        # `capacity` (>= max_new_tokens) sizes the cache and the output; only it, not
        # max_new_tokens, is a compile-time constant for XLA. `rows`: per-row settings
        # (each row's max_new_tokens, n-gram size and sampler settings).
        const = {"seeds": seeds, "index": index, "penalty": penalty, "min_new": min_new,
                 **rows}
        if beam:
            k = setting.sampler.num_beams
            k = rows["num_beams"] if k is None else k
            const = {name: tf.repeat(value, k, axis=0) if value.shape.rank else value
                     for name, value in const.items()}
        with separate_bias_add() if split_bias else contextlib.nullcontext():
            loop = _beam_loop if beam else _sample_loop
            return loop(lm, setting, token_ids, padding_mask, max_new_tokens, capacity,
                        const)

    def decode(token_ids, padding_mask, max_new_tokens, seeds=None, index=None,
               repetition_penalty=1.0, min_new_tokens=0, no_repeat_ngram_size=0,
               temperature=1.0, top_k=0, top_p=1.0, num_beams=1):
        """Left-padded prompts -> {token_ids [R, N], logprobs [R, N], lengths [R],
        scores [R]} (R = B, or B x num_beams with beam search, best first).
        `max_new_tokens`: a scalar or one per row (the loop runs to the largest); the
        other settings a scalar or one per row (the sampler's only with `RowSampler`,
        the n-gram sizes only with `Processing.ngram_per_row`); `num_beams` a scalar,
        read only by a `BeamSearch(num_beams=None)` setting (all rows one width)."""
        rows = tf.shape(token_ids)[0]

        def per_row(value, dtype):
            return tf.broadcast_to(tf.cast(value, dtype), [rows])

        row_max_new = per_row(max_new_tokens, tf.int32)
        max_new_tokens = tf.reduce_max(row_max_new)
        seeds = tf.zeros([rows, 2], tf.int32) if seeds is None else seeds
        index = tf.zeros([rows], tf.int32) if index is None else index
        settings = {"max_new": row_max_new, "ngram": per_row(no_repeat_ngram_size, tf.int32),
                    "temperature": per_row(temperature, tf.float32),
                    "top_k": per_row(top_k, tf.int32), "top_p": per_row(top_p, tf.float32),
                    "num_beams": tf.cast(num_beams, tf.int32)}
        token_ids, padding_mask, capacity = bucket(token_ids, padding_mask, max_new_tokens,
                                                   setting.jit_compile)
        out = run(token_ids, padding_mask, max_new_tokens, tf.cast(seeds, tf.int32),
                  tf.cast(index, tf.int32), per_row(repetition_penalty, tf.float32),
                  per_row(min_new_tokens, tf.int32), capacity, settings)
        out = dict(out)
        out["token_ids"] = out["token_ids"][..., :max_new_tokens]
        out["logprobs"] = out["logprobs"][..., :max_new_tokens]
        return out

    decode.compiled = run
    decode.setting = setting
    return decode


_FUNCTIONS_ATTRIBUTE = "_kbert_decoding_functions"


def compiled_functions(lm) -> dict:
    """The decoding functions built for `lm` so far, by `Setting.key()`.

    Kept on the model itself, so they go with it. (A table keyed weakly by the model,
    as before 2026-12-03, kept every model that had generated alive for the life of the
    process: its functions reference the model. A test worker at 9.3 GB held eleven of
    them after their tests.) Set past Keras' and TensorFlow's attribute tracking, so
    that neither saves them with the model."""
    functions = vars(lm).get(_FUNCTIONS_ATTRIBUTE)
    if functions is None:
        functions = {}
        object.__setattr__(lm, _FUNCTIONS_ATTRIBUTE, functions)
    return functions


def generate_function(lm, sampler="greedy", temperature=1.0, top_k=None, top_p=None,
                      end_token_id=None, jit_compile: bool | None = None, *,
                      num_beams: int = 4, length_penalty: float = 1.0,
                      early_stopping=False, processing: Processing = Processing(),
                      stop_ids=(), stop_strings=(), tokenizer=None):
    """The compiled decoding function for these settings (built once per model and
    setting): decode(token_ids [B, P] left-padded, padding_mask [B, P], max_new_tokens,
    seeds int32 [B, 2], index int32 [B], repetition_penalty [B], min_new_tokens [B]) ->
    a dict (see `_build`). Callable eagerly and inside a `tf.function`. `sampler`: a
    name (with its arguments) or a `Sampler` / `BeamSearch`; `jit_compile`: None is
    `_use_xla()`; `stop_strings` are matched in-graph when `tokenizer` gives
    `token_bytes` (else ignored here: `generate_text` cuts the text)."""
    chosen = get_sampler(sampler, temperature, top_k, top_p, vocab_size=lm.vocab_size,
                         num_beams=num_beams, length_penalty=length_penalty,
                         early_stopping=early_stopping)
    jit_compile = _use_xla() if jit_compile is None else bool(jit_compile)
    if isinstance(chosen, BeamSearch) and chosen.num_beams is None and jit_compile:
        raise ValueError("BeamSearch(num_beams=None): beams given per call need "
                         "jit_compile=False (XLA compiles one width)")
    ends = tuple(sorted({int(i) for i in stop_ids} |
                        ({int(end_token_id)} if end_token_id is not None else set())))
    fill = int(end_token_id) if end_token_id is not None else (ends[0] if ends else 0)
    stop = None
    strings = tuple(s for s in stop_strings if isinstance(s, str))
    if strings and tokenizer is not None and hasattr(tokenizer, "token_bytes"):
        stop = StopStrings(strings, tokenizer.token_bytes())
    setting = Setting(chosen, processing, ends, fill, fill, stop, jit_compile)
    functions = compiled_functions(lm)
    key = setting.key()
    if key not in functions:
        functions[key] = _build(lm, setting)
    return functions[key]


# ------------------------------------------------------------------------ seeds
def seed_pair(seed: int) -> list[int]:
    """An int seed -> its int32 [2] pair (the low and the high 31 bits)."""
    seed = int(seed)
    return [seed % (2 ** 31), (seed // (2 ** 31)) % (2 ** 31)]


def row_seeds(seed, rows: int) -> np.ndarray:
    """int32 [rows, 2]: one int for every row, a list of one per row, or None (a
    fresh random seed for each row)."""
    if seed is None:
        draw = random.SystemRandom()
        seeds = [draw.randrange(2 ** 62) for _ in range(rows)]
    elif np.ndim(seed) == 0:
        seeds = [int(seed)] * rows
    else:
        seeds = [int(s) for s in seed]
        if len(seeds) != rows:
            raise ValueError(f"seed: {len(seeds)} seeds for {rows} prompts")
    return np.array([seed_pair(s) for s in seeds], np.int32).reshape(rows, 2)


def _per_row(value, rows: int, name: str, dtype):
    array = np.asarray(value, dtype)
    if array.ndim == 0:
        return np.full([rows], array, dtype)
    if array.shape != (rows,):
        raise ValueError(f"{name}: {array.size} values for {rows} prompts")
    return array


BATCH_BUCKET_CAP = 64


def batch_bucket(rows: int) -> int:
    """The batch size XLA compiles for `rows` rows: the next power of two up to
    BATCH_BUCKET_CAP, then the next multiple of it; so changing batch sizes reuse the
    compiled loops (at most 2x the rows' work, below the cap)."""
    if rows <= 1:
        return max(rows, 1)
    if rows <= BATCH_BUCKET_CAP:
        return 1 << (rows - 1).bit_length()
    return _round_up(rows, BATCH_BUCKET_CAP)


def _pad_rows(rows: int, *arrays):
    """Each array with its last row repeated up to `rows` rows (results then cut)."""
    return [np.concatenate([a, np.repeat(a[-1:], rows - len(a), axis=0)])
            if rows > len(a) else a for a in arrays]


def _expand(n: int, *arrays):
    """Each row repeated n times (prompt 0's n first), and the sequence index k."""
    out = [np.repeat(a, n, axis=0) for a in arrays]
    index = np.tile(np.arange(n, dtype=np.int32), len(arrays[0]))
    return out, index


# ----------------------------------------------------------------------- Python API
def generate_sequences(lm, token_ids, padding_mask, max_new_tokens, sampler="greedy",
                       temperature=1.0, top_k=None, top_p=None, seed=None,
                       end_token_id=-1, jit_compile=None, *, num_beams=4,
                       length_penalty=1.0, early_stopping=False, repetition_penalty=1.0,
                       no_repeat_ngram_size=0, min_new_tokens=0, num_return_sequences=1,
                       stop=(), tokenizer=None, forced_eos_token_id=-1) -> dict:
    """New tokens after left- or right-padded prompts of ids [B, P]: a dict of numpy
    arrays, the n = num_return_sequences sequences of each prompt in prompt order:
    `token_ids` [B*n, max_new_tokens] (after a row stopped, the end token, or the
    first stop id when the model has none), `lengths` [B*n] (tokens before the end or
    stop token), `logprobs` [B*n, max_new_tokens] (each token's log-probability after
    the processors; 0 after the row stopped), `scores` [B*n] (summed log-probabilities;
    beam search: transformers' length-normalized beam scores)."""
    if end_token_id == -1:
        end_token_id = lm.end_token_id
    ids, mask = left_pad(token_ids, padding_mask)
    rows = int(ids.shape[0])
    row_max_new = _per_row(max_new_tokens, rows, "max_new_tokens", np.int32)
    if rows and row_max_new.min() < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens}: must be at least 1")
    limit = lm.max_positions
    lengths = tf.reduce_sum(mask, axis=1).numpy()
    if getattr(lm, "is_encoder_decoder", False):  # the prompts are the encoder's input
        inputs = getattr(lm, "max_input_length", None)
        if rows and inputs is not None and lengths.max() > inputs:
            r = int(np.argmax(lengths))
            raise ValueError(f"input #{r} has {lengths[r]} tokens; the model's encoder "
                             f"reads at most {inputs}")
        lengths = np.full_like(lengths, 2)  # the decoder's start (and a forced token)
    if rows and (lengths + row_max_new).max() > limit:
        r = int(np.argmax(lengths + row_max_new))
        raise ValueError(f"a prompt of {lengths[r]} tokens + max_new_tokens="
                         f"{row_max_new[r]} exceeds the model's {limit} positions")
    per_row_sampler = any(np.ndim(v) > 0 for v in (temperature, top_k, top_p))
    if per_row_sampler:  # each row its own: temperature 0 greedy, top_k 0 / top_p 1 off
        sampler = RowSampler()
        sampling = {"temperature": _per_row(temperature, rows, "temperature", np.float32),
                    "top_k": _per_row(0 if top_k is None else top_k, rows, "top_k", np.int32),
                    "top_p": _per_row(1.0 if top_p is None else top_p, rows, "top_p",
                                      np.float32)}
        if (sampling["temperature"] < 0).any() or (sampling["top_k"] < 0).any() or not (
                (sampling["top_p"] > 0) & (sampling["top_p"] <= 1)).all():
            raise ValueError("per-row settings: temperature >= 0 (0: greedy), top_k >= 0 "
                             "(0: off), 0 < top_p <= 1 (1: off)")
    else:
        sampling = {}
    n = int(num_return_sequences)
    if n < 1:
        raise ValueError(f"num_return_sequences={num_return_sequences}: must be >= 1")
    stop = [stop] if isinstance(stop, (str, int)) else list(stop or ())
    for s in stop:
        if isinstance(s, str) and not s:
            raise ValueError("stop: an empty string would stop at once")
        if not isinstance(s, (str, int, np.integer)):
            raise ValueError(f"stop: {s!r} is neither a string nor a token id")
        if not isinstance(s, str) and not 0 <= int(s) < lm.vocab_size:
            raise ValueError(f"stop: token id {s} is outside the vocabulary "
                             f"(0..{lm.vocab_size - 1})")
    processing = Processing.of(repetition_penalty, no_repeat_ngram_size, min_new_tokens,
                               forced_end_of(lm, forced_eos_token_id))
    penalty = _per_row(repetition_penalty, rows, "repetition_penalty", np.float32)
    min_new = _per_row(min_new_tokens, rows, "min_new_tokens", np.int32)
    ngram = _per_row(no_repeat_ngram_size or 0, rows, "no_repeat_ngram_size", np.int32)
    run = generate_function(
        lm, sampler, temperature, top_k, top_p, end_token_id, jit_compile,
        num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping,
        processing=processing, stop_ids=[int(s) for s in stop if not isinstance(s, str)],
        stop_strings=[s for s in stop if isinstance(s, str)], tokenizer=tokenizer)
    beam = isinstance(run.setting.sampler, BeamSearch)
    if beam:
        if n > run.setting.sampler.num_beams:
            raise ValueError(f"num_return_sequences={n} is more than num_beams="
                             f"{run.setting.sampler.num_beams}")
        if len(set(row_max_new.tolist())) > 1:
            raise ValueError("beam search takes one max_new_tokens for every prompt")
        padded = batch_bucket(rows) if run.setting.jit_compile else rows
        ids, mask, penalty, min_new, ngram = _pad_rows(
            padded, ids.numpy(), mask.numpy(), penalty, min_new, ngram)
        out = run(ids, mask, int(row_max_new.max()), repetition_penalty=penalty,
                  min_new_tokens=min_new, no_repeat_ngram_size=ngram)
        out = {name: value.numpy()[:rows] for name, value in out.items()}
        keep = lambda x: x.reshape(rows, -1, *x.shape[1:])[:, :n].reshape(  # noqa: E731
            rows * n, *x.shape[1:])
        width = run.setting.sampler.num_beams
        out = {name: keep(value.reshape(rows * width, *value.shape[2:]))
               for name, value in out.items()}
        return out
    if n > 1 and isinstance(run.setting.sampler, GreedySampler):
        raise ValueError("num_return_sequences > 1 needs a sampler that draws (top_k, "
                         "top_p) or beam search: greedy gives the same text n times")
    seeds = row_seeds(seed, rows)
    names = list(sampling)
    (ids, mask, seeds, penalty, min_new, ngram, row_max_new, *values), index = _expand(
        n, ids.numpy(), mask.numpy(), seeds, penalty, min_new, ngram, row_max_new,
        *sampling.values())
    total = len(ids)
    padded = batch_bucket(total) if run.setting.jit_compile else total
    ids, mask, seeds, index, penalty, min_new, ngram, row_max_new, *values = _pad_rows(
        padded, ids, mask, seeds, index, penalty, min_new, ngram, row_max_new, *values)
    out = run(ids, mask, row_max_new, seeds, index, penalty, min_new, ngram,
              **dict(zip(names, values)))
    out = {name: value.numpy()[:total] for name, value in out.items()}
    row_max_new = row_max_new[:total]
    width = out["token_ids"].shape[1]
    out["logprobs"] = np.where(np.arange(width)[None] < row_max_new[:, None],
                               out["logprobs"], 0.0)
    return out


def generate_ids(lm, token_ids, padding_mask, max_new_tokens, sampler="greedy",
                 temperature=1.0, top_k=None, top_p=None, seed=None, end_token_id=-1,
                 jit_compile=None, **options):
    """New tokens [B*n, max_new_tokens] after left- or right-padded prompts of ids
    (after a row's end token: the end token again). `end_token_id=-1` means the
    model's; `options`: those of `generate_sequences`."""
    return tf.constant(generate_sequences(
        lm, token_ids, padding_mask, max_new_tokens, sampler, temperature, top_k, top_p,
        seed, end_token_id, jit_compile, **options)["token_ids"])


def prepare_prompts(tokenizer, prompts, keep: int, start_id: int):
    """In-graph prompt preparation, shared by `generate` and the generate SavedModel:
    tf.string [B] -> (ids RaggedTensor [B, (P)] int32, token_ids [B, P] left-padded,
    padding_mask [B, P], cut [B] bool). An empty prompt starts from `start_id` (GPT-2's
    unconditional samples start from its end token); a prompt longer than `keep`
    tokens keeps its last `keep` (`cut` says which were)."""
    ids = tf.cast(tokenizer.tokenize(prompts), tf.int32)
    empty = tf.equal(ids.row_lengths(), 0)
    start = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(empty, tf.int32))], tf.constant(start_id, tf.int32)),
        tf.cast(empty, tf.int64))
    ids = tf.concat([start, ids], axis=1)
    cut = ids.row_lengths() > keep
    ids = ids[:, -keep:]
    dense = ids.to_tensor(0)  # every row has a token now
    mask = tf.sequence_mask(ids.row_lengths(), tf.shape(dense)[1], tf.int32)
    dense, mask = left_pad(dense, mask)
    return ids, dense, mask, cut


def prepare_encoder_inputs(tokenizer, texts, keep: int):
    """`prepare_prompts` for an encoder-decoder: the tokenizer's `encoder_ids` (T5:
    text `</s>`; BART: `<s>` text `</s>`), a row longer than `keep` tokens cut to its
    first `keep - 1` and its last (the end token), as the tokenizers' own truncation
    keeps the beginning; (ids, token_ids [B, P] left-padded, padding_mask, cut)."""
    ids = tf.cast(tokenizer.encoder_ids(texts), tf.int32)
    cut = ids.row_lengths() > keep
    ids = tf.concat([ids[:, :-1][:, :keep - 1], ids[:, -1:]], axis=1)
    dense = ids.to_tensor(0)
    mask = tf.sequence_mask(ids.row_lengths(), tf.shape(dense)[1], tf.int32)
    dense, mask = left_pad(dense, mask)
    return ids, dense, mask, cut


def until_end(new, end_token_id, lengths=None):
    """The new tokens [B, N] up to (without) each row's first end token, or its first
    `lengths` tokens: RaggedTensor."""
    if lengths is not None:
        return tf.RaggedTensor.from_tensor(new, lengths=lengths)
    if end_token_id is None:
        return tf.RaggedTensor.from_tensor(new)
    before = tf.equal(tf.cumsum(tf.cast(tf.equal(new, end_token_id), tf.int32), axis=1), 0)
    return tf.ragged.boolean_mask(new, before)


def _tokenizer_of(lm, tokenizer):
    tokenizer = tokenizer if tokenizer is not None else getattr(lm, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("generate() needs a tokenizer: load the model with "
                         f"{type(lm).__name__}.from_pretrained on a folder with one, or "
                         "set model.tokenizer")
    return tokenizer


def _encode_prompts(lm, tokenizer, texts, max_new_tokens):
    end = lm.end_token_id
    keep = lm.max_positions - int(np.max(max_new_tokens))
    if keep < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens} leaves no room for a prompt in "
                         f"the model's {lm.max_positions} positions")
    if end is None and bool(tf.reduce_any(tf.equal(
            tokenizer.tokenize(texts).row_lengths(), 0))):
        raise ValueError("an empty prompt needs a start token, and this model has no "
                         "end token (GPT-1)")
    ids, dense, mask, cut = prepare_prompts(tokenizer, texts, keep,
                                            end if end is not None else 0)
    long = np.flatnonzero(cut.numpy())
    if long.size:
        logger.warning("%d prompt(s) (e.g. #%d) longer than %d tokens (the model's "
                       "positions less max_new_tokens): their last %d tokens are kept",
                       long.size, long[0], keep, keep)
    return ids, dense, mask


def continuation_texts(tokenizer, prompt_ids, new) -> list[str]:
    """What decoding prompt + new adds to decoding the prompt alone (GPT-1's BPE marks
    word ends, `</w>`, so the space between the prompt's last word and the first new
    one belongs to neither part decoded apart; for GPT-2's bytes this is the new
    tokens' own text). `new`: RaggedTensor."""
    head = tokenizer.detokenize(prompt_ids)
    full = tokenizer.detokenize(tf.concat([prompt_ids, new], axis=1))
    start = tf.strings.length(head)
    text = tf.strings.substr(full, start, tf.strings.length(full) - start)
    return [t.decode("utf-8", "replace") for t in text.numpy()]


def generate_text(lm, prompts, max_new_tokens=32, sampler="greedy", temperature=1.0,
                  top_k=None, top_p=None, seed=None, jit_compile=None, tokenizer=None,
                  return_scores=False, **options):
    """Strings in, strings out: each prompt followed by its continuation (up to the end
    token or the first stop, which are left out); n = num_return_sequences texts per
    prompt, prompt 0's first. An empty prompt starts from the end token, as GPT-2's
    unconditional samples do; a prompt longer than the model's positions less
    `max_new_tokens` keeps its last tokens (with a warning), as the generate export.
    `return_scores`: dicts {text, token_ids, logprobs, score} instead of strings (the
    tokens up to the end or stop token, the one completing a stop string included).
    `tokenizer`: default `lm.tokenizer`; `options`: those of `generate_sequences`."""
    tokenizer = _tokenizer_of(lm, tokenizer)
    single = isinstance(prompts, str)
    if not single and not list(prompts):
        return []
    prompts = [prompts] if single else list(prompts)
    texts = tf.constant(prompts)
    ids, dense, mask = _encode_prompts(lm, tokenizer, texts, max_new_tokens)
    out = generate_sequences(lm, dense, mask, max_new_tokens, sampler, temperature, top_k,
                             top_p, seed, jit_compile=jit_compile, tokenizer=tokenizer,
                             **options)
    n = len(out["lengths"]) // len(prompts)
    stop = options.get("stop") or ()
    stop = [stop] if isinstance(stop, (str, int)) else list(stop)
    new = until_end(tf.constant(out["token_ids"]), None, tf.constant(out["lengths"]))
    repeated = tf.gather(ids, np.repeat(np.arange(len(prompts)), n))
    results = []
    for r, continuation in enumerate(continuation_texts(tokenizer, repeated, new)):
        continuation, _ = cut_at_stop(continuation, stop)
        text = prompts[r // n] + continuation
        if return_scores:
            length = int(out["lengths"][r])
            results.append({"text": text,
                            "token_ids": out["token_ids"][r, :length].tolist(),
                            "logprobs": out["logprobs"][r, :length].tolist(),
                            "score": float(out["scores"][r])})
        else:
            results.append(text)
    return results[0] if single and n == 1 else results


def stream_text(lm, prompt: str, max_new_tokens=32, sampler="greedy", temperature=1.0,
                top_k=None, top_p=None, seed=None, jit_compile=None, tokenizer=None,
                repetition_penalty=1.0, no_repeat_ngram_size=0, min_new_tokens=0,
                stop=(), forced_eos_token_id=-1):
    """Yields the continuation of one prompt in pieces as tokens are decoded: whole
    UTF-8 characters only, nothing that may yet turn out to begin a stop string; the
    pieces join to `generate_text`'s continuation (same settings, same seed). One
    compiled step per token (the loop's own body), so its numbers are the loop's."""
    tokenizer = _tokenizer_of(lm, tokenizer)
    if not isinstance(prompt, str):
        raise ValueError("stream() takes one prompt (a string)")
    stop = [stop] if isinstance(stop, (str, int)) else list(stop or ())
    ids, dense, mask = _encode_prompts(lm, tokenizer, tf.constant([prompt]), max_new_tokens)
    processing = Processing.of(repetition_penalty, no_repeat_ngram_size, min_new_tokens,
                               forced_end_of(lm, forced_eos_token_id))
    run = generate_function(lm, sampler, temperature, top_k, top_p, lm.end_token_id,
                            jit_compile, processing=processing,
                            stop_ids=[int(s) for s in stop if not isinstance(s, str)],
                            stop_strings=[s for s in stop if isinstance(s, str)],
                            tokenizer=tokenizer)
    setting = run.setting
    if isinstance(setting.sampler, BeamSearch):
        raise ValueError("stream() decodes one sequence: beam search is not streamed")
    dense, mask, capacity = bucket(dense, mask, int(max_new_tokens), setting.jit_compile)
    start_fn, step_fn = _stream_functions(lm, setting)
    const = {"seeds": tf.constant(row_seeds(seed, 1)), "index": tf.zeros([1], tf.int32),
             "penalty": tf.constant([float(repetition_penalty)], tf.float32),
             "min_new": tf.constant([int(min_new_tokens)], tf.int32),
             "max_new": tf.constant([int(max_new_tokens)], tf.int32),
             "ngram": tf.constant([int(no_repeat_ngram_size or 0)], tf.int32)}
    state, const = start_fn(dense, mask, capacity, const)
    strings = [s for s in stop if isinstance(s, str)]
    sent = ""
    head = len(tokenizer.detokenize(ids).numpy()[0])
    for t in range(int(max_new_tokens)):
        state = step_fn(state, tf.constant(t, tf.int32), const)
        length = int(state["length"][0])
        new = tf.RaggedTensor.from_tensor(state["out"][:, :t + 1], lengths=[length])
        raw = tokenizer.detokenize(tf.concat([ids, new], axis=1)).numpy()[0][head:]
        done = bool(state["done"][0])
        text = _whole_characters(raw, final=done or t + 1 == int(max_new_tokens))
        text, found = cut_at_stop(text, strings)
        if not found and not done and t + 1 < int(max_new_tokens):
            text = _hold_stop_prefix(text, strings)
        if text.startswith(sent) and len(text) > len(sent):
            yield text[len(sent):]
            sent = text
        if done or found:
            return


def _whole_characters(raw: bytes, final: bool) -> str:
    """The longest prefix of `raw` that is whole UTF-8 characters (all of it, with
    U+FFFD for broken bytes, when `final`)."""
    if final:
        return raw.decode("utf-8", "replace")
    for cut in range(len(raw), max(len(raw) - 4, -1), -1):
        try:
            return raw[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return raw.decode("utf-8", "replace")


def _hold_stop_prefix(text: str, strings) -> str:
    """`text` less any ending that begins one of the stop strings."""
    hold = 0
    for s in strings:
        for size in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:size]):
                hold = max(hold, size)
                break
    return text[:len(text) - hold]


def _stream_functions(lm, setting: Setting):
    """(start, step) compiled for streaming: the loop's start and body, one step a call."""
    functions = compiled_functions(lm)
    key = ("stream",) + setting.key()
    if key not in functions:
        @tf.function(autograph=False, jit_compile=setting.jit_compile, reduce_retracing=True)
        def start(token_ids, padding_mask, capacity, const):
            return _sample_start(lm, setting, token_ids, padding_mask, capacity, const)

        split_bias = setting.jit_compile and not tf.config.list_logical_devices("GPU")

        @tf.function(autograph=False, jit_compile=setting.jit_compile, reduce_retracing=True)
        def step(state, t, const):
            with separate_bias_add() if split_bias else contextlib.nullcontext():
                return _sample_step(lm, setting, state, t, const)

        functions[key] = (start, step)
    return functions[key]


def seq2seq_text(lm, texts, max_new_tokens=32, sampler="greedy", temperature=1.0,
                 top_k=None, top_p=None, seed=None, jit_compile=None, tokenizer=None,
                 return_scores=False, **options):
    """An encoder-decoder's text to text: each input's output text (up to, without,
    the end token or a stop), n = num_return_sequences per input, input 0's first;
    a str for a str when n is 1. The inputs are the tokenizer's `encoder_ids` (T5: the
    text and `</s>`; BART: `<s>` text `</s>`); one longer than `lm.max_input_length`
    (where the model has one) is an error naming it (`generate_sequences`).
    `return_scores`: dicts {text, token_ids, logprobs, score}."""
    tokenizer = _tokenizer_of(lm, tokenizer)
    single = isinstance(texts, str)
    items = [texts] if single else list(texts)
    if not items:
        return []
    ids = tf.cast(tokenizer.encoder_ids(tf.constant(items)), tf.int32)
    dense = ids.to_tensor(0)
    mask = tf.sequence_mask(ids.row_lengths(), tf.shape(dense)[1], tf.int32)
    out = generate_sequences(lm, dense, mask, max_new_tokens, sampler, temperature, top_k,
                             top_p, seed, jit_compile=jit_compile, tokenizer=tokenizer,
                             **options)
    n = len(out["lengths"]) // len(items)
    stop = options.get("stop") or ()
    stop = [stop] if isinstance(stop, (str, int)) else list(stop)
    new = until_end(tf.constant(out["token_ids"]), None, tf.constant(out["lengths"]))
    results = []
    for r, text in enumerate(tokenizer.detokenize(new).numpy()):
        text, _ = cut_at_stop(text.decode("utf-8", "replace"), stop)
        if return_scores:
            length = int(out["lengths"][r])
            results.append({"text": text, "token_ids": out["token_ids"][r, :length].tolist(),
                            "logprobs": out["logprobs"][r, :length].tolist(),
                            "score": float(out["scores"][r])})
        else:
            results.append(text)
    return results[0] if single and n == 1 else results
