"""BERT's pretraining recipe (the registry's `pretrain` hook of "bert"): `BertPretrainer`
(masked LM and next sentence) on `create_data`'s TFRecords (`--input_file`, fixed
masks) or on text (`--text_file`, one sentence a line, blank lines between documents:
sentence pairs made as `create_data` makes them, once, and masks drawn anew for every
batch by `DynamicMasking`)."""

from __future__ import annotations

import logging
import random

import numpy as np
import tensorflow as tf

from kbert import training
from kbert.io import expand_inputs
from kbert.models.pretraining import PretrainRecipe, PretrainRun

logger = logging.getLogger(__name__)

HEADS_MISSING = "no pretraining_heads.safetensors"
# --preset demo: the size the task commands train from scratch on their bundled data.
DEMO_CONFIG = dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512)


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
    from kbert.models.bert import create_data as cd

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
        files = expand_inputs(args.input_file)
        seq, preds = record_lengths(files)
        if seq > args.max_seq_length_limit:
            raise ValueError(f"--input_file: records of {seq} tokens; the model has "
                             f"{args.max_seq_length_limit} positions")
        examples = sum(1 for _ in tf.data.TFRecordDataset(files))
        ds = training.finalize_dataset(record_dataset(files), args.train_batch_size,
                                       training=True, seed=args.seed)
        return ds.map(_bert_split), examples, float(seq)
    from kbert.tokenizers.masking import DynamicMasking

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


def _vocab_tokenizer(args):
    from kbert.tokenizers.bert import BertTokenizer

    if not args.vocab_file:
        raise ValueError("--model bert with --input_file: give --vocab_file (the one "
                         "create_data used) or --init_from")
    return BertTokenizer(args.vocab_file, lowercase=args.do_lower_case
                         if args.do_lower_case is not None else True)


class BertPretraining(PretrainRecipe):
    reads_records = True
    specials = 3
    help = "bert: masked LM + next sentence (run_pretraining.py)"

    def build(self, args, runtime, texts, optimizer) -> PretrainRun:
        from kbert.models.bert.scratch import scratch_tokenizer
        from kbert.tokenizers.bert import BertTokenizer

        if args.init_from:
            tokenizer = BertTokenizer.from_pretrained(
                args.init_from, seq_length=128, **({} if args.do_lower_case is None
                                                   else {"lowercase": args.do_lower_case}))
        elif args.text_file:
            lowercase = True if args.do_lower_case is None else args.do_lower_case
            tokenizer = scratch_tokenizer(texts(), lowercase=lowercase,
                                          vocab_size=args.vocab_size, seq_length=128)
        else:
            tokenizer = _vocab_tokenizer(args)
        args.max_seq_length_limit = 10 ** 9
        data, examples, tokens = bert_data(args, tokenizer)
        model = runtime.build(lambda: self.built(build_bert(args, tokenizer), {
            "token_ids": tf.zeros([1, 4], tf.int32), "segment_ids": tf.zeros([1, 4], tf.int32),
            "padding_mask": tf.ones([1, 4], tf.int32),
            "masked_lm_positions": tf.zeros([1, 1], tf.int32)}), optimizer, None)
        return PretrainRun(model, data, examples, tokens,
                           lambda folder: model.save_pretrained(folder, tokenizer=tokenizer))


pretrain = BertPretraining()
