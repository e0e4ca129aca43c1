"""Seeds, batch padding and the array-level entry points: `generate_sequences` and
`generate_ids` (token ids in, token ids out)."""

from __future__ import annotations

import random

import numpy as np
import tensorflow as tf

from kbert.models.generation.samplers import BeamSearch, GreedySampler, RowSampler
from kbert.models.generation.processors import Processing, forced_end_of
from kbert.models.generation.state import left_pad, round_up
from kbert.models.generation.compiled import generate_function


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
    return round_up(rows, BATCH_BUCKET_CAP)


def _pad_rows(rows: int, *arrays):
    """Each array with its last row repeated up to `rows` rows (results then cut)."""
    return [np.concatenate([a, np.repeat(a[-1:], rows - len(a), axis=0)])
            if rows > len(a) else a for a in arrays]


def _expand(n: int, *arrays):
    """Each row repeated n times (prompt 0's n first), and the sequence index k."""
    out = [np.repeat(a, n, axis=0) for a in arrays]
    index = np.tile(np.arange(n, dtype=np.int32), len(arrays[0]))
    return out, index


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
    if lm.is_encoder_decoder:  # the prompts are the encoder's input
        inputs = lm.max_input_length
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
