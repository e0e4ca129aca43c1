"""`stream_text`: a causal LM's continuation yielded piece by piece as it is decoded."""

from __future__ import annotations

import contextlib

import tensorflow as tf

from kbert.layers.dense import separate_bias_add
from kbert.layers.updates import compiled_writes
from kbert.models.generation.samplers import BeamSearch
from kbert.models.generation.processors import Processing, forced_end_of
from kbert.models.generation.stopping import cut_at_stop
from kbert.models.generation.state import Setting, bucket
from kbert.models.generation.decode_sample import sample_start, sample_step
from kbert.models.generation.compiled import compiled_functions, generate_function
from kbert.models.generation.batching import row_seeds
from kbert.models.generation.text import encode_prompts, tokenizer_of


def stream_text(lm, prompt: str, max_new_tokens=32, sampler="greedy", temperature=1.0,
                top_k=None, top_p=None, seed=None, jit_compile=None, tokenizer=None,
                repetition_penalty=1.0, no_repeat_ngram_size=0, min_new_tokens=0,
                stop=(), forced_eos_token_id=-1):
    """Yields the continuation of one prompt in pieces as tokens are decoded: whole
    UTF-8 characters only, nothing that may yet turn out to begin a stop string; the
    pieces join to `generate_text`'s continuation (same settings, same seed). One
    compiled step per token (the loop's own body), so its numbers are the loop's."""
    tokenizer = tokenizer_of(lm, tokenizer)
    if not isinstance(prompt, str):
        raise ValueError("stream() takes one prompt (a string)")
    stop = [stop] if isinstance(stop, (str, int)) else list(stop or ())
    ids, dense, mask = encode_prompts(lm, tokenizer, tf.constant([prompt]), max_new_tokens)
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
            with compiled_writes(setting.jit_compile):
                return sample_start(lm, setting, token_ids, padding_mask, capacity, const)

        split_bias = setting.jit_compile and not tf.config.list_logical_devices("GPU")

        @tf.function(autograph=False, jit_compile=setting.jit_compile, reduce_retracing=True)
        def step(state, t, const):
            with separate_bias_add() if split_bias else contextlib.nullcontext(), \
                    compiled_writes(setting.jit_compile):
                return sample_step(lm, setting, state, t, const)

        functions[key] = (start, step)
    return functions[key]
