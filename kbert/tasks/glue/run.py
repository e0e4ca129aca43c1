"""The GLUE pipeline behind `python -m kbert.tasks.glue`: read, encode, fine-tune,
evaluate on dev, write test predictions in the GLUE submission format, export."""

from __future__ import annotations

import logging
import os

import keras
import numpy as np
import tensorflow as tf

from kbert import training
from kbert.export import export_classifier
from kbert.export.folder import export_variant, load_task_folder, save_task_folder
from kbert.io import atomic_file
from kbert.models import registry
from kbert.tasks.common import (adapt, best_model, build_encoder, build_tokenizer,
                                encoder_options, fit_and_finish, loop_steps, run_family,
                                tokenizer_options, trim_multiple, write_results)
from kbert.tasks.glue.data import dev_source, load_dataset, load_own_files
from kbert.tasks.glue.metrics import compute_metrics
from kbert.tasks.glue.model import build_classifier
from kbert.tasks.glue.tasks import GlueTask, get_task

logger = logging.getLogger(__name__)

DEMO_CONFIG = dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512)


def _hook(obj, name: str):
    """The family hook `name` of a tokenizer's or encoder's family, or None."""
    return registry.family_of(obj).hook(name)


def build_model(encoder, task, tokenizer=None, lstm_units: int | None = None,
                lm_coef: float | None = None) -> keras.Model:
    """The task's head on `encoder`: {"logits"} for classification, {"score"} for STS-B.

    By default, `build_classifier` on the encoder's sentence vector. A family with a
    `glue_model` hook builds its own, given `lstm_units` and `lm_coef` as options: GPT
    fine-tunes as the GPT paper (the extract token's state, an auxiliary LM loss weighted
    `lm_coef`, default 0.5); ELMo is used feature-based (frozen, its mixed layers read by
    a BiLSTM of `lstm_units` per direction)."""
    task = get_task(task)
    own = _hook(encoder, "glue_model")
    if own is not None:
        return own(encoder, task, tokenizer, {"lstm_units": lstm_units, "lm_coef": lm_coef})
    return build_classifier(encoder, task.num_labels, regression=task.is_regression)


def encode(task: GlueTask, tokenizer, examples, seq_length: int, batch_size: int = 512):
    """Examples -> the encoder's input arrays (the tokenizer's packing, whatever the
    family, or the family's `glue_encode` hook: ELMo keeps the texts and word masks);
    logs how many were cut to `seq_length`."""
    own = _hook(tokenizer, "glue_encode")
    if own is not None:
        return own(task, tokenizer, examples, seq_length)
    if task.is_pair and not tokenizer.supports_pairs:
        raise ValueError(f"GLUE {task.name} is a sentence-pair task; "
                         f"{type(tokenizer).__name__} packs single texts only")
    arrays: dict[str, list] = {}
    cut = 0
    specials = tokenizer.special_tokens[int(task.is_pair)]
    for i in range(0, len(examples), batch_size):
        chunk = examples[i:i + batch_size]
        a = tf.constant([e.text_a for e in chunk])
        b = tf.constant([e.text_b for e in chunk]) if task.is_pair else None
        lengths = tokenizer.tokenize(a).row_lengths()
        if b is not None:
            lengths += tokenizer.tokenize(b).row_lengths()
        cut += int(tf.reduce_sum(tf.cast(lengths + specials > seq_length, tf.int32)))
        packed = tokenizer(a, b, seq_length=seq_length)
        for k, v in packed.items():
            arrays.setdefault(k, []).append(v.numpy())
    if cut:
        logger.warning("%d of %d examples are longer than max_seq_length=%d tokens and were "
                       "cut%s", cut, len(examples), seq_length,
                       " (longest-first)" if task.is_pair else "")
    if not arrays:  # no examples: the tokenizer's keys, empty
        arrays = {k: [v.numpy()[:0]] for k, v in tokenizer([""], seq_length=seq_length).items()}
    return {k: np.concatenate(v) for k, v in arrays.items()}


def label_array(task: GlueTask, examples) -> np.ndarray:
    if task.is_regression:
        return np.array([e.label for e in examples], np.float32)
    ids = {label: i for i, label in enumerate(task.labels)}
    return np.array([ids[e.label] for e in examples], np.int32)


def examples_dataset(tokenizer, x, y=None, seq_length: int | None = None):
    """Unbatched examples of encoded inputs (and labels), mapped by the family's
    `glue_examples` hook where it has one (ELMo makes the character ids here)."""
    data = tf.data.Dataset.from_tensor_slices(x if y is None else (x, y))
    own = _hook(tokenizer, "glue_examples") if tokenizer is not None else None
    if own is not None:
        data = data.map(own(tokenizer, seq_length), num_parallel_calls=tf.data.AUTOTUNE,
                        deterministic=True)
    return data


def predict(model, task: GlueTask, inputs, batch_size: int, trim: int = 0, tokenizer=None,
            seq_length: int | None = None):
    """Label strings (classification) or floats (regression) for encoded inputs, in
    their order; with `trim`, each batch's trailing padding is cut first
    (`training.trim_padding`)."""
    data = examples_dataset(tokenizer, inputs, seq_length=seq_length).batch(batch_size)
    if trim:
        data = data.map(lambda x: training.trim_padding(x, trim))
    out = model.predict(data, verbose=0)
    if task.is_regression:
        return [float(x) for x in np.reshape(out["score"], [-1])]
    return [task.labels[i] for i in np.argmax(out["logits"], axis=-1)]


def write_submission(path: str, task: GlueTask, examples, predictions) -> None:
    """`index<TAB>prediction` with a header, as the GLUE server takes it (STS-B's
    scores clipped to its 0..5; a user's own numbers as predicted)."""
    with atomic_file(path) as f:
        f.write("index\tprediction\n")
        for example, prediction in zip(examples, predictions):
            if task.is_regression:
                if task.name == "stsb":
                    prediction = min(5.0, max(0.0, prediction))
                prediction = f"{prediction:.3f}"
            f.write(f"{example.index}\t{prediction}\n")



def _dev_splits(task):
    return ["dev_matched", "dev_mismatched"] if task.name == "mnli" else ["dev"]


def _test_splits(task):
    return list(task.submission)


def _ax_file(args):
    if args.ax_file:
        return args.ax_file
    if args.data_dir:
        guess = os.path.join(os.path.dirname(os.path.abspath(args.data_dir)), "diagnostic",
                             "diagnostic.tsv")
        return guess if os.path.exists(guess) else None
    return None


def predict_ax(args) -> dict:
    """`--task ax`: the diagnostic set predicted by a fine-tuned MNLI run folder."""
    from kbert.tasks.glue.data import read_tsv

    if not args.model_dir:
        raise SystemExit("--task ax predicts GLUE's diagnostic set with a fine-tuned MNLI "
                         "model: pass --model_dir (the --output_dir of an MNLI run) and "
                         "--ax_file (or --tfds)")
    _, model, tokenizer, settings = load_task_folder(args.model_dir)
    ax = get_task("ax")
    if list(settings.get("labels") or []) != list(ax.labels):
        raise SystemExit(f"{args.model_dir}: not an MNLI model (labels "
                         f"{settings.get('labels')})")
    examples = (read_tsv(ax, args.ax_file, "test") if args.ax_file
                else load_dataset(ax, "test", None, getattr(args, "tfds_data_dir", None)))
    inputs = encode(ax, tokenizer, examples, settings["seq_length"])
    path = os.path.join(args.output_dir, "AX.tsv")
    write_submission(path, ax, examples, predict(model, ax, inputs, args.predict_batch_size,
                                                 args.trim_padding, tokenizer,
                                                 settings["seq_length"]))
    logger.info("wrote %s (%d rows)", path, len(examples))
    return {"ax_rows": len(examples)}


def run(args) -> dict:
    """Fine-tunes and evaluates as the flags say; returns the dev metrics."""
    runtime = training.Runtime.from_flags(args)
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    # predict_ax reads it
    trim = args.trim_padding = trim_multiple(args.trim_padding, runtime.strategy,
                                             args.max_seq_length)
    if getattr(args, "train_file", None):  # the user's own files, every one read first
        task, train, dev_examples, test_examples = load_own_files(
            args.train_file, args.validation_file, args.test_file, args.text_column,
            args.text_pair_column, args.label_column)
        dev = {"dev": dev_examples} if args.validation_file else {}
        test = {"test": test_examples} if args.test_file else {}
        ax_file = None
    else:
        task = get_task(args.task)
        if task.name == "ax":
            return predict_ax(args)
        if not args.data_dir and not args.tfds:
            raise SystemExit("give --data_dir (the task's folder of the GLUE download, e.g. "
                             "glue_data/MRPC) or --tfds")
        data_dir = None if args.tfds else args.data_dir
        # Read (and so validate) every file before training.
        tfds_dir = getattr(args, "tfds_data_dir", None)
        train = load_dataset(task, "train", data_dir, tfds_dir)
        dev = {s: load_dataset(task, s, data_dir, tfds_dir) for s in _dev_splits(task)}
        test = {s: load_dataset(task, s, data_dir, tfds_dir) for s in _test_splits(task)} \
            if args.do_predict else {}
        ax_file = _ax_file(args) if task.name == "mnli" and args.do_predict else None
    if getattr(args, "shots", None) is not None:  # prompting a causal LM, no training
        from kbert.tasks.glue import prompting

        return prompting.run(args, task, train, dev, test, write_submission)
    family = run_family(args)  # once, for the run
    if family.hook("glue_text") is not None and args.init_from and os.path.isdir(
            args.init_from):  # T5: labels as words, decoded
        if ax_file:
            from kbert.tasks.glue.data import read_tsv

            test = {**test, "ax": read_tsv(get_task("ax"), ax_file, "test")}
        from kbert.tasks.glue.text_to_text import run_glue

        return run_glue(args, runtime, family, task, train, dev, test, write_submission)
    if not train:
        raise SystemExit(f"GLUE {task.name}: the training split is empty")
    logger.info("GLUE %s: %d training examples; %s", task.name, len(train),
                ", ".join(f"{s} {len(v)}" for s, v in {**dev, **test}.items()))

    tokenizer = build_tokenizer([e.text_a for e in train] + [e.text_b for e in train if e.text_b],
                                **tokenizer_options(args, family))
    own = _hook(tokenizer, "glue_tokenizer")
    if own is not None:  # a family's own input format (GPT's task tokens)
        tokenizer = own(tokenizer, task)
    seq = args.max_seq_length
    x = encode(task, tokenizer, train, seq)
    y = label_array(task, train)
    batch = args.train_batch_size

    dev_inputs = {}  # encoded once, on first use (every evaluation reads them)

    def dev_metrics(model, prefix=""):
        out = {}
        for split, examples in dev.items():
            if split not in dev_inputs:
                dev_inputs[split] = encode(task, tokenizer, examples, seq)
            predictions = predict(model, task, dev_inputs[split], args.predict_batch_size,
                                  trim, tokenizer, seq)
            metrics_ = compute_metrics(task, predictions, [e.label for e in examples])
            suffix = "" if split in ("dev", "dev_matched") else "_mm"
            out.update({f"{prefix}{k}{suffix}": v for k, v in metrics_.items()})
        return out

    total_steps, steps_per_loop = training.whole_loops(
        training.train_steps(args, len(train), batch),
        loop_steps(args, len(train) / batch, bool(dev)), args.steps_per_execution)
    data = training.finalize_dataset(examples_dataset(tokenizer, x, y, seq), batch,
                                     training=True, seed=args.seed, trim=trim)
    if task.is_regression:
        loss, metrics = {"score": keras.losses.MeanSquaredError()}, None
    else:
        loss = {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}
        metrics = {"logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}
    def make_model():
        encoder = build_encoder(tokenizer, **encoder_options(args, DEMO_CONFIG, family))
        if getattr(args, "freeze_encoder", False):  # the head alone learns
            encoder.trainable = False
        return adapt(build_model(encoder, task, tokenizer, getattr(args, "lstm_units", None),
                                 getattr(args, "lm_coef", None)), args)

    model = runtime.build(
        make_model,
        lambda: training.create_optimizer(args.learning_rate, total_steps,
                                          int(total_steps * args.warmup_proportion)),
        loss, metrics)
    evaluation = best_model(args, dev_metrics, [f"{m}{suffix}" for m in task.metrics
                                                for suffix in ["", "_mm"][:len(dev)]],
                            steps_per_loop, len(train) / batch)
    trained = fit_and_finish(
        model, data, args, total_steps, steps_per_loop, examples_per_step=batch,
        tokens_per_step=training.real_tokens_per_batch(x["padding_mask"], batch),
        steps_per_epoch=len(train) / batch, evaluation=evaluation)
    source = dev_source(args, task, dev)
    figures = dev_metrics(model)
    results = write_results(args.output_dir, figures, split="eval", source=source,
                            trained=trained) if dev else {}
    for split, examples in test.items():
        path = os.path.join(args.output_dir, task.submission[split])
        write_submission(path, task, examples, predict(
            model, task, encode(task, tokenizer, examples, seq), args.predict_batch_size, trim,
            tokenizer, seq))
        logger.info("wrote %s (%d rows)", path, len(examples))
    settings = dict(labels=list(task.labels) if task.labels else None, pair=task.is_pair,
                    seq_length=seq, regression=task.is_regression)
    save_task_folder(args.output_dir, model, tokenizer, "classifier", **settings)
    if ax_file:
        args.model_dir, args.ax_file = args.output_dir, ax_file
        predict_ax(args)
    if args.export_dir:
        model, variant = export_variant(model, args.quantize, args.dtype)
        if variant:  # the export's own figures: its model on the dev sets
            results = write_results(
                args.output_dir, {**figures, **dev_metrics(model, f"{variant}_")},
                split="eval", source=source, trained=trained)
        export_classifier(model, tokenizer, args.export_dir, **settings)
        logger.info("SavedModel for TF Serving: %s", args.export_dir)
    return results
