"""T5's span corruption (Raffel et al., 2020, section 3.1.4 and 3.3.4) and its
pretraining recipe (the registry's `pretrain` hook of "t5").

Each example is a run of `tokens_length` tokens of the concatenated corpus. About
`noise_density` (15%) of them, in spans of mean length `mean_noise_span_length` (3),
are noise: the encoder reads the text with each noise span replaced by one sentinel
(`<extra_id_0>`, `<extra_id_1>`, ... in order), the decoder writes each sentinel
followed by the span it stands for, and `</s>`:

    Thank you <X> me to your party <Y> week .  ->  <X> for inviting <Y> last <Z>

The mask follows T5's `random_spans_noise_mask`: round(length x density) noise tokens
(at least 1, at most length - 1) in round(noise / mean span) spans (at least 1), noise
and non-noise spans alternating from a non-noise one, every such mask equally likely
(each side's span lengths a uniformly random composition). `tokens_length` is T5's
`random_spans_helper`'s: the most tokens whose corrupted input, with its sentinels and
`</s>`, fits `inputs_length` (568 tokens for 512; targets then 114).
"""

from __future__ import annotations

import tensorflow as tf

from kbert.models.pretraining import PretrainRecipe, PretrainRun, seq2seq_run


def _counts(length, noise_density: float, mean_noise_span_length: float):
    """(noise tokens, noise spans) of a run of `length` tokens (int32 tensors)."""
    length = tf.cast(length, tf.int32)
    noise = tf.cast(tf.round(tf.cast(length, tf.float32) * noise_density), tf.int32)
    noise = tf.minimum(tf.maximum(noise, 1), length - 1)
    spans = tf.cast(tf.round(tf.cast(noise, tf.float32) / mean_noise_span_length), tf.int32)
    return noise, tf.maximum(spans, 1)


def _composition(total, parts, seed):
    """A uniformly random composition of `total` into `parts` positive lengths: the
    parts - 1 places among the total - 1 gaps where a new part starts, drawn by a
    stateless shuffle (`seed` int32 [2])."""
    starts = tf.cast(tf.range(total - 1) < parts - 1, tf.int32)
    order = tf.argsort(tf.random.stateless_uniform(tf.shape(starts), seed=seed))
    starts = tf.concat([[0], tf.gather(starts, order)], axis=0)
    part = tf.cumsum(starts)  # each item's part, 0 .. parts - 1
    return tf.math.unsorted_segment_sum(tf.ones_like(part), part, parts)


def random_spans_noise_mask(length, seeds, noise_density: float = 0.15,
                            mean_noise_span_length: float = 3.0):
    """bool [length]: T5's span mask (see the module docstring). `seeds`: int32 [2, 2],
    one stateless seed for the noise spans' lengths and one for the others'."""
    if noise_density == 0.0:
        return tf.zeros([length], tf.bool)
    full = tf.maximum(tf.cast(length, tf.int32), 2)  # a 1-token run: as if 2, cut after
    noise, spans = _counts(full, noise_density, mean_noise_span_length)
    seeds = tf.convert_to_tensor(seeds, tf.int32)
    noise_lengths = _composition(noise, spans, seeds[0])
    kept_lengths = _composition(full - noise, spans, seeds[1])
    lengths = tf.reshape(tf.stack([kept_lengths, noise_lengths], axis=1), [-1])
    span = tf.repeat(tf.range(2 * spans), lengths)  # each token's span, kept one first
    return tf.equal(span % 2, 1)[:length]


def spans_to_sentinels(tokens, mask, first_sentinel: int):
    """`tokens` [T] with each run of masked tokens replaced by one sentinel, counted
    down from `first_sentinel` (`<extra_id_0>`, then `<extra_id_1>` = one less, ...)."""
    tokens = tf.convert_to_tensor(tokens)
    mask = tf.convert_to_tensor(mask, tf.bool)
    previous = tf.concat([[False], mask[:-1]], axis=0)
    first = tf.logical_and(mask, tf.logical_not(previous))
    sentinel = first_sentinel + 1 - tf.cumsum(tf.cast(first, tokens.dtype))
    tokens = tf.where(first, sentinel, tokens)
    return tf.boolean_mask(tokens, tf.logical_not(tf.logical_and(mask, previous)))


def span_corruption_lengths(inputs_length: int, noise_density: float = 0.15,
                            mean_noise_span_length: float = 3.0) -> tuple[int, int]:
    """(tokens a run, targets length) for encoder inputs of `inputs_length` tokens
    (each noise span one sentinel in both, `</s>` after both)."""
    def lengths(tokens):
        noise = int(round(tokens * noise_density))
        spans = int(round(noise / mean_noise_span_length))
        return tokens - noise + spans + 1, noise + spans + 1

    tokens = inputs_length - 1
    while lengths(tokens + 1)[0] <= inputs_length:
        tokens += 1
    targets = lengths(tokens)[1]
    if noise_density == 0.5 and targets > inputs_length:  # T5's own adjustment
        tokens, targets = tokens - 1, targets - 1
    return tokens, targets


def span_corruption_dataset(texts, tokenizer, inputs_length: int, batch_size: int,
                            noise_density: float = 0.15, mean_noise_span_length: float = 3.0,
                            seed: int = 0, drop_remainder: bool = True) -> tf.data.Dataset:
    """Texts -> batches of span-corruption examples for `T5Seq2SeqLM.fit`: the texts'
    tokens concatenated, cut into runs of `span_corruption_lengths(inputs_length)[0]`
    (the last run shorter), each corrupted with its own stateless seeds (`seed` and
    the run's index: the same examples every epoch and every run). Features: the
    model's four inputs (the decoder's is the target shifted right behind the start
    token); labels `{"logits": targets}`, -1 on padding (`kbert.models.metrics`'s
    `lm_loss` leaves it out)."""
    tokens_length, targets_length = span_corruption_lengths(
        inputs_length, noise_density, mean_noise_span_length)
    if not isinstance(texts, tf.data.Dataset):
        texts = tf.data.Dataset.from_tensor_slices(tf.constant(list(texts), tf.string))
    stream = texts.batch(256).map(
        lambda batch: tf.cast(tokenizer.tokenize(batch), tf.int32).flat_values).unbatch()
    runs = stream.batch(tokens_length).enumerate()
    first_sentinel = tokenizer.sentinel_id(0)
    end, pad = tokenizer.end_token_id, tokenizer.pad_id

    def corrupt(index, run):
        index = tf.cast(index, tf.int32)
        seeds = tf.stack([[seed, 2 * index], [seed, 2 * index + 1]])
        mask = random_spans_noise_mask(tf.size(run), seeds, noise_density,
                                       mean_noise_span_length)
        inputs = tf.concat([spans_to_sentinels(run, mask, first_sentinel), [end]], 0)
        targets = tf.concat([spans_to_sentinels(run, tf.logical_not(mask), first_sentinel),
                             [end]], 0)
        decoder = tf.concat([[pad], targets[:-1]], 0)  # the start token is <pad>

        def padded(x, length, value):
            return tf.pad(x, [[0, length - tf.size(x)]], constant_values=value)

        features = {
            "encoder_token_ids": padded(inputs, inputs_length, pad),
            "encoder_padding_mask": padded(tf.ones_like(inputs), inputs_length, 0),
            "decoder_token_ids": padded(decoder, targets_length, pad),
            "decoder_padding_mask": padded(tf.ones_like(decoder), targets_length, 0)}
        return features, {"logits": padded(targets, targets_length, -1)}

    def shaped(features, labels):
        for name in ("encoder_token_ids", "encoder_padding_mask"):
            features[name] = tf.ensure_shape(features[name], [inputs_length])
        for name in ("decoder_token_ids", "decoder_padding_mask"):
            features[name] = tf.ensure_shape(features[name], [targets_length])
        return features, {"logits": tf.ensure_shape(labels["logits"], [targets_length])}

    examples = runs.map(corrupt, num_parallel_calls=tf.data.AUTOTUNE).map(shaped)
    return examples.batch(batch_size, drop_remainder=drop_remainder)


class T5Pretraining(PretrainRecipe):
    """`T5Seq2SeqLM` on span corruption; `--init_from` a T5 folder gives the
    SentencePiece tokenizer and, unless `--from_scratch`, the weights (a `--preset`
    with --from_scratch: that size with the folder's vocabulary)."""

    needs_folder = True
    specials = 1
    help = "t5: span corruption (--init_from a T5 folder, or --from_scratch)"

    def build(self, args, runtime, texts, optimizer) -> PretrainRun:
        import dataclasses

        from kbert.models.t5 import T5Config, T5Seq2SeqLM

        lines = [t for t in texts() if t.strip()]

        def scratch():  # a SentencePiece model learned from the text
            from kbert.tokenizers.learn import learn_sentencepiece
            from kbert.tokenizers.t5 import T5Tokenizer

            tokenizer = T5Tokenizer(learn_sentencepiece(lines, args.vocab_size))
            return tokenizer, T5Config.preset("tiny", vocab_size=tokenizer.vocab_size)

        tokenizer, config = self.tokenizer_and_config(args, T5Seq2SeqLM, scratch)
        length = args.max_seq_length
        data = span_corruption_dataset(lines, tokenizer, length, args.train_batch_size,
                                       seed=args.seed)
        tokens = int(sum(tokenizer.tokenize(lines).row_lengths().numpy())) if lines else 0
        if tokens == 0:
            raise ValueError("--text_file: no tokens")
        examples = -(-tokens // span_corruption_lengths(length)[0])  # runs, the last shorter
        if args.from_scratch and args.preset not in (None, "demo", "mini"):
            config = T5Config.preset(args.preset, vocab_size=config.vocab_size)
        elif args.from_scratch and (args.preset == "demo" or not args.init_from):
            config = dataclasses.replace(T5Config.preset("tiny"),
                                         vocab_size=config.vocab_size, hidden_size=64,
                                         intermediate_size=128, key_value_size=16)
        return seq2seq_run(args, runtime, optimizer, T5Seq2SeqLM, config, data.repeat(),
                           examples, tokenizer)


pretrain = T5Pretraining()
