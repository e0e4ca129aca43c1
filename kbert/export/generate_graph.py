"""The `generate` SavedModel of a causal LM (`Family.language_model_class`: GPT's) or an
encoder-decoder (T5's, BART's): prompt in, continuation (or output text) out, for TF
Serving.

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

Signature `generate`: the decoding settings per request, every input `[batch]`, one
value per row (TF Serving's `instances` format carries them per request; every input
must be in every request, each has a neutral value): `prompt` tf.string,
`max_new_tokens` int32 (1 .. the export's --max_new_tokens, its cap), `temperature`
float32 (0 = greedy), `top_k` int32 (0 = off), `top_p` float32 (1.0 = off), `seed` int64
(-1 = fresh randomness), `repetition_penalty` float32 (1.0 = off),
`no_repeat_ngram_size` int32 (0 = off, at most `MAX_NGRAM`), `min_new_tokens` int32 (0 =
off), `num_beams` int32 (1 = off; up to the export's `max_num_beams`: beam search, the
best beam, for rows with temperature 0, top_k 0 and top_p 1). Outputs: `text` tf.string (as `serving_default`'s), `num_tokens` int32 (tokens
generated, without the end or stop token), `logprob` float32 (their summed
log-probability after the processors). Rows of one batch may differ in every setting;
a row's draws depend only on its seed and the step (`kbert.models.generation`), so the
server's batching cannot change a text. An out-of-range value answers InvalidArgument
naming the input. The export's stop strings and ids apply to both signatures.

Signature `token_ids`, for clients that tokenize themselves: `token_ids` and
`padding_mask` int32 [batch, prompt] (left- or right-padded; each row at least one
token, at most `max_prompt_tokens`: a causal LM's positions less --max_new_tokens, an
encoder-decoder's encoder length) -> `token_ids` int32 [batch, max_new_tokens], the new
tokens with the export's settings (0 past `num_tokens`), and `num_tokens` int32 [batch];
no text. An encoder-decoder's `token_ids` are its encoder's input, special tokens
included (T5's `</s>`, BART's `<s>` ... `</s>`).

Encoder-decoders: `prompt` is the input text (T5's "translate English to German: ...");
the encoder reads the tokenizer's `encoder_ids`, a longer one cut to its first
`max_prompt_tokens - 1` tokens and the end token; `text` is the output text.
"""

from __future__ import annotations

import json
import logging
import os

import tensorflow as tf

from kbert.export import guards
from kbert.export import ops as ops_lib
from kbert.export.base import SAMPLE_TEXTS, ServingModule, check_token_inputs, save_export
from kbert.models import generation

SETTINGS_FILE = "kbert_generate.json"
GENERATION_CONFIG = "generation_config.json"
# transformers' GenerationConfig keys a fine-tuning run records (the seq2seq command),
# as `export_generate`'s arguments; and kbert's own for the prompt's wrapping.
_FOLDER_KEYS = ("num_beams", "length_penalty", "no_repeat_ngram_size", "min_new_tokens",
                "max_new_tokens")
_PROMPT_KEYS = {"kbert_source_prefix": "prompt_prefix", "kbert_source_suffix": "prompt_suffix",
                "kbert_prompt_suffix_ids": "prompt_suffix_ids"}


def folder_settings(model_dir: str) -> dict:
    """The decoding settings a kbert fine-tuning run saved with its model folder
    (`generation_config.json` with `"kbert_decoding": true`: the seq2seq command's), as
    `export_generate`'s arguments (beam search where num_beams > 1); {} for any other
    folder (Hugging Face's own generation configs are not read here)."""
    path = os.path.join(os.fspath(model_dir), GENERATION_CONFIG)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    if not config.get("kbert_decoding"):
        return {}
    settings = {k: config[k] for k in _FOLDER_KEYS if config.get(k) is not None}
    settings.update({arg: config[key] for key, arg in _PROMPT_KEYS.items() if config.get(key)})
    if settings.get("num_beams", 1) > 1:
        settings["sampler"] = "beam"
    return settings
MAX_NGRAM = 4  # the largest no_repeat_ngram_size the per-request signature takes
DEFAULT_MAX_BEAMS = 4  # the most num_beams per request, unless the export says more

logger = logging.getLogger(__name__)


def export_generate(lm, tokenizer, export_dir: str, *, max_new_tokens: int = 32,
                    sampler: str = "greedy", temperature: float = 1.0,
                    top_k: int | None = None, top_p: float | None = None,
                    seed: int | None = None, num_beams: int = 4,
                    length_penalty: float = 1.0, early_stopping=False,
                    repetition_penalty: float = 1.0, no_repeat_ngram_size: int = 0,
                    min_new_tokens: int = 0, stop=(), max_num_beams: int | None = None,
                    prompt_prefix: str = "", prompt_suffix: str = "", prompt_suffix_ids=(),
                    jit_compile: bool = False,
                    serving_version: str = ops_lib.DEFAULT_SERVING_VERSION,
                    max_request_bytes: int = guards.MAX_REQUEST_BYTES) -> str:
    """Exports a causal LM with its tokenizer (see the module docstring).

    `seed`: None draws new random numbers for every request and row; an int makes every
    request's sampling reproducible (the same prompt, the same text). With
    `sampler="beam"` each prompt's best beam is returned. `max_num_beams`: the most
    beams the `generate` signature takes per request (default 4, or `num_beams` of a
    beam export when larger). The caps are logged, and listed under "caps" in
    `kbert_generate.json`. `prompt_prefix`: put before every prompt in the graph (T5's
    "summarize: ", as the model was fine-tuned), so that clients send the bare text;
    the `token_ids` signature takes ids as they are; `prompt_suffix` the same after it
    (GPT-2's "\nTL;DR:"). `prompt_suffix_ids`: token ids put
    after every text prompt's (a causal LM fine-tuned as a decoder-only seq2seq model:
    its separator, the end token).

    `jit_compile`: the decoding loops compiled with XLA inside the SavedModel (the
    per-request signature's beam loop excepted: its width comes with each request). They
    run faster (docs/benchmarks.md), and TF Serving runs them only when started with
    `--xla_cpu_compilation_enabled=true`: without the flag, `tensorflow_model_server`
    disables XLA at start and every decoding request fails with "XLA compilation
    disabled". Off (the default), the export is the plain graph, served with no flag.
    """
    generation.check_settings(sampler, temperature, top_k, top_p)
    if top_k is not None:  # recorded as decoding uses it: at most the vocabulary
        top_k = min(int(top_k), int(lm.vocab_size))
    prepare, keep, limit = _prompt_preparation(lm, tokenizer, max_new_tokens,
                                               tuple(int(i) for i in prompt_suffix_ids))
    if prompt_prefix or prompt_suffix:
        bare = prepare

        def prepare(prompts):
            return bare(tf.strings.join([tf.constant(prompt_prefix), prompts,
                                         tf.constant(prompt_suffix)]))
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
    if max_num_beams is None:
        max_num_beams = max(DEFAULT_MAX_BEAMS, int(num_beams) if sampler == "beam" else 1)
    if int(max_num_beams) < 1:
        raise ValueError(f"max_num_beams={max_num_beams}: must be at least 1")
    processing = generation.Processing.of(repetition_penalty, no_repeat_ngram_size,
                                          min_new_tokens, generation.forced_end_of(lm))
    # No XLA unless asked for: TF Serving's XLA:CPU JIT is off by default
    # (--xla_cpu_compilation_enabled), and an export may be served on other devices
    # than the one that wrote it.
    run = generation.generate_function(
        lm, sampler, temperature, top_k, top_p, end, jit_compile=bool(jit_compile),
        num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping,
        processing=processing, stop_ids=stop_ids, stop_strings=stop_strings,
        tokenizer=tokenizer)
    beam = isinstance(run.setting.sampler, generation.BeamSearch)
    settings = {"max_new_tokens": int(max_new_tokens), "sampler": sampler,
                "temperature": float(temperature), "top_k": top_k, "top_p": top_p,
                "seed": seed, "end_token_id": end, "max_prompt_tokens": keep,
                "repetition_penalty": float(repetition_penalty),
                "no_repeat_ngram_size": int(no_repeat_ngram_size),
                "min_new_tokens": int(min_new_tokens), "stop": stop}
    if prompt_prefix:
        settings["prompt_prefix"] = prompt_prefix
    if prompt_suffix:
        settings["prompt_suffix"] = prompt_suffix
    if len(prompt_suffix_ids):
        settings["prompt_suffix_ids"] = [int(i) for i in prompt_suffix_ids]
    if jit_compile:  # for the reader: serve it with --xla_cpu_compilation_enabled
        settings["jit_compile"] = True
    if beam:
        settings.update(num_beams=int(num_beams))
    settings.update(length_penalty=float(length_penalty), early_stopping=early_stopping)
    settings["caps"] = caps = {
        "max_new_tokens": int(max_new_tokens), "max_prompt_tokens": int(keep),
        "num_beams": int(max_num_beams), "no_repeat_ngram_size": MAX_NGRAM,
        "min_new_tokens": int(max_new_tokens), "max_request_bytes": int(max_request_bytes)}
    module = ServingModule(lm, tokenizer)
    module.generation_settings = tf.constant(json.dumps(settings, sort_keys=True))

    def decode(dense, mask):
        """New tokens [B, max_new_tokens] and their counts [B] after left-padded prompts,
        with the export's settings (each prompt's best beam under beam search)."""
        rows = tf.shape(dense)[0]
        if seed is None:  # fresh randomness for every row
            seeds = fresh_seeds(rows)
        else:
            seeds = tf.tile(tf.constant([generation.seed_pair(seed)], tf.int32), [rows, 1])
        out = run(dense, mask, tf.constant(max_new_tokens, tf.int32), seeds,
                  tf.zeros([rows], tf.int32), float(repetition_penalty), int(min_new_tokens))
        tokens, lengths = out["token_ids"], out["lengths"]
        if beam:
            tokens = tokens[:, 0]
            lengths = lengths[:, 0]
        return tokens, lengths

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def serve(prompt):
        _, dense, mask, _ = prepare(prompt)
        tokens, lengths = decode(dense, mask)
        text = tokenizer.detokenize(generation.until_end(tokens, None, lengths))
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")
        return {"text": _cut_at_stop(text, stop_strings)}

    @tf.function(input_signature=[{name: tf.TensorSpec([None, None], tf.int32, name=name)
                                   for name in ("padding_mask", "token_ids")}],
                 autograph=False)
    def token_ids(inputs):
        mask = tf.cast(inputs["padding_mask"] != 0, tf.int32)
        counts = tf.reduce_sum(mask, axis=1)
        checks = check_token_inputs(inputs, lm.vocab_size) + [
            tf.debugging.Assert(tf.reduce_all(ok), [tf.constant(message)])
            for ok, message in (
                      (counts >= 1, "padding_mask: every row needs a prompt token"),
                      (counts <= keep, f"token_ids: at most {keep} prompt tokens"))]
        with tf.control_dependencies(checks):
            dense, mask = generation.left_pad(inputs["token_ids"], mask)
        dense = dense[:, tf.shape(dense)[1] - tf.reduce_max(counts):]
        mask = mask[:, tf.shape(mask)[1] - tf.reduce_max(counts):]
        tokens, lengths = decode(dense, mask)
        kept = tf.sequence_mask(lengths, tf.shape(tokens)[1], tf.int32)
        return {"token_ids": tokens * kept, "num_tokens": lengths}

    generate = _per_request_signature(
        lm, tokenizer, caps, stop_ids, stop_strings, prepare,
        generation.BeamSearch(None, float(length_penalty), early_stopping),
        bool(jit_compile))
    logger.info("generate export %s: %s", export_dir, caps_line(caps))
    if jit_compile:
        logger.info("generate export %s: decoding compiled with XLA; serve it with "
                    "tensorflow_model_server --xla_cpu_compilation_enabled=true", export_dir)
    warmup = [{"prompt": [t]} for t in SAMPLE_TEXTS] + [{"prompt": SAMPLE_TEXTS}]
    # The other signatures' warmup: two prompts, greedy, two new tokens; their ids.
    prompts = list(SAMPLE_TEXTS[:2])
    per_request = {"prompt": prompts, "max_new_tokens": [min(2, caps["max_new_tokens"])] * 2,
                   "temperature": [0.0] * 2, "top_k": [0] * 2, "top_p": [1.0] * 2,
                   "seed": [0] * 2, "repetition_penalty": [1.0] * 2,
                   "no_repeat_ngram_size": [0] * 2, "min_new_tokens": [0] * 2,
                   "num_beams": [1] * 2}
    _, dense, mask, _ = prepare(tf.constant(prompts))
    ids = {"token_ids": dense.numpy().tolist(), "padding_mask": mask.numpy().tolist()}
    return save_export(module, serve, export_dir, warmup, serving_version,
                       max_request_bytes=max_request_bytes,
                       extra_files={SETTINGS_FILE: json.dumps(settings, indent=2,
                                                              sort_keys=True)},
                       extra_signatures={"generate": generate, "token_ids": token_ids},
                       extra_warmup=[("generate", per_request), ("token_ids", ids)])


def _prompt_preparation(lm, tokenizer, max_new_tokens: int, suffix_ids=()):
    """(prepare(prompts) -> (ids, token_ids, padding_mask, cut), the most prompt tokens
    kept, the model's positions) for `lm`: a causal LM keeps a prompt's last
    `max_positions - max_new_tokens` tokens (an empty one starts from the end token);
    an encoder-decoder (`generation_start`) reads the tokenizer's `encoder_ids`, cut to
    the encoder's length (`max_input_length`, else the tokenizer's `seq_length`), and
    its decoder has `max_positions` for the start token(s) and the new ones."""
    limit = lm.max_positions
    if suffix_ids and lm.is_encoder_decoder:
        raise ValueError("prompt_suffix_ids: for causal LMs (an encoder-decoder's inputs "
                         "end with its tokenizer's end token)")
    if lm.is_encoder_decoder:
        if not 1 <= max_new_tokens <= limit - 2:
            raise ValueError(f"max_new_tokens={max_new_tokens}: must be between 1 and "
                             f"{limit - 2} (the decoder has {limit} positions)")
        keep = int(lm.max_input_length or tokenizer.seq_length)
        return (lambda prompts: generation.prepare_encoder_inputs(tokenizer, prompts, keep),
                keep, limit)
    if not 1 <= max_new_tokens < limit:
        raise ValueError(f"max_new_tokens={max_new_tokens}: must be between 1 and "
                         f"{limit - 1} (the model has {limit} positions)")
    keep = limit - max_new_tokens
    return (lambda prompts: generation.prepare_prompts(tokenizer, prompts, keep,
                                                       lm.end_token_id, suffix_ids),
            keep, limit)


def caps_line(caps: dict) -> str:
    """The limits a `generate` export bakes in, in one line (logged when it is written,
    printed by the task commands)."""
    return ("per request at most " + ", ".join(
        f"{name} {caps[name]}" for name in ("max_new_tokens", "num_beams",
                                             "no_repeat_ngram_size", "min_new_tokens"))
            + f"; prompts keep at most {caps['max_prompt_tokens']} tokens; requests at most "
            f"{caps['max_request_bytes']} bytes")


def _per_request_signature(lm, tokenizer, caps: dict, stop_ids, stop_strings, prepare,
                           beam_search, jit_compile: bool = False):
    """The `generate` signature (see the module docstring): one compiled loop with a
    `RowSampler` and every processor on, each row's settings as tensors; rows with
    num_beams > 1 go through one beam loop (`beam_search`, its width per call), a call
    per width and max_new_tokens in the request."""
    end = lm.end_token_id
    vocab = int(lm.vocab_size)
    cap, max_beams = caps["max_new_tokens"], caps["num_beams"]
    processing = generation.Processing(repetition_penalty=True, no_repeat_ngram_size=MAX_NGRAM,
                                       min_new_tokens=True, ngram_per_row=True,
                                       forced_end=generation.forced_end_of(lm))
    options = dict(end_token_id=end, processing=processing, stop_ids=stop_ids,
                   stop_strings=stop_strings, tokenizer=tokenizer)
    run = generation.generate_function(lm, generation.RowSampler(), jit_compile=jit_compile,
                                       **options)
    # The beam loop takes its width per call: XLA compiles one width, so it stays plain.
    beam_run = generation.generate_function(lm, beam_search, jit_compile=False, **options) \
        if max_beams > 1 else None
    spec = [tf.TensorSpec([None], dtype, name=name) for name, dtype in (
        ("prompt", tf.string), ("max_new_tokens", tf.int32), ("temperature", tf.float32),
        ("top_k", tf.int32), ("top_p", tf.float32), ("seed", tf.int64),
        ("repetition_penalty", tf.float32), ("no_repeat_ngram_size", tf.int32),
        ("min_new_tokens", tf.int32), ("num_beams", tf.int32))]

    @tf.function(input_signature=spec, autograph=False)
    def per_request(prompt, max_new_tokens, temperature, top_k, top_p, seed,
                    repetition_penalty, no_repeat_ngram_size, min_new_tokens, num_beams):
        rows = tf.shape(prompt)[0]
        named = {"max_new_tokens": max_new_tokens, "temperature": temperature,
                 "top_k": top_k, "top_p": top_p, "seed": seed,
                 "repetition_penalty": repetition_penalty,
                 "no_repeat_ngram_size": no_repeat_ngram_size,
                 "min_new_tokens": min_new_tokens, "num_beams": num_beams}
        checks = [tf.debugging.assert_equal(tf.shape(value)[0], rows, message=(
            f"{name}: one value per prompt")) for name, value in named.items()]
        bounds = [("max_new_tokens", max_new_tokens >= 1, "at least 1"),
                  ("max_new_tokens", max_new_tokens <= cap,
                   f"at most {cap} (--max_new_tokens of the export)"),
                  ("temperature", (temperature >= 0) & tf.math.is_finite(temperature),
                   "0 (greedy) or more, and finite"),
                  ("top_k", (top_k >= 0) & (top_k <= vocab),
                   f"between 0 (off) and {vocab} (the vocabulary)"),
                  ("top_p", (top_p > 0) & (top_p <= 1), "in (0, 1] (1: off)"),
                  ("seed", seed >= -1, "-1 (fresh randomness) or more"),
                  ("repetition_penalty",
                   (repetition_penalty > 0) & tf.math.is_finite(repetition_penalty),
                   "more than 0 (1: off), and finite"),
                  ("no_repeat_ngram_size",
                   (no_repeat_ngram_size >= 0) & (no_repeat_ngram_size <= MAX_NGRAM),
                   f"between 0 (off) and {MAX_NGRAM}"),
                  ("min_new_tokens", (min_new_tokens >= 0) & (min_new_tokens <= cap),
                   f"between 0 (off) and {cap} (--max_new_tokens of the export)"),
                  ("num_beams", (num_beams >= 1) & (num_beams <= max_beams),
                   f"between 1 and {max_beams} (--max_num_beams of the export)"),
                  ("num_beams", (num_beams == 1) | ((temperature == 0) & (top_k == 0)
                                                    & (top_p == 1)),
                   "1 where a row samples: beam search (num_beams above 1) takes "
                   "temperature 0, top_k 0 and top_p 1")]
        with tf.control_dependencies(checks):
            checks = [tf.debugging.Assert(tf.reduce_all(ok), [tf.constant(
                f"{name}: each value must be {rule}")], name=f"check_{name}")
                for name, ok, rule in bounds]
        with tf.control_dependencies(checks):
            _, dense, mask, _ = prepare(prompt)
        fresh = fresh_seeds(rows)
        pair = tf.cast(tf.stack([seed % (2 ** 31), (seed // (2 ** 31)) % (2 ** 31)], 1),
                       tf.int32)
        seeds = tf.where((seed < 0)[:, None], fresh, pair)
        settings = (seeds, repetition_penalty, min_new_tokens, no_repeat_ngram_size,
                    temperature, top_k, top_p)

        def finish(tokens, lengths, logprobs):
            text = tokenizer.detokenize(generation.until_end(tokens, None, lengths))
            text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")
            counted = tf.sequence_mask(lengths, tf.shape(logprobs)[1], tf.float32)
            return (_cut_at_stop(text, stop_strings), lengths,
                    tf.reduce_sum(logprobs * counted, axis=1))

        def sampled(index):  # rows [n] decoded one token at a time, each its settings
            seeds_, penalty, min_new, ngram, temp, k, p = (
                tf.gather(x, index) for x in settings)
            out = run(tf.gather(dense, index), tf.gather(mask, index),
                      tf.gather(max_new_tokens, index), seeds_, tf.zeros_like(index),
                      penalty, min_new, ngram, temp, k, p)
            return finish(out["token_ids"], out["lengths"], out["logprobs"])

        if beam_run is None:
            text, lengths, logprob = sampled(tf.range(rows))
            return {"text": text, "num_tokens": lengths, "logprob": logprob}

        def beamed(index, beams):  # rows [n] of one width and one max_new_tokens
            _, penalty, min_new, ngram, _, _, _ = (tf.gather(x, index) for x in settings)
            out = beam_run(tf.gather(dense, index), tf.gather(mask, index),
                           tf.gather(max_new_tokens, index)[0], None, None, penalty,
                           min_new, ngram, num_beams=beams)
            return finish(out["token_ids"][:, 0], out["lengths"][:, 0],
                          out["logprobs"][:, 0])

        # A group per (beams, max_new_tokens) of beam rows (a beam loop runs to one
        # length), one group of all sampled rows (each stops at its own).
        group = tf.where(num_beams > 1, num_beams * (cap + 1) + max_new_tokens, 0)
        keys, _ = tf.unique(group)
        empty = (tf.zeros([0], tf.int32), tf.zeros([0], tf.string),
                 tf.zeros([0], tf.int32), tf.zeros([0], tf.float32))

        def body(i, parts):
            index = tf.cast(tf.where(tf.equal(group, keys[i]))[:, 0], tf.int32)
            found = tf.cond(keys[i] > 0,
                            lambda: beamed(index, keys[i] // (cap + 1)),
                            lambda: sampled(index))
            return i + 1, tuple(tf.concat([a, b], 0) for a, b in zip(parts, (index,)
                                                                     + found))

        _, (order, text, lengths, logprob) = tf.while_loop(
            lambda i, _: i < tf.size(keys), body, (tf.constant(0), empty),
            shape_invariants=(tf.TensorShape([]),
                              tuple(tf.TensorShape([None]) for _ in empty)))
        back = tf.math.invert_permutation(order)  # the rows in request order
        return {"text": tf.gather(text, back), "num_tokens": tf.gather(lengths, back),
                "logprob": tf.gather(logprob, back)}

    return per_request


@tf.autograph.experimental.do_not_convert
def fresh_seeds(rows):
    """[rows, 2] int32 seeds from the operating system's entropy, new for every request
    and every server process. A random op traced under a global seed
    (`keras.utils.set_random_seed`, which every task command calls) carries that seed in
    its attributes, and every process loading the export would replay the same draws;
    this op is written with seed attributes 0, which TensorFlow's kernels read as "seed
    from the system" (per kernel, so per loaded export; each run then draws the next
    numbers)."""
    return tf.raw_ops.RandomUniformInt(shape=tf.stack([rows, 2]), minval=tf.constant(0),
                                       maxval=tf.constant(2 ** 31 - 1), seed=0, seed2=0)


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
