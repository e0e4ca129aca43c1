"""Text generation for any causal LM, with a preallocated key/value cache, compiled once
and reused.

A model offers the generation protocol that `kbert.models.generative.GenerativeLM`
declares (GPT's `GPTLanguageModel`, T5's and BART's `Seq2SeqLM` inherit it): its end
token, vocabulary and positions, `generation_step`, and `generation_cache` (a causal
LM) or `generation_start` (an encoder-decoder, `is_encoder_decoder`), which runs the
encoder once on the prompts (the encoder's input) and holds its projected keys and
values (and its padding) in the cache beside the decoder's self-attention cache;
`generation_step` then feeds the decoder, at decoder positions. The processors read
the decoder's tokens (start token and continuation), as transformers' do for
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
XLA (the default, `compiled.XLA_BY_DEFAULT`), XLA compiles once per batch size and per shape
bucket: the prompt is left-padded to a multiple of `PROMPT_BUCKET` tokens, the cache
holds a multiple of `NEW_TOKENS_BUCKET` new tokens, and the batch is padded with copies
of its last row to a power of two up to `BATCH_BUCKET_CAP` rows (then a multiple of it;
`batch_bucket`), so that other batch sizes reuse the compiled loops too. The cost: up to
twice the rows' work below the cap (5 prompts decode as 8 rows; 1, 2, 4, 8 ... as
themselves), and at most 63 extra rows above it.

One concern a file (`kbert/models/generation/`); the names below are importable from
the package itself:
    samplers.py       Sampler, GreedySampler, TopKSampler, TopPSampler, RowSampler,
                      BeamSearch (settings), get_sampler, uniform draws
    processors.py     RepetitionPenalty, NoRepeatNGram, MinNewTokens, ForcedEnd
                      (each a class with __call__(scores, step)); Processing (which
                      of them a compiled loop applies), forced_end_of
    stopping.py       StopStrings (in-graph), cut_at_stop
    state.py          left_pad, shape buckets, the prompts' pass, Setting
    decode_sample.py  the greedy/sampled loop (and streaming's step)
    decode_beam.py    the beam loop
    compiled.py       generate_function: a compiled loop per model and Setting
    batching.py       seeds, batch padding, generate_sequences, generate_ids
    text.py           prompt preparation, generate_text, seq2seq_text
    streaming.py      stream_text
"""

from __future__ import annotations

from kbert.models.generation.samplers import (
    SAMPLERS, EARLY_STOPPING, check_settings, uniform, Sampler, GreedySampler,
    TopKSampler, TopPSampler, RowSampler, BeamSearch, get_sampler)
from kbert.models.generation.processors import (
    ForcedEnd, MinNewTokens, NoRepeatNGram, Processing, RepetitionPenalty, Step,
    forced_end_of)
from kbert.models.generation.stopping import StopStrings, cut_at_stop
from kbert.models.generation.state import (
    left_pad, PROMPT_BUCKET, NEW_TOKENS_BUCKET, bucket, Setting)
from kbert.models.generation.compiled import (
    XLA_BY_DEFAULT, compiled_functions, generate_function)
from kbert.models.generation.batching import (
    seed_pair, row_seeds, BATCH_BUCKET_CAP, batch_bucket, generate_sequences,
    generate_ids)
from kbert.models.generation.text import (
    prepare_prompts, prepare_encoder_inputs, until_end, continuation_texts,
    generate_text, seq2seq_text)
from kbert.models.generation.streaming import stream_text

__all__ = [
    "SAMPLERS", "EARLY_STOPPING", "check_settings", "uniform", "Sampler",
    "GreedySampler", "TopKSampler", "TopPSampler", "RowSampler", "BeamSearch",
    "get_sampler", "Processing", "RepetitionPenalty", "NoRepeatNGram", "MinNewTokens",
    "ForcedEnd", "Step", "forced_end_of", "StopStrings", "cut_at_stop", "left_pad",
    "PROMPT_BUCKET", "NEW_TOKENS_BUCKET", "bucket", "Setting", "XLA_BY_DEFAULT",
    "compiled_functions", "generate_function", "seed_pair", "row_seeds",
    "BATCH_BUCKET_CAP", "batch_bucket", "generate_sequences", "generate_ids",
    "prepare_prompts", "prepare_encoder_inputs", "until_end", "continuation_texts",
    "generate_text", "seq2seq_text", "stream_text"]
