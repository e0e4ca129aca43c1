"""Text in, text out: prompt preparation (in-graph, shared with the exports),
`generate_text` for causal LMs and `seq2seq_text` for encoder-decoders."""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from kbert.models.generation.stopping import cut_at_stop
from kbert.models.generation.state import left_pad
from kbert.models.generation.batching import generate_sequences

logger = logging.getLogger(__name__)


def prepare_prompts(tokenizer, prompts, keep: int, start_id: int, suffix_ids=()):
    """In-graph prompt preparation, shared by `generate` and the generate SavedModel:
    tf.string [B] -> (ids RaggedTensor [B, (P)] int32, token_ids [B, P] left-padded,
    padding_mask [B, P], cut [B] bool). An empty prompt starts from `start_id` (GPT-2's
    unconditional samples start from its end token); a prompt longer than `keep`
    tokens keeps its last `keep` (`cut` says which were). `suffix_ids`: token ids put
    after every prompt's (a decoder-only seq2seq model's separator)."""
    ids = tf.cast(tokenizer.tokenize(prompts), tf.int32)
    if len(suffix_ids):
        rows = tf.shape(prompts, out_type=tf.int64)[0]
        suffix = tf.RaggedTensor.from_uniform_row_length(
            tf.tile(tf.constant(list(suffix_ids), tf.int32), [rows]), len(suffix_ids))
        ids = tf.concat([ids, suffix], axis=1)
    empty = tf.equal(ids.row_lengths(), 0)
    start = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(empty, tf.int32))], tf.constant(start_id, tf.int32)),
        tf.cast(empty, tf.int64), validate=False)
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


def tokenizer_of(lm, tokenizer):
    tokenizer = tokenizer if tokenizer is not None else lm.tokenizer
    if tokenizer is None:
        raise ValueError("generate() needs a tokenizer: load the model with "
                         f"{type(lm).__name__}.from_pretrained on a folder with one, or "
                         "set model.tokenizer")
    return tokenizer


def encode_prompts(lm, tokenizer, texts, max_new_tokens):
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
    tokenizer = tokenizer_of(lm, tokenizer)
    single = isinstance(prompts, str)
    if not single and not list(prompts):
        return []
    prompts = [prompts] if single else list(prompts)
    texts = tf.constant(prompts)
    ids, dense, mask = encode_prompts(lm, tokenizer, texts, max_new_tokens)
    out, n, new = _generate(lm, tokenizer, dense, mask, len(prompts), max_new_tokens, sampler,
                            temperature, top_k, top_p, seed, jit_compile, options)
    repeated = tf.gather(ids, np.repeat(np.arange(len(prompts)), n))
    results = _results(out, continuation_texts(tokenizer, repeated, new),
                       [prompts[r // n] for r in range(len(out["lengths"]))], options,
                       return_scores)
    return results[0] if single and n == 1 else results


def _generate(lm, tokenizer, dense, mask, rows: int, max_new_tokens, sampler, temperature,
              top_k, top_p, seed, jit_compile, options):
    """(`generate_sequences`' output, sequences per row, the new tokens up to the end
    token: a RaggedTensor)."""
    out = generate_sequences(lm, dense, mask, max_new_tokens, sampler, temperature, top_k,
                             top_p, seed, jit_compile=jit_compile, tokenizer=tokenizer,
                             **options)
    new = until_end(tf.constant(out["token_ids"]), None, tf.constant(out["lengths"]))
    return out, len(out["lengths"]) // rows, new


def _results(out, texts, prefixes, options, return_scores: bool) -> list:
    """Each sequence's text (cut at its first stop string, after its prefix: the prompt
    of a causal LM), or with `return_scores` a dict {text, token_ids, logprobs, score}
    (the tokens up to the end or stop token)."""
    stop = options.get("stop") or ()
    stop = [stop] if isinstance(stop, (str, int)) else list(stop)
    results = []
    for r, (text, prefix) in enumerate(zip(texts, prefixes)):
        text = prefix + cut_at_stop(text, stop)[0]
        if return_scores:
            length = int(out["lengths"][r])
            results.append({"text": text, "token_ids": out["token_ids"][r, :length].tolist(),
                            "logprobs": out["logprobs"][r, :length].tolist(),
                            "score": float(out["scores"][r])})
        else:
            results.append(text)
    return results


def seq2seq_text(lm, texts, max_new_tokens=32, sampler="greedy", temperature=1.0,
                 top_k=None, top_p=None, seed=None, jit_compile=None, tokenizer=None,
                 return_scores=False, **options):
    """An encoder-decoder's text to text: each input's output text (up to, without,
    the end token or a stop), n = num_return_sequences per input, input 0's first;
    a str for a str when n is 1. The inputs are the tokenizer's `encoder_ids` (T5: the
    text and `</s>`; BART: `<s>` text `</s>`); one longer than `lm.max_input_length`
    (where the model has one) is an error naming it (`generate_sequences`).
    `return_scores`: dicts {text, token_ids, logprobs, score}."""
    tokenizer = tokenizer_of(lm, tokenizer)
    single = isinstance(texts, str)
    items = [texts] if single else list(texts)
    if not items:
        return []
    ids = tf.cast(tokenizer.encoder_ids(tf.constant(items)), tf.int32)
    dense = ids.to_tensor(0)
    mask = tf.sequence_mask(ids.row_lengths(), tf.shape(dense)[1], tf.int32)
    out, n, new = _generate(lm, tokenizer, dense, mask, len(items), max_new_tokens, sampler,
                            temperature, top_k, top_p, seed, jit_compile, options)
    texts = [t.decode("utf-8", "replace") for t in tokenizer.detokenize(new).numpy()]
    results = _results(out, texts, [""] * len(texts), options, return_scores)
    return results[0] if single and n == 1 else results
