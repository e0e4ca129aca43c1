"""Text generation for any causal LM, with a preallocated key/value cache, compiled once
and reused.

A causal LM offers the generation protocol (GPT's `GPTLanguageModel` does):
    end_token_id, max_positions, vocab_size   (ints; end_token_id may be None)
    generation_cache(batch, length)           -> an empty key/value cache
    generation_step(token_ids, positions, key_mask, cache, index)
                                              -> (float32 logits [B, V] of the last
                                                  position, the updated cache)
An encoder-decoder (T5, BART) fits the same loop: its `generation_cache` runs the encoder
once and holds its states beside the decoder's self-attention cache, and its
`generation_step` attends to both. Samplers are objects (`Sampler`: greedy, top-k, top-p;
`get_sampler` turns the string arguments into one); `prepare_prompts` is the one
in-graph prompt preparation that `generate` and the generate SavedModel share.

The prompts are left-aligned to the right (left padding), so that every row's next
token is written at the same cache index; positions count from each row's first real
token, and the padding is masked out of attention (as Hugging Face's `generate` does
for decoder-only models). One `tf.function` per decoding setting, with dynamic batch,
prompt and continuation lengths in its signature, serves every later call: it is traced
once, not once per call or per shape. With XLA (the default, see `_use_xla`), XLA
compiles once per batch size and per shape bucket: the prompt is left-padded to a
multiple of `PROMPT_BUCKET` tokens and the cache holds a multiple of `NEW_TOKENS_BUCKET`
new tokens, so that prompts and continuations of other lengths reuse the compiled loop.

Decoding:
    greedy: the most likely token.
    top_k: sampled among the k most likely tokens (Fan et al., 2018).
    top_p: sampled among the fewest most likely tokens whose probabilities sum to at
        least p (nucleus sampling, Holtzman et al., 2020); the token that crosses p is
        kept, and so is always the most likely one.
    temperature divides the logits before top_k / top_p sampling (not greedy).
Sampling is stateless: the same seed gives the same text, whatever ran before, with XLA
(`generate`'s default) and without it (`jit_compile=False`, the generate SavedModel): the
uniform numbers come from integer hashing of the seed, the step and the row (`uniform`),
which XLA and TensorFlow's kernels compute alike (TensorFlow's stateless random ops do
not). The token drawn is the first whose cumulative probability exceeds the number; the
two paths round the logits differently in the last bits, so a draw that falls within
that rounding of a boundary (about one in a million) can still differ.
A row that produced the end token produces it again until every row has (the loop then
stops), and the end token is not part of the returned text.
"""

from __future__ import annotations

import contextlib
import logging
import random
import weakref

import numpy as np
import tensorflow as tf
from keras import ops

from kbert.layers.dense import separate_bias_add
from kbert.layers.masks import positions_from_mask

logger = logging.getLogger(__name__)

SAMPLERS = ("greedy", "top_k", "top_p")


def check_settings(sampler: str, temperature: float, top_k, top_p) -> None:
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler={sampler!r}: choose from {SAMPLERS}")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature}: must be more than 0")
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


def uniform(seed, batch):
    """float32 [batch] in (0, 1) from an int32 [2] seed and the row index, by integer
    hashing. TensorFlow's stateless random ops draw other numbers under XLA than
    without it; int32 arithmetic is the same on both, so a seed gives the same draws
    in `generate` (XLA) and in the plain graph of `generate_ids(jit_compile=False)` and
    of the generate SavedModel."""
    rows = tf.range(batch, dtype=tf.int32)
    x = _mix(tf.bitwise.bitwise_xor(seed[1], _mix(tf.bitwise.bitwise_xor(
        seed[0], _mix(rows + tf.constant(0x632BE5AB, tf.int32))))))
    return (tf.cast(_shift(x, 8), tf.float32) + 0.5) * (1.0 / (1 << 24))


def _categorical(logits, seed):
    """One draw per row of softmax(logits) [B, n] whose columns are sorted best first,
    by the inverse CDF of `uniform` (-inf columns, at the end, are never drawn)."""
    probs = tf.nn.softmax(logits, axis=-1)
    cdf = tf.cumsum(probs, axis=-1)
    u = uniform(seed, tf.shape(logits)[0]) * cdf[:, -1]
    pick = tf.reduce_sum(tf.cast(cdf <= u[:, None], tf.int32), axis=-1)
    last = tf.reduce_sum(tf.cast(probs > 0, tf.int32), axis=-1) - 1
    return tf.maximum(tf.minimum(pick, last), 0)


class Sampler:
    """Picks the next token: `sampler(logits [B, V] float32, seed int32 [2]) -> int32
    ids [B]`. `key()` names the setting (one compiled loop per model and key)."""

    def __call__(self, logits, seed):
        raise NotImplementedError

    def key(self) -> tuple:
        return (type(self).__name__,)


class GreedySampler(Sampler):
    """The most likely token."""

    def __call__(self, logits, seed):
        return tf.argmax(logits, axis=-1, output_type=tf.int32)


class TopKSampler(Sampler):
    """Sampled among the k most likely tokens after dividing the logits by
    `temperature` (Fan et al., 2018)."""

    def __init__(self, k: int, temperature: float = 1.0):
        self.k, self.temperature = int(k), float(temperature)

    def __call__(self, logits, seed):
        logits = logits / self.temperature
        k = min(self.k, logits.shape[-1]) if logits.shape[-1] else self.k
        values, indices = tf.math.top_k(logits, k=k)  # (B, k), best first
        return tf.gather(indices, _categorical(values, seed), batch_dims=1)

    def key(self) -> tuple:
        return ("top_k", self.k, self.temperature)


class TopPSampler(Sampler):
    """Sampled among the fewest most likely tokens whose probabilities sum to at least
    p (nucleus sampling, Holtzman et al., 2020), after dividing the logits by
    `temperature`; the token that crosses p is kept, and so is always the best one."""

    def __init__(self, p: float, temperature: float = 1.0):
        self.p, self.temperature = float(p), float(temperature)

    def __call__(self, logits, seed):
        logits = logits / self.temperature
        order = tf.argsort(logits, axis=-1, direction="DESCENDING", stable=True)
        sorted_logits = tf.gather(logits, order, batch_dims=1)
        probs = tf.nn.softmax(sorted_logits, axis=-1)
        before = tf.cumsum(probs, axis=-1, exclusive=True)
        keep = before < self.p
        keep = tf.concat([tf.ones_like(keep[:, :1]), keep[:, 1:]], axis=-1)  # the best
        sorted_logits = tf.where(keep, sorted_logits, tf.constant(-np.inf, logits.dtype))
        return tf.gather(order, _categorical(sorted_logits, seed), batch_dims=1)

    def key(self) -> tuple:
        return ("top_p", self.p, self.temperature)


def get_sampler(sampler, temperature: float = 1.0, top_k=None, top_p=None,
                vocab_size: int | None = None) -> Sampler:
    """A `Sampler` from `generate`'s arguments (a `Sampler` passes through). `top_k`
    past the vocabulary samples from all of it (as transformers)."""
    if isinstance(sampler, Sampler):
        return sampler
    check_settings(sampler, temperature, top_k, top_p)
    if sampler == "greedy":
        return GreedySampler()
    if sampler == "top_k":
        k = int(top_k) if vocab_size is None else min(int(top_k), int(vocab_size))
        return TopKSampler(k, temperature)
    return TopPSampler(float(top_p), temperature)


def choose(logits, sampler: str, temperature: float, top_k, top_p, seed):
    """float32 logits [B, V] -> int32 token ids [B] (`get_sampler`'s sampler). `seed`
    is an int32 [2] Tensor."""
    return get_sampler(sampler, temperature, top_k, top_p)(logits, seed)


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


def _build(lm, sampler: Sampler, end_token_id, jit_compile=False):
    stops = end_token_id is not None and end_token_id >= 0
    end = tf.constant(end_token_id if stops else 0, tf.int32)
    # On CPUs, XLA's fused one-vector product + bias reads the weights more slowly than
    # its product alone (see kbert.layers.dense; GPT-2 124M's block products: 23.3
    # against 19.5 ms a step, bench_gpt.py --only products). Not on GPUs, where the
    # fused add is free.
    split_bias = jit_compile and not tf.config.list_logical_devices("GPU")

    @tf.function(input_signature=[
        tf.TensorSpec([None, None], tf.int32, name="token_ids"),
        tf.TensorSpec([None, None], tf.int32, name="padding_mask"),
        tf.TensorSpec([], tf.int32, name="max_new_tokens"),
        tf.TensorSpec([2], tf.int32, name="seed"),
        tf.TensorSpec([], tf.int32, name="capacity")], autograph=False,
        jit_compile=jit_compile)
    def run(token_ids, padding_mask, max_new_tokens, seed, capacity):
        with separate_bias_add() if split_bias else contextlib.nullcontext():
            return loop(token_ids, padding_mask, max_new_tokens, seed, capacity)

    def loop(token_ids, padding_mask, max_new_tokens, seed, capacity):
        # `capacity` (>= max_new_tokens) sizes the cache and the output; only it, not
        # max_new_tokens, is a compile-time constant for XLA.
        batch, prompt = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
        cache = lm.generation_cache(batch, prompt + capacity)
        key_mask = tf.concat([padding_mask, tf.ones([batch, capacity], tf.int32)], 1)
        logits, cache = lm.generation_step(token_ids, positions_from_mask(padding_mask),
                                           key_mask, cache, 0)  # (B, V) float32
        lengths = tf.reduce_sum(padding_mask, axis=1)  # (B,)
        out = tf.fill([batch, capacity], end)
        done = tf.zeros([batch], tf.bool)

        def cond(t, logits, cache, done, out):
            return tf.logical_and(t < max_new_tokens, tf.logical_not(tf.reduce_all(done)))

        def body(t, logits, cache, done, out):
            token = sampler(logits, tf.stack([seed[0], seed[1] + t]))
            if stops:
                token = tf.where(done, end, token)
                done = tf.logical_or(done, tf.equal(token, end))
            out = ops.slice_update(out, (0, t), token[:, None])
            logits, cache = lm.generation_step(token[:, None], (lengths + t)[:, None],
                                               key_mask, cache, prompt + t)
            return t + 1, logits, cache, done, out

        cache_shapes = tf.nest.map_structure(lambda x: tf.TensorShape([None] * x.shape.rank),
                                             cache)
        shapes = (tf.TensorShape([]), tf.TensorShape([None, None]), cache_shapes,
                  tf.TensorShape([None]), tf.TensorShape([None, None]))
        *_, out = tf.while_loop(cond, body, (tf.constant(0), logits, cache, done, out),
                                shape_invariants=shapes)
        return out

    def decode(token_ids, padding_mask, max_new_tokens, seed):
        max_new_tokens = tf.convert_to_tensor(max_new_tokens, tf.int32)
        token_ids, padding_mask, capacity = bucket(token_ids, padding_mask, max_new_tokens,
                                                   jit_compile)
        new = run(token_ids, padding_mask, max_new_tokens, tf.convert_to_tensor(seed, tf.int32),
                  capacity)
        return new[:, :max_new_tokens]

    decode.compiled = run
    return decode


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


# The compiled decoding functions of each model, by setting (a model's entry goes with it).
_FUNCTIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def compiled_functions(lm) -> dict:
    """The decoding functions built for `lm` so far, by (sampler key, end token, XLA)."""
    return _FUNCTIONS.setdefault(lm, {})


def generate_function(lm, sampler="greedy", temperature=1.0, top_k=None, top_p=None,
                      end_token_id=None, jit_compile: bool | None = None):
    """The compiled decoding function for these settings (built once per model and
    setting): (token_ids [B, P] left-padded, padding_mask [B, P], max_new_tokens,
    seed int32 [2]) -> int32 [B, max_new_tokens]. Callable eagerly and inside a
    `tf.function`. `sampler`: a name (with temperature, top_k, top_p) or a `Sampler`;
    `jit_compile`: None is `_use_xla()`."""
    chosen = get_sampler(sampler, temperature, top_k, top_p, vocab_size=lm.vocab_size)
    jit_compile = _use_xla() if jit_compile is None else bool(jit_compile)
    key = (*chosen.key(), end_token_id, jit_compile)
    functions = compiled_functions(lm)
    if key not in functions:
        functions[key] = _build(lm, chosen, end_token_id, jit_compile)
    return functions[key]


def seed_pair(seed: int) -> list[int]:
    """An int seed -> the [2] int32 seed of TensorFlow's stateless random ops."""
    seed = int(seed)
    return [seed % (2 ** 31), (seed // (2 ** 31)) % (2 ** 31)]


def _seed(seed):
    if seed is None:
        seed = random.SystemRandom().randrange(2 ** 31)
    return tf.constant(seed_pair(seed), tf.int32)


def generate_ids(lm, token_ids, padding_mask, max_new_tokens, sampler="greedy",
                 temperature=1.0, top_k=None, top_p=None, seed=None, end_token_id=-1,
                 jit_compile=None):
    """New tokens [B, max_new_tokens] after left- or right-padded prompts of ids.
    `end_token_id=-1` means the model's."""
    if end_token_id == -1:
        end_token_id = lm.end_token_id
    ids, mask = left_pad(token_ids, padding_mask)
    if int(max_new_tokens) < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens}: must be at least 1")
    limit = lm.max_positions
    longest = int(tf.reduce_max(tf.reduce_sum(mask, axis=1)))
    if longest + int(max_new_tokens) > limit:
        raise ValueError(f"a prompt of {longest} tokens + max_new_tokens={max_new_tokens} "
                         f"exceeds the model's {limit} positions")
    run = generate_function(lm, sampler, temperature, top_k, top_p, end_token_id,
                            jit_compile=jit_compile)
    return run(ids, mask, tf.constant(int(max_new_tokens), tf.int32), _seed(seed))


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


def until_end(new, end_token_id):
    """The new tokens [B, N] up to (without) each row's first end token: RaggedTensor."""
    if end_token_id is None:
        return tf.RaggedTensor.from_tensor(new)
    before = tf.equal(tf.cumsum(tf.cast(tf.equal(new, end_token_id), tf.int32), axis=1), 0)
    return tf.ragged.boolean_mask(new, before)


def generate_text(lm, prompts, max_new_tokens=32, sampler="greedy", temperature=1.0,
                  top_k=None, top_p=None, seed=None, jit_compile=None, tokenizer=None):
    """Strings in, strings out: each prompt followed by its continuation (up to the end
    token, which is left out). An empty prompt starts from the end token, as GPT-2's
    unconditional samples do; a prompt longer than the model's positions less
    `max_new_tokens` keeps its last tokens (with a warning), as the generate export.
    `tokenizer`: default `lm.tokenizer`."""
    tokenizer = tokenizer if tokenizer is not None else getattr(lm, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("generate() needs a tokenizer: load the model with "
                         f"{type(lm).__name__}.from_pretrained on a folder with one, or "
                         "set model.tokenizer")
    single = isinstance(prompts, str)
    if not single and not list(prompts):
        return []
    texts = tf.constant([prompts] if single else list(prompts))
    end = lm.end_token_id
    keep = lm.max_positions - int(max_new_tokens)
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
    new = generate_ids(lm, dense, mask, max_new_tokens, sampler, temperature, top_k, top_p,
                       seed, jit_compile=jit_compile)
    new = until_end(new, end)
    # The continuation is what decoding prompt + new adds to decoding the prompt alone:
    # GPT-1's BPE marks word ends (`</w>`), so the space between the prompt's last word
    # and the first new one belongs to neither part decoded apart. For GPT-2's bytes
    # this is the new tokens' own text.
    head = tokenizer.detokenize(ids)
    full = tokenizer.detokenize(tf.concat([ids, new], axis=1))
    start = tf.strings.length(head)
    text = tf.strings.join([texts, tf.strings.substr(full, start,
                                                     tf.strings.length(full) - start)])
    out = [t.decode("utf-8", "replace") for t in text.numpy()]
    return out[0] if single else out
