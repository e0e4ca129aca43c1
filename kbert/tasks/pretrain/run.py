"""The pretraining runs behind `python -m kbert.tasks.pretrain --model bert|gpt|elmo`.

- bert: `BertPretrainer` (masked LM and next sentence) on `create_data`'s TFRecords
  (`--input_file`, fixed masks) or on text (`--text_file`, one sentence a line, blank
  lines between documents: sentence pairs made as `create_data` makes them, once, and
  masks drawn anew for every batch by `DynamicMasking`).
- gpt: `GPTLanguageModel` as a causal LM on text (`--init_from` a GPT folder, for its
  tokenizer and, unless `--from_scratch`, its weights).
- elmo: `ELMoLanguageModel`, the biLM on text (a word vocabulary built from the text).

Every run trains with `kbert.training` (strategies, mixed precision, XLA, AdamW or LAMB,
gradient accumulation, checkpoints every `--steps_per_loop` steps that a rerun resumes
from, TensorBoard) and ends with a model folder in `OUTPUT_DIR/model` that the task
commands' `--init_from` reads.
"""

from __future__ import annotations

import json
import logging
import os
import random

import keras
import numpy as np
import tensorflow as tf

from kbert import training
from kbert.io import atomic_file, read_json
from kbert.tasks.common import fit_options

logger = logging.getLogger(__name__)

HEADS_MISSING = "no pretraining_heads.safetensors"
# --preset demo: the size the task commands train from scratch on their bundled data.
DEMO_CONFIG = dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512)


def read_texts(pattern: str) -> list[str]:
    from kbert.tasks.pretrain.create_data import expand_inputs

    files = expand_inputs(pattern, "--text_file")
    lines = []
    for path in files:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"--text_file {path}, line {number}: not UTF-8 "
                                     f"({e.reason} at byte {e.start})") from None
                lines.append(line.rstrip("\n").rstrip("\r"))
    return lines


# ---------------------------------------------------------------------------- BERT
def record_lengths(files: list[str]) -> tuple[int, int]:
    """(max_seq_length, max_predictions_per_seq) of `create_data` records."""
    first = next(iter(tf.data.TFRecordDataset(files[:1])), None)
    if first is None:
        raise ValueError(f"--input_file {files[0]}: no records")
    feature = tf.train.Example.FromString(first.numpy()).features.feature
    for name in ("input_ids", "masked_lm_positions", "next_sentence_labels"):
        if name not in feature:
            raise ValueError(f"--input_file {files[0]}: no {name!r} feature (not a "
                             "create_data / create_pretraining_data.py file)")
    return (len(feature["input_ids"].int64_list.value),
            len(feature["masked_lm_positions"].int64_list.value))


def record_dataset(files: list[str]) -> tf.data.Dataset:
    seq, preds = record_lengths(files)
    spec = {name: tf.io.FixedLenFeature([seq], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids")}
    spec.update({name: tf.io.FixedLenFeature([preds], tf.int64)
                 for name in ("masked_lm_positions", "masked_lm_ids")})
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([preds], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)

    def parse(record):
        f = tf.io.parse_single_example(record, spec)
        f = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in f.items()}
        return {"token_ids": f["input_ids"], "segment_ids": f["segment_ids"],
                "padding_mask": f["input_mask"],
                "masked_lm_positions": f["masked_lm_positions"],
                "masked_lm_ids": f["masked_lm_ids"],
                "masked_lm_weights": f["masked_lm_weights"],
                "next_sentence_labels": f["next_sentence_labels"]}

    return tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                                              deterministic=True)


def text_pairs(files: list[str], tokenizer, seq: int, seed: int, short_seq_prob: float = 0.1,
               dupe_factor: int = 1) -> dict:
    """Sentence pairs as `create_data` makes them, unmasked: arrays [N, seq] and the
    next-sentence labels [N, 1]."""
    from kbert.tasks.pretrain import create_data as cd

    vocab = tokenizer.vocabulary
    documents = cd.read_documents(files, tokenizer)
    if not documents:
        raise ValueError("--text_file: no text")
    options = cd.Options(max_seq_length=seq, dupe_factor=dupe_factor,
                         short_seq_prob=short_seq_prob)
    instances = cd.create_instances(documents, vocab, options, random.Random(seed))
    token_id = {t: i for i, t in enumerate(vocab)}
    n = len(instances)
    arrays = {"token_ids": np.zeros((n, seq), np.int32),
              "segment_ids": np.zeros((n, seq), np.int32),
              "padding_mask": np.zeros((n, seq), np.int32),
              "next_sentence_labels": np.zeros((n, 1), np.int32)}
    for k, inst in enumerate(instances):
        tokens = list(inst.tokens)
        for position, label in zip(inst.masked_lm_positions, inst.masked_lm_labels):
            tokens[position] = label  # the static mask undone: masks come per batch
        arrays["token_ids"][k, :len(tokens)] = [token_id[t] for t in tokens]
        arrays["segment_ids"][k, :len(tokens)] = inst.segment_ids
        arrays["padding_mask"][k, :len(tokens)] = 1
        arrays["next_sentence_labels"][k, 0] = int(inst.is_random_next)
    return arrays


def _bert_split(features):
    from kbert.models.bert.pretrainer import TARGETS

    inputs = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask",
                                       "masked_lm_positions")}
    return inputs, {k: features[k] for k in TARGETS}


def bert_data(args, tokenizer):
    """(endless batched dataset, examples, mean real tokens an example)."""
    if args.input_file:
        from kbert.tasks.pretrain.create_data import expand_inputs

        files = expand_inputs(args.input_file)
        seq, preds = record_lengths(files)
        if seq > args.max_seq_length_limit:
            raise ValueError(f"--input_file: records of {seq} tokens; the model has "
                             f"{args.max_seq_length_limit} positions")
        examples = sum(1 for _ in tf.data.TFRecordDataset(files))
        ds = training.finalize_dataset(record_dataset(files), args.train_batch_size,
                                       training=True, seed=args.seed)
        return ds.map(_bert_split), examples, float(seq)
    from kbert.tasks.pretrain.masking import DynamicMasking

    from kbert.tasks.pretrain.create_data import expand_inputs

    arrays = text_pairs(expand_inputs(args.text_file, "--text_file"), tokenizer,
                        args.max_seq_length, args.seed)
    masking = DynamicMasking(tokenizer.vocabulary, args.max_predictions_per_seq,
                             args.masked_lm_prob, args.do_whole_word_mask, seed=args.seed)
    ds = training.finalize_dataset(tf.data.Dataset.from_tensor_slices(arrays),
                                   args.train_batch_size, training=True, seed=args.seed)
    tokens = float(arrays["padding_mask"].sum(1).mean())
    return ds.map(masking).map(_bert_split), len(arrays["token_ids"]), tokens


def build_bert(args, tokenizer):
    from kbert.models.bert.config import BertConfig
    from kbert.models.bert.encoder import BertEncoder
    from kbert.models.bert.pretrainer import BertPretrainer

    if args.init_from:
        try:  # with its heads where the folder has them (Google cls/*, HF, kbert)
            return BertPretrainer.from_pretrained(args.init_from)
        except (ValueError, FileNotFoundError) as e:
            if "missing variable cls" not in str(e) and HEADS_MISSING not in str(e):
                raise
            logger.warning("%s has no pretraining heads: they start new", args.init_from)
        return BertPretrainer(BertEncoder.from_pretrained(args.init_from))
    overrides = dict(vocab_size=tokenizer.vocab_size,
                     max_position_embeddings=max(512, args.max_seq_length))
    config = (BertConfig(**DEMO_CONFIG, **overrides) if args.preset == "demo"
              else BertConfig.preset(args.preset, **overrides))
    return BertPretrainer(BertEncoder(config))


# ---------------------------------------------------------------------------- runs
def _optimizer(args, total_steps):
    return training.create_optimizer(args.learning_rate, total_steps,
                                     args.num_warmup_steps, optimizer=args.optimizer,
                                     weight_decay=args.weight_decay,
                                     gradient_accumulation_steps=args.gradient_accumulation_steps)


def run(args) -> dict:
    runtime = training.Runtime.from_flags(args)
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    if not args.input_file and not args.text_file:  # the bundled corpus
        from kbert.tasks.pretrain.corpus import write_corpus

        args.text_file = os.path.join(args.output_dir, "corpus.txt")
        lines = write_corpus(args.text_file, args.corpus_paragraphs)
        logger.info("no data flags: the bundled corpus, %d paragraphs (%d lines), in %s",
                    args.corpus_paragraphs, lines, args.text_file)
    model_dir = os.path.join(args.output_dir, "model")
    total = args.num_train_steps * args.gradient_accumulation_steps
    total, loop = training.whole_loops(total, args.steps_per_loop, args.steps_per_execution)
    if args.model == "bert":
        from kbert.tasks.common import build_tokenizer

        tokenizer = build_tokenizer(read_texts(args.text_file) if args.text_file else [],
                                    init_from=args.init_from, lowercase=args.do_lower_case,
                                    vocab_size=args.vocab_size) \
            if (args.init_from or args.text_file) else _vocab_tokenizer(args)
        args.max_seq_length_limit = 10 ** 9
        data, examples, tokens = bert_data(args, tokenizer)
        model = runtime.build(lambda: _built(build_bert(args, tokenizer), {
            "token_ids": tf.zeros([1, 4], tf.int32), "segment_ids": tf.zeros([1, 4], tf.int32),
            "padding_mask": tf.ones([1, 4], tf.int32),
            "masked_lm_positions": tf.zeros([1, 1], tf.int32)}),
                              lambda: _optimizer(args, args.num_train_steps), None)
        save = lambda: model.save_pretrained(model_dir, tokenizer=tokenizer)  # noqa: E731
    elif args.model == "gpt":
        from kbert.models.gpt import GPTLanguageModel
        from kbert.models.gpt.lm import Perplexity, lm_dataset, lm_loss

        lm_source = GPTLanguageModel.from_pretrained(args.init_from)
        tokenizer = lm_source.tokenizer
        texts = [t for t in read_texts(args.text_file) if t.strip()]
        data = lm_dataset(texts, tokenizer, args.max_seq_length, args.train_batch_size)
        examples = sum(1 for _ in lm_dataset(texts, tokenizer, args.max_seq_length, 1))
        if examples == 0:
            raise ValueError(f"--text_file: fewer than {args.max_seq_length + 1} tokens")
        data = data.repeat()
        tokens = float(args.max_seq_length)

        def make():
            if args.from_scratch:
                lm = GPTLanguageModel(lm_source.config)
            else:
                lm = GPTLanguageModel.from_pretrained(args.init_from)
            return lm

        model = runtime.build(make, lambda: _optimizer(args, args.num_train_steps),
                              {"logits": lm_loss()}, {"logits": [Perplexity()]})
        save = lambda: model.decoder.save_pretrained(model_dir, tokenizer=tokenizer)  # noqa
    else:
        from kbert.models.elmo import ELMo, ELMoConfig
        from kbert.models.elmo.lm import ELMoLanguageModel, WordVocabulary, bilm_dataset
        from kbert.tokenizers.elmo import ELMoCharTokenizer

        texts = [t for t in read_texts(args.text_file) if t.strip()]
        vocab = WordVocabulary.build(texts, max_size=args.vocab_size)
        elmo = ELMo.from_pretrained(args.init_from) if args.init_from else None
        config = elmo.config if elmo else ELMoConfig.preset(args.preset)
        tokenizer = ELMoCharTokenizer(config.max_characters_per_token)
        data = bilm_dataset(texts, tokenizer, vocab, args.train_batch_size, args.max_seq_length,
                            seed=args.seed, repeat=True)
        examples, tokens = len(texts), float(np.mean([len(t.split()) for t in texts]))

        def make():
            biLM = ELMo.from_pretrained(args.init_from) if args.init_from else ELMo(config)
            lm = ELMoLanguageModel(biLM, vocab.size, vocab.bos_id, vocab.eos_id,
                                   num_sampled=args.num_sampled)
            return _built(lm, tokenizer(["a"]))

        model = runtime.build(make, lambda: _optimizer(args, args.num_train_steps), None)
        save = lambda: model.save_pretrained(model_dir)  # noqa: E731
    logger.info("pretraining %s: %d examples, %d steps of %d", args.model, examples,
                args.num_train_steps, args.train_batch_size)
    history = training.fit(model, data, total, loop, **fit_options(args),
                           examples_per_step=args.train_batch_size,
                           tokens_per_step=tokens * args.train_batch_size,
                           steps_per_epoch=max(examples / args.train_batch_size, 1.0))
    training.prune_checkpoints(fit_options(args)["checkpoint_dir"], args.keep_checkpoints)
    save()
    results = {k: float(v[-1]) for k, v in (history.history.items() if history else [])}
    results_file = os.path.join(args.output_dir, "train_results.json")
    if not results and os.path.exists(results_file):
        # A rerun of a finished run resumes at its last step and trains none: the
        # first run's results stand.
        logger.info("the run had finished: %s kept", results_file)
        return read_json(results_file)
    with atomic_file(results_file) as f:
        json.dump(results, f, indent=2)
    logger.info("pretrained %s folder: %s", args.model, model_dir)
    return results


def _built(model, inputs):
    """Calls the model once, so that every variable exists before the optimizer is
    built (checkpoint restore builds it from the trainable variables)."""
    model(inputs)
    return model


def _vocab_tokenizer(args):
    from kbert.tokenizers.bert import BertTokenizer

    if not args.vocab_file:
        raise ValueError("--model bert with --input_file: give --vocab_file (the one "
                         "create_data used) or --init_from")
    return BertTokenizer(args.vocab_file, lowercase=args.do_lower_case
                         if args.do_lower_case is not None else True)
