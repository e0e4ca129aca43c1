"""The SQuAD pipeline behind `python -m kbert.tasks.squad`: data, features, training,
prediction, evaluation. Everything is validated before training starts."""

from __future__ import annotations

import logging
import os

import keras
import tensorflow as tf

from kbert import training
from kbert.export import export_squad
from kbert.export.folder import export_variant, load_task_folder, save_task_folder
from kbert.io import write_json
from kbert.tasks.common import (adapt, best_model, build_encoder, build_tokenizer,
                                encoder_options, fit_and_finish, loop_steps, run_family,
                                tokenizer_options, write_results)
from kbert.tasks.squad.data import load_json, read_squad, squad_source
from kbert.tasks.squad.evaluate import evaluate
from kbert.tasks.squad.features import LABELS, convert_examples, feature_arrays
from kbert.tasks.squad.model import build_model, span_losses
from kbert.tasks.squad.postprocess import postprocess
from kbert.tasks.squad.sample import make_sample

logger = logging.getLogger(__name__)

# A BERT small enough to train on the bundled sample in minutes on a CPU.
DEMO_CONFIG = dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512)



def load_data(args):
    """(train examples, dev examples, dev JSON) from files, TFDS or the bundled sample;
    with --do_train or --do_predict alone, the other side is empty."""
    if args.tfds:
        return _load_tfds(args.version_2_with_negative, getattr(args, "tfds_data_dir", None))
    if args.train_file or args.predict_file:
        missing = [flag for flag, needed, given in (
            ("--train_file", args.do_train, args.train_file),
            ("--predict_file", args.do_predict, args.predict_file)) if needed and not given]
        if missing:
            raise SystemExit(f"give {' and '.join(missing)} (or no data flag, for the "
                             "bundled sample)")
        train, dev, dev_json = [], [], None
        if args.do_train:
            train = read_squad(load_json(args.train_file), source=args.train_file)
            if not train:
                raise ValueError(f"--train_file {args.train_file}: no questions to train on")
            check_version(args.train_file, train, args.version_2_with_negative)
        if args.do_predict:
            dev_json = load_json(args.predict_file)
            dev = read_squad(dev_json, source=args.predict_file)
            if not dev:
                raise ValueError(f"--predict_file {args.predict_file}: no questions to "
                                 "predict")
            check_version(args.predict_file, dev, args.version_2_with_negative)
        return train, dev, dev_json
    data = make_sample(args.sample_paragraphs, args.seed, args.version_2_with_negative)
    dev = dict(data, data=data["data"][::6])
    train = dict(data, data=[a for i, a in enumerate(data["data"]) if i % 6])
    write_json(os.path.join(args.output_dir, "sample_train.json"), train)
    write_json(os.path.join(args.output_dir, "sample_dev.json"), dev)
    return read_squad(train, strict=True), read_squad(dev, strict=True), dev


def check_version(path: str, examples, version_2: bool) -> None:
    """SQuAD v2.0 data needs --version_2_with_negative: trained as v1.1, its unanswerable
    questions would be dropped from training and score EM 0 in evaluation."""
    impossible = sum(e.is_impossible for e in examples)
    if impossible and not version_2:
        raise ValueError(f"{path}: SQuAD v2.0 data ({impossible} of {len(examples)} "
                         "questions have no answer, is_impossible); pass "
                         "--version_2_with_negative")


def _load_tfds(version_2, data_dir=None):
    import tensorflow_datasets as tfds

    from kbert.tasks import tfds_source

    name = "squad/v2.0" if version_2 else "squad/v1.1"
    splits, _ = tfds_source.load(
        name, ["train", "validation"], data_dir,
        advice="with no network, download the SQuAD JSON files and pass --train_file and "
               "--predict_file, or --tfds_data_dir with a prepared copy")
    out = []
    for split in splits:
        articles = {}
        for ex in tfds.as_numpy(split):
            context = ex["context"].decode()
            texts = [t.decode() for t in ex["answers"]["text"]]
            qa = {"id": ex["id"].decode(), "question": ex["question"].decode(),
                  "answers": [{"text": t, "answer_start": int(s)}
                              for t, s in zip(texts, ex["answers"]["answer_start"])]}
            if version_2:
                qa["is_impossible"] = not texts
            title = ex["title"].decode()
            paragraphs = articles.setdefault(title, {})
            paragraphs.setdefault(context, []).append(qa)
        out.append({"version": "v2.0" if version_2 else "1.1", "data": [
            {"title": t, "paragraphs": [{"context": c, "qas": q} for c, q in ps.items()]}
            for t, ps in articles.items()]})
    return read_squad(out[0]), read_squad(out[1]), out[1]


def run(args) -> dict:
    """Trains and evaluates as the flags say (run_squad.py's --do_train and
    --do_predict: both by default); returns the official metrics ({} without
    prediction). The run's family, worked out once, picks its road: span extraction
    (`run_spans`), or text to text for a family with the `squad_text` hooks (T5:
    `kbert.tasks.squad.text_to_text.run_squad`)."""
    runtime = training.Runtime.from_flags(args)  # first: it may configure the runtime
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    data = load_data(args)
    model_dir = os.path.join(args.output_dir, "model")  # a text-to-text run's model
    family = run_family(args, None if args.do_train else model_dir)
    text_road = family.hook("squad_text") is not None and os.path.isdir(
        args.init_from if args.do_train else model_dir)
    road = _text_road() if text_road else run_spans
    return road(args, runtime, family, *data)


def _text_road():
    from kbert.tasks.squad.text_to_text import run_squad

    return run_squad


def run_spans(args, runtime, family, train_examples, dev_examples, dev_json) -> dict:
    """SQuAD by span extraction (BERT's run_squad.py): an encoder of `family` with a
    span head, trained on the windows (--do_train) and scored by the official script
    (--do_predict); the task folder, `encoder/` and the `squad` export written."""
    feature_args = dict(max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
                        max_query_length=args.max_query_length)
    settings = dict(max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
                    max_query_length=args.max_query_length, n_best_size=args.n_best_size,
                    max_answer_length=args.max_answer_length,
                    version_2_with_negative=args.version_2_with_negative,
                    null_score_diff_threshold=args.null_score_diff_threshold)
    if args.do_train:
        model, tokenizer, trained, encoder = train(
            args, runtime, family, train_examples, feature_args,
            (dev_examples, dev_json) if args.do_predict else None)
        save_task_folder(args.output_dir, model, tokenizer, "squad", encoder_folder="encoder",
                         encoder=encoder, **settings)
    else:  # --do_predict alone: the model a --do_train run left in --output_dir
        (task, model, tokenizer, _), trained = load_task_folder(args.output_dir), None
        if task != "squad":
            raise ValueError(f"{args.output_dir}: holds a {task!r} model, not a SQuAD one")
    if not args.do_predict:
        return {}

    predict_and_evaluate = dev_scorer(args, tokenizer, dev_examples, dev_json, feature_args)
    predictions, figures = predict_and_evaluate(model)
    predictions.write(args.output_dir)
    source = squad_source(args)
    results = write_results(args.output_dir, figures, split="eval", source=source,
                            trained=trained)
    if args.export_dir:
        model, variant = export_variant(model, args.quantize, args.dtype)
        if variant:  # the export's own figures: its model on the same data
            predictions, own = predict_and_evaluate(model)
            logger.info("%s export: %s", variant, ", ".join(
                f"{k} {v:.2f}" for k, v in own.items() if isinstance(v, float)))
            results = write_results(
                args.output_dir, {**figures, **{f"{variant}_{k}": v for k, v in own.items()}},
                split="eval", source=source, trained=trained)
        from kbert.export.check import keep_served

        with keep_served(also=[_check_request(dev_examples)]):  # in the exporter's load
            export_squad(model, tokenizer, args.export_dir, **settings)
            _check_export(args.export_dir, dev_examples, predictions)
        logger.info("SavedModel for TF Serving: %s", args.export_dir)
    return results


def dev_scorer(args, tokenizer, dev_examples, dev_json, feature_args):
    """`score(model) -> (predictions, the official metrics)` on the dev questions (their
    windows made once)."""
    dev_features = convert_examples(dev_examples, tokenizer, **feature_args)
    if not dev_features:
        raise SystemExit(f"{args.predict_file or 'the evaluation data'}: no question to "
                         "predict")
    logger.info("%d evaluation questions -> %d windows", len(dev_examples), len(dev_features))
    dev_arrays = feature_arrays(dev_features)

    def score(model):
        logits = model.predict({k: v for k, v in dev_arrays.items() if k not in LABELS},
                               batch_size=args.predict_batch_size, verbose=0)
        predictions = postprocess(dev_examples, dev_features, logits["start_logits"],
                                  logits["end_logits"], args.n_best_size,
                                  args.max_answer_length, args.version_2_with_negative,
                                  args.null_score_diff_threshold)
        return predictions, evaluate(dev_json, predictions.answers, predictions.null_odds
                                     if args.version_2_with_negative else None)

    return score


def train(args, runtime, family, train_examples, feature_args, dev=None):
    """Tokenizer (from --init_from or learned), windows, and the fine-tuned span model;
    `dev` (examples, JSON) for --eval_strategy; `family`: the run's. Returns the model,
    the tokenizer, {"epoch", "step"} of the model's weights and the encoder (or
    encoder-decoder: BART's) inside the model."""
    tokenizer = build_tokenizer([e.context for e in train_examples]
                                + [e.question for e in train_examples],
                                **tokenizer_options(args, family))
    train_features = convert_examples(train_examples, tokenizer, is_training=True,
                                      **feature_args)
    if not train_features:
        raise SystemExit("no training windows: check --train_file")
    logger.info("%d training questions -> %d windows", len(train_examples),
                len(train_features))
    arrays = feature_arrays(train_features)
    x = {k: v for k, v in arrays.items() if k not in LABELS}
    y = {"start_logits": arrays["start_positions"], "end_logits": arrays["end_positions"]}
    batch = args.train_batch_size
    total_steps, steps_per_loop = training.whole_loops(
        training.train_steps(args, len(train_features), batch),
        loop_steps(args, len(train_features) / batch, dev is not None),
        args.steps_per_execution)
    data = training.finalize_dataset(tf.data.Dataset.from_tensor_slices((x, y)), batch,
                                     training=True, seed=args.seed)
    losses, weights = span_losses()

    built = {}

    def make_model():
        encoder = built["encoder"] = build_encoder(
            tokenizer, **encoder_options(args, DEMO_CONFIG, family))
        own = family.hook("squad_model")  # BART's: the head on its decoder
        if own is not None:
            return adapt(own(encoder, args.init_from), args)
        # The span head never reads the pooler: frozen, it gets no missing gradient.
        encoder.set_pooler_trainable(False)
        return adapt(build_model(encoder), args)

    model = runtime.build(
        make_model,
        lambda: training.create_optimizer(args.learning_rate, total_steps,
                                          int(total_steps * args.warmup_proportion)),
        losses, loss_weights=weights)
    evaluation = None
    if dev is not None and getattr(args, "eval_strategy", "no") != "no":
        score = dev_scorer(args, tokenizer, *dev, feature_args)
        metrics = (["f1", "exact", "best_f1", "best_exact"] if args.version_2_with_negative
                   else ["f1", "exact_match"])  # the official script's names
        evaluation = best_model(args, lambda model: {
            k: v for k, v in score(model)[1].items() if k in metrics}, metrics,
            steps_per_loop, len(train_features) / batch)
    trained = fit_and_finish(
        model, data, args, total_steps, steps_per_loop, examples_per_step=batch,
        tokens_per_step=training.real_tokens_per_batch(x["padding_mask"], batch),
        steps_per_epoch=len(train_features) / batch, evaluation=evaluation)
    return model, tokenizer, trained, built["encoder"]


CHECKED_QUESTIONS = 64  # dev questions the export must answer as the Python pipeline


def _check_request(examples) -> dict:
    """The export's `serving_default` request of the first dev questions."""
    sample = examples[:CHECKED_QUESTIONS]
    return {"question": [e.question for e in sample], "context": [e.context for e in sample]}


def _check_export(export_dir, examples, predictions):
    """The SavedModel, run as TF Serving runs it (its C++ loader), must give the answers
    of the Python post-processing to the first dev questions (`_check_request`)."""
    from kbert.export.check import check_served

    sample = examples[:CHECKED_QUESTIONS]
    check_served(export_dir, _check_request(examples), "answer",
                 [predictions.answers[e.qid] for e in sample], [e.qid for e in sample],
                 "the Python post-processing (question ids)")
    logger.info("SavedModel checked through TF Serving's C++ loader: same answers as "
                "predictions.json on %d questions", len(sample))
