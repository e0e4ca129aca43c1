"""BART's denoising pretraining (Lewis et al., 2020, section 2.2) and its recipe (the
registry's `pretrain` hook of "bart").

Each example is a document (consecutive lines, one sentence a line, up to a blank line)
cut to whole sentences that fit `max_seq_length` with `<s>` and `</s>`. The decoder
writes the document as it is; the encoder reads it corrupted by the paper's two noises
that its best model combines (fairseq's `DenoisingDataset` with bart.large's settings):
- sentence permutation: the sentences in a random order;
- text infilling: spans of tokens, their lengths drawn from Poisson(`poisson_lambda`)
  until `mask_ratio` of the tokens are covered, each span replaced by one `<mask>`
  (a 0-length span inserts one at a random place); overlapping spans merge into one,
  adjacent ones keep a mask each. `random_ratio` of the spans (and of the insertions)
  get a random token instead (fairseq's `mask_random`). `infill` follows the rules of
  fairseq 0.12.2's `add_whole_word_mask` and `add_insertion_noise`, and
  tests/test_bart_noise.py runs them against each other.
Spans are over tokens (fairseq's default; its whole-word option is not built). Every
example's noise comes from its own generator, seeded with `seed` and the example's
index: the same data every epoch and every run.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from kbert.models.pretraining import PretrainRecipe, PretrainRun, seq2seq_run

logger = logging.getLogger(__name__)


def documents(lines, tokenizer, max_tokens: int) -> list[list[np.ndarray]]:
    """Lines (a blank one ends a document) -> documents as lists of sentence ids, each
    cut into pieces of whole sentences of at most `max_tokens` tokens (a longer
    sentence is cut alone)."""
    docs, current = [], []
    lines = list(lines)
    nonblank = [line for line in lines if line.strip()]
    ids = iter(tokenizer.tokenize(nonblank).to_list() if nonblank else [])  # one call
    for line in lines + [""]:
        if line.strip():
            current.append(np.asarray(next(ids), np.int32))
        elif current:
            docs.append(current)
            current = []
    out, cut = [], 0
    for doc in docs:
        piece, size = [], 0
        for sentence in doc:
            cut += len(sentence) > max_tokens
            sentence = sentence[:max_tokens]
            if piece and size + len(sentence) > max_tokens:
                out.append(piece)
                piece, size = [], 0
            piece.append(sentence)
            size += len(sentence)
        if piece:
            out.append(piece)
    if cut:
        logger.warning("%d sentence(s) longer than %d tokens (--max_seq_length less <s> and "
                       "</s>) keep their first %d", cut, max_tokens, max_tokens)
    return out


def infill(tokens: np.ndarray, rng: np.random.Generator, mask_id: int, vocab_size: int,
           mask_ratio: float = 0.3, poisson_lambda: float = 3.0,
           random_ratio: float = 0.1) -> np.ndarray:
    """Text infilling (see the module docstring) of ids [T] -> the noised ids, by the
    rules of fairseq's `DenoisingDataset.add_whole_word_mask` over tokens (replace_length
    1, span-poisson): span lengths drawn until they cover `mask_ratio` of the tokens (the
    last one cut to the budget); the spans of length 0 become insertions; each other span
    starts at a distinct token, which becomes `<mask>` (or, for `random_ratio` of the
    spans, a random token), and the rest of the span is deleted (up to the end), so that
    overlapping spans merge and adjacent ones keep a mask each; then the insertions go
    to distinct random places (`add_insertion_noise`: the first ceil(k * `random_ratio`)
    of them random tokens, the rest `<mask>`). Random tokens are ids 1 .. vocab_size - 1,
    as fairseq's."""
    n = len(tokens)
    goal = int(np.ceil(n * mask_ratio))
    if n == 0 or goal == 0:
        return tokens.copy()
    lengths = []
    while sum(lengths) < goal:
        lengths.append(int(rng.poisson(poisson_lambda)))
    lengths[-1] -= sum(lengths) - goal  # the last span ends at the goal
    spans = np.asarray([length for length in lengths if length > 0], np.int64)
    inserts = len(lengths) - len(spans)
    out = np.array(tokens, copy=True)
    if len(spans):
        starts = rng.permutation(n)[:len(spans)]
        random = rng.random(len(spans)) < random_ratio
        out[starts] = mask_id
        out[starts[random]] = rng.integers(1, vocab_size, int(random.sum()))
        keep = np.ones(n, bool)
        for start, length in zip(starts, spans):
            keep[start + 1:start + length] = False
        out = out[keep]
    if inserts:
        size = len(out) + inserts
        where = rng.permutation(size)[:inserts]
        randoms = int(np.ceil(inserts * random_ratio))
        noised = np.zeros(size, bool)
        noised[where] = True
        result = np.empty(size, out.dtype)
        result[~noised] = out
        result[where[randoms:]] = mask_id
        result[where[:randoms]] = rng.integers(1, vocab_size, randoms)
        out = result
    return out.astype(np.int32)


def denoising_example(sentences, rng, tokenizer, mask_ratio=0.3, poisson_lambda=3.0,
                      random_ratio=0.1, permute=True):
    """(encoder ids, target ids), each with `<s>` ... `</s>`: the document's sentences
    permuted (`permute`) and infilled, and the document."""
    order = rng.permutation(len(sentences)) if permute else np.arange(len(sentences))
    source = np.concatenate([sentences[i] for i in order])
    target = np.concatenate(sentences)
    noised = infill(source, rng, tokenizer.mask_id, tokenizer.vocab_size, mask_ratio,
                    poisson_lambda, random_ratio)
    start, end = [tokenizer.cls_id], [tokenizer.sep_id]
    return (np.concatenate([start, noised, end]).astype(np.int32),
            np.concatenate([start, target, end]).astype(np.int32))


def denoising_dataset(docs, tokenizer, max_seq_length: int, batch_size: int,
                      decoder_start_token_id: int = 2, seed: int = 0,
                      drop_remainder: bool = True, **noise) -> tf.data.Dataset:
    """`documents(lines, tokenizer, max_seq_length - 2)` -> batches for
    `BartSeq2SeqLM.fit`: the model's four inputs (the decoder's is the target shifted
    right behind `decoder_start_token_id`) and labels `{"logits": target}`, -1 on
    padding. An endless stream (documents in a shuffled order each pass, the order and
    the noise seeded). `noise`: `denoising_example`'s settings."""
    if not docs:
        raise ValueError("no text: every line is blank")
    pad = tokenizer.pad_id

    def padded(ids, value):
        out = np.full(max_seq_length, value, np.int32)
        ids = ids[:max_seq_length]
        out[:len(ids)] = ids
        return out

    def examples():
        epoch = 0
        while True:
            order = np.random.default_rng([seed, epoch]).permutation(len(docs))
            for index in order:
                rng = np.random.default_rng([seed, epoch, int(index)])
                source, target = denoising_example(docs[index], rng, tokenizer, **noise)
                decoder = np.concatenate([[decoder_start_token_id], target[:-1]])
                yield ({"encoder_token_ids": padded(source, pad),
                        "encoder_padding_mask": padded(np.ones_like(source), 0),
                        "decoder_token_ids": padded(decoder, pad),
                        "decoder_padding_mask": padded(np.ones_like(decoder), 0)},
                       {"logits": padded(target, -1)})
            epoch += 1

    spec = tf.TensorSpec([max_seq_length], tf.int32)
    data = tf.data.Dataset.from_generator(
        examples, output_signature=({name: spec for name in (
            "encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
            "decoder_padding_mask")}, {"logits": spec}))
    return data.batch(batch_size, drop_remainder=drop_remainder)


class BartPretraining(PretrainRecipe):
    """`BartSeq2SeqLM` on text infilling + sentence permutation; `--init_from` a BART
    folder gives the tokenizer and, unless `--from_scratch`, the weights."""

    needs_folder = True
    specials = 2
    help = "bart: denoising (--init_from a BART folder, or --from_scratch)"

    def build(self, args, runtime, texts, optimizer) -> PretrainRun:
        import dataclasses

        from kbert import hub
        from kbert.models.bart import BartConfig
        from kbert.models.bart.checkpoints import read_folder, with_generation_config
        from kbert.tokenizers.bart import BartTokenizer

        if not args.init_from:  # --from_scratch: a byte-level BPE learned from the text
            from kbert.models.pretraining import scratch_config
            from kbert.tokenizers.learn import learn_byte_bpe
            from kbert.tokenizers.roberta import SPECIAL_TOKENS

            lines = texts()
            vocab, merges = learn_byte_bpe(lines, args.vocab_size, SPECIAL_TOKENS)
            config = scratch_config(BartConfig, args.preset, dict(
                hidden_size=64, encoder_intermediate_size=128, decoder_intermediate_size=128,
                max_position_embeddings=max(args.max_seq_length, 64)), vocab_size=len(vocab))
            tokenizer = BartTokenizer(vocab, merges,
                                      seq_length=config.max_position_embeddings)
            return self._run(args, runtime, optimizer, lambda: lines, tokenizer, config)
        # The folder's config and tokenizer only: its weights are read once, by the run's
        # model (`seq2seq_run`), not here too.
        path = hub.resolve(args.init_from)
        if not BartTokenizer.folder_has_files(path):
            raise ValueError(f"--init_from {args.init_from}: no vocab.json + merges.txt")
        tokenizer = BartTokenizer.from_pretrained(path)
        config, _, _, fmt, _ = read_folder(path)
        if fmt == "hf":
            config = with_generation_config(config, path)
        if args.from_scratch and args.preset == "demo":
            config = dataclasses.replace(BartConfig.preset("tiny"), vocab_size=config.vocab_size,
                                         hidden_size=64, encoder_intermediate_size=128,
                                         decoder_intermediate_size=128,
                                         max_position_embeddings=max(args.max_seq_length, 64))
        elif args.from_scratch and args.preset not in (None, "mini"):
            config = BartConfig.preset(args.preset, vocab_size=config.vocab_size)
        return self._run(args, runtime, optimizer, texts, tokenizer, config)

    @staticmethod
    def _run(args, runtime, optimizer, texts, tokenizer, config) -> PretrainRun:
        from kbert.models.bart import BartSeq2SeqLM

        docs = documents(texts(), tokenizer, args.max_seq_length - 2)
        if not docs:
            raise ValueError("--text_file: every line is blank")
        data = denoising_dataset(docs, tokenizer, args.max_seq_length,
                                 args.train_batch_size, config.decoder_start_token_id,
                                 seed=args.seed)
        return seq2seq_run(args, runtime, optimizer, BartSeq2SeqLM, config, data, len(docs),
                           tokenizer)


pretrain = BartPretraining()
