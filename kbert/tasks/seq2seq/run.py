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
from kbert.tasks.seq2seq.metrics import ROUGE_TYPES, compute_metrics

logger = logging.getLogger(__name__)

# TFDS datasets whose (source, target) features kbert knows; a translation dataset
# (wmt*_translate/xx-yy, ted_hrlr_translate/...) uses --source_lang/--target_lang.
TFDS_FEATURES = {"cnn_dailymail": ("article", "highlights"), "xsum": ("document", "summary"),
                 "gigaword": ("document", "summary"), "samsum": ("dialogue", "summary"),
                 "reddit_tifu": ("documents", "tldr"), "billsum": ("text", "summary")}
GENERATION_CONFIG = "generation_config.json"  # kbert.export.generate_graph's too


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
        return (_tfds_pairs(args, "train") if args.do_train or args.shots else [],
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


def save_decoding_settings(folder: str, args, settings: dict, suffix_ids=()) -> None:
    """The decoding settings in the model folder's `generation_config.json` (the keys
    transformers' `GenerationConfig` has; other keys there are kept), with kbert's
    `kbert_source_prefix`/`kbert_source_suffix`/`kbert_prompt_suffix_ids` (a decoder-only
    model's separator) and `"kbert_decoding": true`, which makes them the defaults of
    `python -m kbert.export --task generate` of the folder
    (`kbert.export.generate_graph.folder_settings`)."""
    path = os.path.join(folder, GENERATION_CONFIG)
    config = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    config.update(num_beams=args.num_beams, length_penalty=args.length_penalty,
                  no_repeat_ngram_size=args.no_repeat_ngram_size,
                  min_new_tokens=args.min_new_tokens,
                  max_new_tokens=settings["max_new_tokens"], kbert_decoding=True)
    for key, value in (("kbert_source_prefix", args.source_prefix),
                       ("kbert_source_suffix", args.source_suffix),
                       ("kbert_prompt_suffix_ids", [int(i) for i in suffix_ids])):
        if value:
            config[key] = value
    write_json(path, config)


def run(args) -> dict:
    from kbert import training
    from kbert.tasks.common import run_family
    from kbert.tasks.seq2seq import causal
    from kbert.tasks.text_to_text import (decode_outputs, export, features, fine_tune,
                                          generate_outputs)

    import keras

    runtime = training.Runtime.from_flags(args)  # first: it may configure the runtime
    keras.utils.set_random_seed(args.seed)  # dropout and new weights, as the other tasks
    train, dev, test = read_data(args)  # every file read and checked before the model
    model_dir = os.path.join(args.output_dir, "model")
    family = run_family(args, trained=model_dir)
    lm_class = family.language_model_class
    if lm_class is None:
        raise SystemExit(f"--init_from {args.init_from}: a {family.name} folder; the seq2seq "
                         "command fine-tunes encoder-decoders (T5, BART) and causal LMs "
                         "(GPT-2)")
    decoder_only = not lm_class.is_encoder_decoder
    source = args.init_from if train or args.shots is not None else model_dir
    tokenizer = family.tokenizer_class.from_pretrained(source)
    if decoder_only and tokenizer.end_token_id is None:
        raise SystemExit(f"--init_from {source}: its tokenizer has no end token to separate "
                         "source and target (GPT-2's <|endoftext|>)")
    prefix, suffix = args.source_prefix or "", args.source_suffix or ""
    args.max_seq_length = args.max_source_length  # what text_to_text's helpers read
    max_new = args.val_max_target_length or args.max_target_length
    settings = decoding_settings(args)
    if args.shots is not None:
        return _run_shots(args, lm_class, train, dev, test, max_new, settings)

    def predict(lm, inputs):
        if decoder_only:
            ids, mask = causal.prompts(tokenizer, inputs, args.max_source_length)
            return decode_outputs(lm, tokenizer, ids, mask, max_new, args.predict_batch_size,
                                  **settings)
        return generate_outputs(lm, tokenizer, inputs, args.max_source_length, max_new,
                                args.predict_batch_size, **settings)

    evaluate, metrics = None, ()
    if getattr(args, "eval_strategy", "no") != "no":
        if not dev:
            raise SystemExit(f"--eval_strategy {args.eval_strategy}: needs a validation "
                             "set (--validation_file)")
        dev_inputs = [prefix + p.source + suffix for p in dev]
        metrics = ROUGE_TYPES if args.metric == "rouge" else ("bleu", "chrf")

        def evaluate(lm):
            scores = compute_metrics(args.metric, predict(lm, dev_inputs)[0],
                                     [p.target for p in dev])
            return {k: scores[k] for k in metrics}

    if train:
        sources = [prefix + p.source + suffix for p in train]
        targets = [p.target for p in train]

        def make_data(lm):
            if decoder_only:
                _check_positions(lm, args, max_new)
                return causal.features(tokenizer, sources, targets, args.max_source_length,
                                       args.max_target_length)
            return features(lm, tokenizer, sources, targets, args.max_source_length,
                            args.max_target_length)

        if getattr(args, "bart_source_encoder", 0):
            from kbert.tasks.seq2seq.source_encoder import fine_tune_two_stages

            model, trained = fine_tune_two_stages(args, runtime, lm_class, make_data,
                                                  len(train), evaluate, metrics)
        else:
            model, trained = fine_tune(args, runtime, lm_class, make_data, len(train),
                                       "seq2seq", evaluate, metrics)
        model.save_pretrained(model_dir, tokenizer=tokenizer)
        save_decoding_settings(model_dir, args, {**settings, "max_new_tokens": max_new},
                               [tokenizer.end_token_id] if decoder_only else ())
    else:
        if not os.path.isdir(model_dir):
            raise SystemExit(f"no --train_file: {model_dir} holds no model to evaluate "
                             "(train first)")
        model, trained = lm_class.from_pretrained(model_dir), None
        if decoder_only:
            _check_positions(model, args, max_new)

    results, seen = {}, {}
    for split, pairs, where in _splits(args, dev, test):
        if not pairs:
            continue
        inputs = [prefix + p.source + suffix for p in pairs]
        predictions, lengths = predict(model, inputs)
        if not seen:  # the export's check: sources the command did not cut
            import tensorflow as tf

            encode = tokenizer.tokenize if decoder_only else tokenizer.encoder_ids
            counts = encode(tf.constant(inputs)).row_lengths().numpy()
            whole = [i for i, n in enumerate(counts) if n <= args.max_source_length]
            seen = {"texts": [pairs[i].source for i in whole],
                    "outputs": [predictions[i] for i in whole]}
        results[split] = score(args, split, pairs, predictions, lengths, where, trained)
    if args.export_dir:
        export(args, model, tokenizer, max_new, seen.get("texts", ()), seen.get("outputs", ()),
               settings=settings, prompt_prefix=prefix, prompt_suffix=suffix,
               prompt_suffix_ids=[tokenizer.end_token_id] if decoder_only else (),
               predict=lambda lm, texts: predict(lm, texts)[0])
    return results.get("eval") or results.get("test") or {}


def _splits(args, dev, test):
    return (("eval", dev, args.validation_file or f"{args.tfds}:validation"),
            ("test", test, args.test_file or f"{args.tfds}:test"))


def score(args, split: str, pairs, predictions, lengths, where: str, trained=None):
    """The split's predictions file, and its results file where every pair has a
    target (the record; else None)."""
    from kbert.tasks.common import write_results

    write_predictions(os.path.join(args.output_dir, f"{split}_predictions.jsonl"), pairs,
                      predictions)
    if any(p.target is None for p in pairs):
        logger.info("%s: %d predictions written, no targets to score", split, len(pairs))
        return None
    metrics = compute_metrics(args.metric, predictions, [p.target for p in pairs])
    metrics["gen_len"] = float(np.mean(lengths))
    metrics["samples"] = len(pairs)
    return write_results(args.output_dir, metrics, split=split, source=where, trained=trained)


def _run_shots(args, lm_class, train, dev, test, max_new: int, settings: dict) -> dict:
    """`--shots K`: the --init_from model prompted with K training pairs per example
    (`prompting`), nothing trained; predictions, scores and OUTPUT_DIR/prompts.json."""
    from kbert.tasks.seq2seq import prompting

    if args.shots and not train:
        raise SystemExit("--shots: the training pairs are the shots; give --train_file")
    lm = lm_class.from_pretrained(args.init_from)
    record = {"shots": args.shots, "seed": args.seed, "separator": prompting.SEPARATOR,
              "source_prefix": args.source_prefix, "source_suffix": args.source_suffix}
    results = {}
    for split, pairs, where in _splits(args, dev, test):
        if not pairs:
            continue
        prompts, drawn = prompting.build_prompts(pairs, train, args.shots, args.seed,
                                                 args.source_prefix or "",
                                                 args.source_suffix or "")
        predictions, lengths = prompting.generate(lm, prompts, max_new,
                                                  args.predict_batch_size, settings)
        record[split] = {"first_prompts": prompts[:3], "shots_of_first": drawn[:3]}
        results[split] = score(args, split, pairs, predictions, lengths, where)
    prompting.write_record(args.output_dir, record)
    return results.get("eval") or results.get("test") or {}


def _check_positions(lm, args, max_new: int) -> None:
    """A decoder-only model's sequence (source, separator, target) fits its positions."""
    from kbert.cli import UsageError

    limit = int(lm.max_positions)
    need = max(args.max_source_length + args.max_target_length,
               args.max_source_length + 1 + max_new)
    if need > limit:
        raise UsageError(f"--max_source_length {args.max_source_length} with "
                         f"--max_target_length {args.max_target_length} (generating "
                         f"{max_new}): {need} positions, the decoder-only model has {limit}")
