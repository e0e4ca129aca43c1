"""The `generate` SavedModel of a causal LM (`Family.language_model_class`, GPT's):
prompt in, continuation out, for TF Serving.

Tokenizing (GPT-2's byte-level BPE), decoding with the key/value cache (the loop of
`kbert.models.generation`, through the model's generation protocol), and turning the
new tokens back into text all run in the graph; the prompts are prepared by the same
function as `generate`'s (`generation.prepare_prompts`). Decoding settings (number of new
tokens, sampler or beam search with num_beams / length_penalty / early_stopping,
temperature, top-k, top-p, seed, repetition_penalty, no_repeat_ngram_size,
min_new_tokens, stop strings and ids) are fixed at export time; they are written to
`assets.extra/kbert_generate.json` and kept as the string constant
`generation_settings` of the loaded object. Stop strings end a row in the graph (GPT-2's
byte-level BPE) and are cut from the text with the graph's string ops.

Signature `serving_default`: `prompt` tf.string [batch] -> `text` tf.string [batch], the
continuation without the prompt, up to and without the end token (bytes that do not
form whole UTF-8 characters at the cut are replaced with U+FFFD). An empty prompt
starts from the end token, as GPT-2's unconditional samples; a prompt longer than the
model's positions allow keeps its last `max_positions - max_new_tokens` tokens.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from kbert.export import ops as ops_lib
from kbert.export.base import SAMPLE_TEXTS, ServingModule, save_export
from kbert.models import generation

SETTINGS_FILE = "kbert_generate.json"


def export_generate(lm, tokenizer, export_dir: str, *, max_new_tokens: int = 32,
                    sampler: str = "greedy", temperature: float = 1.0,
                    top_k: int | None = None, top_p: float | None = None,
                    seed: int | None = None, num_beams: int = 4,
                    length_penalty: float = 1.0, early_stopping=False,
                    repetition_penalty: float = 1.0, no_repeat_ngram_size: int = 0,
                    min_new_tokens: int = 0, stop=(),
                    serving_version: str = ops_lib.DEFAULT_SERVING_VERSION) -> str:
    """Exports a causal LM with its tokenizer (see the module docstring).

    `seed`: None draws new random numbers for every request and row; an int makes every
    request's sampling reproducible (the same prompt, the same text). With
    `sampler="beam"` each prompt's best beam is returned.
    """
    generation.check_settings(sampler, temperature, top_k, top_p)
    if top_k is not None:  # recorded as decoding uses it: at most the vocabulary
        top_k = min(int(top_k), int(lm.vocab_size))
    limit = lm.max_positions
    if not 1 <= max_new_tokens < limit:
        raise ValueError(f"max_new_tokens={max_new_tokens}: must be between 1 and "
                         f"{limit - 1} (the model has {limit} positions)")
    end = lm.end_token_id
    if end is None:
        raise ValueError("the generate export needs an end token (GPT-2's <|endoftext|>); "
                         "this model has none")
    stop = [stop] if isinstance(stop, (str, int)) else list(stop or ())
    if any(isinstance(s, str) and not s for s in stop):
        raise ValueError("stop: an empty string would stop at once")
    stop_ids = [int(s) for s in stop if not isinstance(s, str)]
    stop_strings = [s for s in stop if isinstance(s, str)]
    for i in stop_ids:
        if not 0 <= i < lm.vocab_size:
            raise ValueError(f"stop: token id {i} is outside the vocabulary")
    processing = generation.Processing.of(repetition_penalty, no_repeat_ngram_size,
                                          min_new_tokens)
    # No XLA in the export: TF Serving's XLA:CPU JIT is off by default
    # (--xla_cpu_compilation_enabled), and an export may be served on other devices
    # than the one that wrote it.
    run = generation.generate_function(
        lm, sampler, temperature, top_k, top_p, end, jit_compile=False,
        num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping,
        processing=processing, stop_ids=stop_ids, stop_strings=stop_strings,
        tokenizer=tokenizer)
    beam = isinstance(run.setting.sampler, generation.BeamSearch)
    settings = {"max_new_tokens": int(max_new_tokens), "sampler": sampler,
                "temperature": float(temperature), "top_k": top_k, "top_p": top_p,
                "seed": seed, "end_token_id": end, "max_prompt_tokens": limit - max_new_tokens,
                "repetition_penalty": float(repetition_penalty),
                "no_repeat_ngram_size": int(no_repeat_ngram_size),
                "min_new_tokens": int(min_new_tokens), "stop": stop}
    if beam:
        settings.update(num_beams=int(num_beams), length_penalty=float(length_penalty),
                        early_stopping=early_stopping)
    module = ServingModule(lm, tokenizer)
    module.generation_settings = tf.constant(json.dumps(settings, sort_keys=True))
    keep = limit - max_new_tokens

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(prompt):
        _, dense, mask, _ = generation.prepare_prompts(tokenizer, prompt, keep, end)
        rows = tf.shape(prompt)[0]
        if seed is None:  # fresh randomness for every row
            seeds = tf.random.uniform([rows, 2], maxval=2 ** 31 - 1, dtype=tf.int32)
        else:
            seeds = tf.tile(tf.constant([generation.seed_pair(seed)], tf.int32), [rows, 1])
        out = run(dense, mask, tf.constant(max_new_tokens, tf.int32), seeds,
                  tf.zeros([rows], tf.int32), float(repetition_penalty), int(min_new_tokens))
        tokens, lengths = out["token_ids"], out["lengths"]
        if beam:  # each prompt's best beam
            tokens = tokens[:, 0]
            lengths = lengths[:, 0]
        text = tokenizer.detokenize(generation.until_end(tokens, None, lengths))
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")
        return {"text": _cut_at_stop(text, stop_strings)}

    module.serve = serve
    warmup = [{"prompt": [t]} for t in SAMPLE_TEXTS] + [{"prompt": SAMPLE_TEXTS}]
    return save_export(module, serve, export_dir, warmup, serving_version,
                       extra_files={SETTINGS_FILE: json.dumps(settings, indent=2,
                                                              sort_keys=True)})


def _cut_at_stop(text, strings):
    """Each text [B] up to (without) the first of the stop strings, in-graph (the
    earliest by byte offset, as `generation.cut_at_stop` by character)."""
    for s in strings:  # cutting at each string in turn leaves the earliest cut
        parts = tf.strings.split(text, sep=s, maxsplit=1)
        text = parts.to_tensor("")[:, 0]
    return text


def read_settings(export_dir: str) -> dict:
    """The decoding settings recorded in a generate export."""
    with open(os.path.join(export_dir, "assets.extra", SETTINGS_FILE), encoding="utf-8") as f:
        return json.load(f)
