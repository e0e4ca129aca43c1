"""The compiled decoding functions: one `tf.function` per model and `Setting`, kept on
the model, with XLA by default."""

from __future__ import annotations

import contextlib

import tensorflow as tf

from kbert.layers.dense import separate_bias_add
from kbert.layers.updates import compiled_writes
from kbert.models.generation.samplers import BeamSearch, get_sampler
from kbert.models.generation.processors import Processing
from kbert.models.generation.stopping import StopStrings
from kbert.models.generation.state import Setting, bucket
from kbert.models.generation.decode_sample import sample_loop
from kbert.models.generation.decode_beam import beam_loop

# XLA for the decoding loop, on every device. On CPUs too: a decoding step is about fifty
# small ops per layer around its matrix products, and XLA fuses them (GPT-2 124M on a
# 2-core CPU, 128 new tokens: 1.2x the plain graph's tokens/s at batch 1, 1.5x at batch
# 8; docs/benchmarks.md). Compiling takes a few seconds per batch size and shape bucket.
XLA_BY_DEFAULT = True


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
        with separate_bias_add() if split_bias else contextlib.nullcontext(), \
                compiled_writes(setting.jit_compile):
            loop = beam_loop if beam else sample_loop
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

    Kept on the model itself, so they go with it (a table keyed by the model would keep
    every model that ever generated alive: its functions reference it). Set past
    Keras' and TensorFlow's attribute tracking, so that neither saves them with the
    model."""
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
    `XLA_BY_DEFAULT`; `stop_strings` are matched in-graph when `tokenizer` gives
    `token_bytes` (else ignored here: `generate_text` cuts the text)."""
    chosen = get_sampler(sampler, temperature, top_k, top_p, vocab_size=lm.vocab_size,
                         num_beams=num_beams, length_penalty=length_penalty,
                         early_stopping=early_stopping)
    jit_compile = XLA_BY_DEFAULT if jit_compile is None else bool(jit_compile)
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
