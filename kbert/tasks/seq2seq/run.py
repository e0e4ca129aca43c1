"""The seq2seq command's run: read the pairs, fine-tune the encoder-decoder on them
(teacher forcing, `kbert.tasks.text_to_text`), generate the validation and test outputs
with the decoding flags, score them (`metrics`), write the results and predictions
files, the model folder with its decoding settings, and the `generate` export."""

from __future__ import annotations

import json
import logging
import os

import numpy as np

from kbert.io import atomic_file, write_json
from kbert.tasks.seq2seq.data import Columns, Pair, read_pairs
from kbert.tasks.seq2seq.metrics import compute_metrics

logger = logging.getLogger(__name__)

# TFDS datasets whose (source, target) features kbert knows; a translation dataset
# (wmt*_translate/xx-yy, ted_hrlr_translate/...) uses --source_lang/--target_lang.
TFDS_FEATURES = {"cnn_dailymail": ("article", "highlights"), "xsum": ("document", "summary"),
                 "gigaword": ("document", "summary"), "samsum": ("dialogue", "summary"),
                 "reddit_tifu": ("documents", "tldr"), "billsum": ("text", "summary")}
GENERATION_CONFIG = "generation_config.json"


def decoding_settings(args) -> dict:
    """The decoding flags as `generate`'s (and `export_generate`'s) arguments."""
    settings = {"no_repeat_ngram_size": args.no_repeat_ngram_size,
                "min_new_tokens": args.min_new_tokens}
    if args.num_beams > 1:
        settings.update(num_beams=args.num_beams, length_penalty=args.length_penalty)
    return settings


def columns_of(args) -> Columns:
    if args.source_lang or args.target_lang:
        return Columns(source_lang=args.source_lang, target_lang=args.target_lang)
    return Columns(text=args.text_column, summary=args.summary_column)


def _tfds_pairs(args, split: str) -> list[Pair]:
    """A TFDS dataset's split as pairs (`--tfds NAME`)."""
    from kbert.tasks import tfds_source

    name = args.tfds
    base = name.split("/")[0].split(":")[0]
    if args.source_lang:
        source, target = args.source_lang, args.target_lang
    elif base in TFDS_FEATURES:
        source, target = TFDS_FEATURES[base]
    else:
        raise SystemExit(f"--tfds {name}: kbert does not know its text features; give "
                         "--source_lang/--target_lang (the source and target feature names)")
    data, _ = tfds_source.load(name, split, args.tfds_data_dir,
                               advice=f"download it once online (tfds build {base}), or "
                                      "give --train_file/--validation_file")
    pairs = []
    for i, row in enumerate(data.as_numpy_iterator()):
        if source not in row or target not in row:
            raise SystemExit(f"--tfds {name}: no feature {source!r} or {target!r} (it has "
                             f"{', '.join(sorted(row))})")
        pairs.append(Pair(f"{name}:{split}", i + 1, row[source].decode("utf-8"),
                          row[target].decode("utf-8")))
    return pairs


def read_data(args) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """(train, validation, test) pairs: from the files, or --tfds's train, validation
    and test splits."""
    if args.tfds:
        return (_tfds_pairs(args, "train") if args.do_train else [],
                _tfds_pairs(args, "validation"),
                _tfds_pairs(args, "test") if args.do_predict else [])
    columns = columns_of(args)
    train = read_pairs(args.train_file, "--train_file", columns) if args.train_file else []
    dev = read_pairs(args.validation_file, "--validation_file", columns) \
        if args.validation_file else []
    test = read_pairs(args.test_file, "--test_file", columns, targets=False) \
        if args.test_file else []
    return train, dev, test


def write_predictions(path: str, pairs: list[Pair], predictions: list[str]) -> None:
    """One JSON object per example, in file order: source, target, prediction."""
    with atomic_file(path) as f:
        for pair, prediction in zip(pairs, predictions, strict=True):
            f.write(json.dumps({"source": pair.source, "target": pair.target,
                                "prediction": prediction}, ensure_ascii=False) + "\n")


def save_decoding_settings(folder: str, args, settings: dict) -> None:
    """The decoding settings in the model folder's `generation_config.json` (the keys
    transformers' `GenerationConfig` has; other keys there are kept)."""
    path = os.path.join(folder, GENERATION_CONFIG)
    config = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    config.update(num_beams=args.num_beams, length_penalty=args.length_penalty,
                  no_repeat_ngram_size=args.no_repeat_ngram_size,
                  min_new_tokens=args.min_new_tokens,
                  max_new_tokens=settings["max_new_tokens"])
    if args.source_prefix:
        config["kbert_source_prefix"] = args.source_prefix
    write_json(path, config)


def run(args) -> dict:
    from kbert import training
    from kbert.tasks.common import run_family, write_results
    from kbert.tasks.text_to_text import export, features, fine_tune, generate_outputs

    runtime = training.Runtime.from_flags(args)
    model_dir = os.path.join(args.output_dir, "model")
    family = run_family(args, trained=model_dir)
    lm_class = family.language_model_class
    if lm_class is None or not getattr(lm_class, "is_encoder_decoder", False):
        raise SystemExit(f"--init_from {args.init_from}: a {family.name} folder; the seq2seq "
                         "command fine-tunes encoder-decoders (T5, BART)")
    train, dev, test = read_data(args)
    source = args.init_from if train else model_dir
    tokenizer = family.tokenizer_class.from_pretrained(source)
    prefix = args.source_prefix or ""
    args.max_seq_length = args.max_source_length  # what text_to_text's helpers read
    max_new = args.val_max_target_length or args.max_target_length
    settings = decoding_settings(args)
    if train:
        sources = [prefix + p.source for p in train]
        targets = [p.target for p in train]
        model, trained = fine_tune(
            args, runtime, lm_class,
            lambda lm: features(lm, tokenizer, sources, targets, args.max_source_length,
                                args.max_target_length),
            len(train), "seq2seq")
        model.save_pretrained(model_dir, tokenizer=tokenizer)
        save_decoding_settings(model_dir, args, {**settings, "max_new_tokens": max_new})
    else:
        if not os.path.isdir(model_dir):
            raise SystemExit(f"no --train_file: {model_dir} holds no model to evaluate "
                             "(train first)")
        model, trained = lm_class.from_pretrained(model_dir), None

    results, seen = {}, {}
    for split, pairs, where in (("eval", dev, args.validation_file or f"{args.tfds}:validation"),
                                ("test", test, args.test_file or f"{args.tfds}:test")):
        if not pairs:
            continue
        inputs = [prefix + p.source for p in pairs]
        predictions, lengths = generate_outputs(model, tokenizer, inputs,
                                                args.max_source_length, max_new,
                                                args.predict_batch_size, **settings)
        write_predictions(os.path.join(args.output_dir, f"{split}_predictions.jsonl"),
                          pairs, predictions)
        if not seen:  # the export's check: sources the command did not cut
            import tensorflow as tf

            counts = tokenizer.encoder_ids(tf.constant(inputs)).row_lengths().numpy()
            whole = [i for i, n in enumerate(counts) if n <= args.max_source_length]
            seen = {"texts": [pairs[i].source for i in whole],
                    "outputs": [predictions[i] for i in whole]}
        if any(p.target is None for p in pairs):
            logger.info("%s: %d predictions written, no targets to score", split, len(pairs))
            continue
        metrics = compute_metrics(args.metric, predictions, [p.target for p in pairs])
        metrics["gen_len"] = float(np.mean(lengths))
        metrics["samples"] = len(pairs)
        results[split] = write_results(args.output_dir, metrics, split=split, source=where,
                                       trained=trained)
    if args.export_dir:
        export(args, model, tokenizer, max_new, seen.get("texts", ()), seen.get("outputs", ()),
               settings=settings, prompt_prefix=prefix)
    return results.get("eval") or results.get("test") or {}
