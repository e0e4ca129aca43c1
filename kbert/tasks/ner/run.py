"""The CoNLL-2003 pipeline behind `python -m kbert.tasks.ner`."""

from __future__ import annotations

import logging
import os

import keras
import numpy as np

from kbert import training
from kbert.export.folder import export_variant, save_task_folder
from kbert.io import atomic_file
from kbert.models import registry
from kbert.tasks.common import (adapt, best_model, build_encoder, build_tokenizer,
                                encoder_options, fit_and_finish, loop_steps, run_family,
                                tokenizer_options, trim_multiple, write_results)
from kbert.tasks.ner.data import labels_of, load_tfds, read_ner_file, unseen_entity_types
from kbert.tasks.ner.evaluate import evaluate
from kbert.tasks.ner.features import convert_sentences, word_predictions
from kbert.tasks.ner.model import build_model, ner_loss, prepare_encoder

logger = logging.getLogger(__name__)

DEMO_CONFIG = dict(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=512)


def _load(args):
    if args.tfds:
        where = getattr(args, "tfds_data_dir", None)
        return {"train": load_tfds("train", where), "dev": load_tfds("validation", where),
                "test": load_tfds("test", where)}
    if not args.train_file:
        raise SystemExit("give --train_file (and --dev_file, --test_file): CoNLL-2003 files "
                         "such as eng.train, eng.testa, eng.testb; or --tfds")
    files = {"train": args.train_file, "dev": args.dev_file, "test": args.test_file}
    names = args.label_list.split(",") if getattr(args, "label_list", None) else None
    return {split: read_ner_file(path, label_list=names, flag=f"--{split}_file")
            for split, path in files.items() if path}


def write_predictions(path, sentences, predictions) -> None:
    """CoNLL format for conlleval: `word gold predicted`, a blank line per sentence."""
    with atomic_file(path) as f:
        for sentence, tags in zip(sentences, predictions):
            for word, gold, pred in zip(sentence.words, sentence.tags, tags):
                f.write(f"{word} {gold} {pred}\n")
            f.write("\n")


def make_features(tokenizer, sentences, seq_length, tags=None, labels=None):
    """Windows of pieces aligned with words (`NerFeatures`), or those of the family's
    `ner_features` hook (ELMo: windows of whole words)."""
    own = registry.family_of(tokenizer).hook("ner_features")
    if own is not None:
        return own(tokenizer, sentences, seq_length, tags, labels)
    return convert_sentences(sentences, tokenizer, seq_length, tags, labels)


def predict_tags(model, tokenizer, sentences, labels, seq_length, batch_size=64):
    features = make_features(tokenizer, [s.words for s in sentences], seq_length)
    inputs = features.dataset(tokenizer).map(lambda x, y: x).batch(batch_size)
    logits = model.predict(inputs, verbose=0)["logits"]
    return word_predictions(features, np.argmax(logits, axis=-1), labels)


SPLITS = {"dev": ("eval", "dev_file"), "test": ("test", "test_file")}


def _write_results(args, scores: dict, trained: dict) -> dict:
    """eval_results.json (dev) and test_results.json (test) in transformers' run_ner
    layout: `eval_precision`, `eval_f1`, ..., each entity type's as `eval_LOC_f1`
    (conlleval's figures, in percent), with `epoch`, `step` and the data named. Returns
    both records in one dict."""
    results = {}
    for split, figures in scores.items():
        prefix, flag = SPLITS[split]
        flat = {}
        for key, value in figures.items():
            if key.endswith("per_type"):  # {type: {precision, recall, f1, support}}
                variant = key[:-len("per_type")]
                flat.update({f"{variant}{t}_{k}": v for t, table in value.items()
                             for k, v in table.items()})
            else:
                flat[key] = value
        source = getattr(args, flag) or f"tfds conll2003 {split.replace('dev', 'validation')}"
        results.update(write_results(args.output_dir, flat, split=prefix, source=source,
                                     trained=trained))
    return results


def run(args) -> dict:
    runtime = training.Runtime.from_flags(args)
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    data = _load(args)  # read and validate every file before training
    train = data["train"]
    unseen = unseen_entity_types(train, data.get("dev", []))
    if unseen:  # kept, so that dev scores count them as missed, not as absent
        logger.warning("--dev_file %s: entity types the training file never tags: %s; the "
                    "model cannot learn them (they count as missed in the dev scores)",
                    args.dev_file or "(TFDS validation)", ", ".join(unseen))
    labels = labels_of(train + data.get("dev", []))
    # NER keeps case unless told otherwise (capitals mark names).
    family = run_family(args)  # once, for the run
    tokenizer = build_tokenizer([" ".join(s.words) for s in train],
                                **tokenizer_options(args, family, default_lowercase=False))
    seq = args.max_seq_length
    specials = tokenizer.special_tokens[0]
    features = make_features(tokenizer, [s.words for s in train], seq,
                             [s.tags for s in train], labels)
    n_windows, n_sentences = len(features.labels), len(train)
    if n_windows > n_sentences:
        logger.info("%d training sentences longer than %d %s were split into windows",
                    n_windows - n_sentences, seq - specials,
                    "pieces" if specials else "words")
    batch = args.train_batch_size
    total_steps, steps_per_loop = training.whole_loops(
        training.train_steps(args, n_windows, batch),
        loop_steps(args, n_windows / batch, "dev" in data), args.steps_per_execution)
    ds = features.dataset(tokenizer)
    # Padded pieces carry label -1, which the loss ignores: cutting them is the same loss.
    trim = trim_multiple(args.trim_padding, runtime.strategy, args.max_seq_length)
    ds = training.finalize_dataset(ds, batch, training=True, seed=args.seed, trim=trim,
                                   trim_labels=True)
    own = family.hook("ner_model")  # BART's: a token head on its decoder's states
    if own is not None and args.mode != "finetune":
        raise SystemExit(f"--mode {args.mode}: a {family.name} model is fine-tuned whole "
                         "for NER (--mode finetune)")

    def make_model():
        encoder = build_encoder(tokenizer, **encoder_options(args, DEMO_CONFIG, family))
        if own is not None:
            return adapt(own(encoder, labels, {}), args)
        prepare_encoder(encoder, args.mode)  # frozen pooler, or frozen encoder (feature)
        return adapt(build_model(encoder, labels, args.mode, args.layers, args.lstm_units),
                     args)

    model = runtime.build(
        make_model,
        lambda: training.create_optimizer(args.learning_rate, total_steps,
                                          int(total_steps * args.warmup_proportion)),
        {"logits": ner_loss()})
    def dev_scores(model):  # conlleval's, in percent (eval_results.json's)
        sentences = data["dev"]
        scores = evaluate([s.tags for s in sentences], predict_tags(
            model, tokenizer, sentences, labels, seq, args.predict_batch_size))
        return {k: v for k, v in scores.items() if isinstance(v, float)}

    evaluation = best_model(args, dev_scores, ["f1", "precision", "recall", "accuracy"],
                            steps_per_loop, n_windows / batch)
    trained = fit_and_finish(
        model, ds, args, total_steps, steps_per_loop, examples_per_step=batch,
        tokens_per_step=training.real_tokens_per_batch(features.padding_mask, batch),
        steps_per_epoch=n_windows / batch, evaluation=evaluation)
    scores = {}  # split -> conlleval's figures
    for split in ("dev", "test"):
        if split not in data:
            continue
        sentences = data[split]
        predictions = predict_tags(model, tokenizer, sentences, labels, seq,
                                   args.predict_batch_size)
        write_predictions(os.path.join(args.output_dir, f"{split}_predictions.txt"),
                          sentences, predictions)
        scores[split] = evaluate([s.tags for s in sentences], predictions)
        logger.info("%s: precision %.2f recall %.2f F1 %.2f", split,
                    scores[split]["precision"], scores[split]["recall"], scores[split]["f1"])
    results = _write_results(args, scores, trained)
    save_task_folder(args.output_dir, model, tokenizer, "ner", labels=labels, seq_length=seq)
    if args.export_dir:
        from kbert.export import export_ner

        model, variant = export_variant(model, args.quantize, args.dtype)
        if variant:  # the export's own figures: its model on dev and test
            for split in list(scores):
                predictions = predict_tags(model, tokenizer, data[split], labels, seq,
                                           args.predict_batch_size)
                metrics = evaluate([s.tags for s in data[split]], predictions)
                scores[split].update({f"{variant}_{k}": v for k, v in metrics.items()})
                logger.info("%s export, %s: F1 %.2f", variant, split, metrics["f1"])
            results = _write_results(args, scores, trained)
        export_ner(model, tokenizer, args.export_dir, labels, seq_length=seq)
        logger.info("SavedModel for TF Serving: %s", args.export_dir)
    return results
