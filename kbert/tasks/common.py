"""What the task command lines share: model and training flags, and building the
tokenizer and encoder from a model folder (any registered family) or from scratch.

The builders take explicit arguments; `tokenizer_options` and `encoder_options`
translate the command lines' flags into them."""

from __future__ import annotations

import os
import logging

import numpy as np
import tensorflow as tf

from kbert import training
from kbert.cli import UsageError
from kbert.models import lora, registry
from kbert.tokenizers.base import Tokenizer

logger = logging.getLogger(__name__)


def fit_options(args) -> dict:
    """`training.fit`'s folders from the flags: checkpoints and TensorBoard logs."""
    tensorboard = getattr(args, "tensorboard_dir", None)
    if tensorboard is None:
        tensorboard = os.path.join(args.output_dir, "tensorboard")
    elif tensorboard.lower() == "none":
        tensorboard = None
    return {"checkpoint_dir": os.path.join(args.output_dir, "checkpoints"),
            "tensorboard_dir": tensorboard}


def trim_multiple(trim_padding: int, strategy, seq_length: int) -> int:
    """`trim_padding`, or 0 on a TPU (it wants one batch shape) and with several
    workers (each would cut its own batches to other lengths than the others')."""
    if not trim_padding:
        return 0
    where = ("TPU" if isinstance(strategy, tf.distribute.TPUStrategy) else "multi_worker"
             if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) else None)
    if where:
        logger.info("%s: batches keep max_seq_length=%d (--trim_padding is off)", where,
                    seq_length)
        return 0
    return trim_padding


def _scratch_hook(family, hook: str):
    make = family.hook(hook)
    if make is None:
        raise UsageError(f"--model {family.name} needs --init_from a {family.name} folder "
                         f"(kbert has no {family.name} vocabulary to train one from "
                         f"scratch; e.g. {family.folder_hint or 'a folder of that family'})")
    return make


def run_family(args, trained: str | None = None) -> registry.Family:
    """The family a run uses, worked out once: --model's, else the --init_from folder's,
    else that of `trained` (the model folder a --do_train run left, for --do_predict
    alone) where it holds one, else the registry's default (from scratch)."""
    if getattr(args, "model", None):
        return registry.get_family(args.model)
    for folder in (getattr(args, "init_from", None), trained):
        if folder and os.path.isdir(folder):
            return registry.family_of_folder(folder)
    return registry.get_family(registry.DEFAULT_FAMILY)


def build_tokenizer(texts, *, family: registry.Family, init_from: str | None = None,
                    lowercase: bool | None = None, default_lowercase: bool = True,
                    vocab_size: int = 8000, seq_length: int = 128) -> Tokenizer:
    """The tokenizer of the model folder `init_from` (any registered family), or, from
    scratch, the `scratch_tokenizer` of `family` (the run's, `run_family`; BERT's: a
    WordPiece vocabulary of about `vocab_size` learned from `texts`). `lowercase`
    overrides the folder's casing (None: the folder's, or `default_lowercase` from
    scratch)."""
    if init_from:
        options = {"seq_length": seq_length}
        if lowercase is not None:
            options["lowercase"] = lowercase
        return family.tokenizer_class.from_pretrained(init_from, **options)
    make = _scratch_hook(family, "scratch_tokenizer")
    return make(texts, lowercase=default_lowercase if lowercase is None else lowercase,
                vocab_size=vocab_size, seq_length=seq_length)


def build_encoder(tokenizer, *, family: registry.Family, init_from: str | None = None,
                  preset: str = "demo", demo_config: dict | None = None,
                  seq_length: int = 128, position_init: str = "normal"):
    """The encoder of the model folder `init_from` (any registered family), or, from
    scratch, a new one of `family` (the run's; its `scratch_encoder` hook) of `preset`
    ("demo": `demo_config`) sized to the tokenizer's vocabulary, whose position
    embeddings start as `position_init` says ("normal" or "sinusoidal")."""
    if init_from:
        return family.encoder_class.from_pretrained(init_from)
    make = _scratch_hook(family, "scratch_encoder")
    return make(tokenizer, preset=preset, demo_config=demo_config, seq_length=seq_length,
                position_init=position_init)


def adapt(model, args):
    """--lora_rank: LoRA adapters on the model's encoder, its other weights frozen
    (`kbert.enable_lora`); the model as it was otherwise."""
    rank = getattr(args, "lora_rank", 0)
    if rank:
        targets = args.lora_targets.split(",") if args.lora_targets else None
        paths = lora.enable_lora(model, rank, targets=targets, alpha=args.lora_alpha)
        logger.info("LoRA rank %d on %d layers (%s ...); the encoder's other weights frozen",
                    rank, len(paths), paths[0])
    return model


def finish_adapters(model, args) -> None:
    """After --lora_rank training: the adapters saved alone (OUTPUT_DIR/adapter), then
    merged into the kernels, so the task folder and export are a plain model."""
    if lora.lora_layers(model):
        lora.save_lora(model, os.path.join(args.output_dir, "adapter"))
        lora.merge_lora(model)


def fit_and_finish(model, data, args, total_steps: int, steps_per_loop: int, *,
                   examples_per_step: int, tokens_per_step, steps_per_epoch: float,
                   evaluation=None, checkpoint_dir: str | None = None) -> dict:
    """Every task's training tail: `training.fit`, old checkpoints pruned, the best
    weights restored (--eval_strategy), LoRA adapters saved and merged. Returns what the
    weights now in `model` are: {"epoch", "step"} (the best evaluation's, or the last
    step's), for the results files. `checkpoint_dir` replaces OUTPUT_DIR/checkpoints."""
    options = fit_options(args)
    if checkpoint_dir:
        options["checkpoint_dir"] = checkpoint_dir
    training.fit(model, data, total_steps, steps_per_loop, **options,
                 examples_per_step=examples_per_step, tokens_per_step=tokens_per_step,
                 steps_per_epoch=steps_per_epoch, evaluation=evaluation)
    training.prune_checkpoints(options["checkpoint_dir"], args.keep_checkpoints)
    best = evaluation.restore(model) if evaluation is not None else None
    finish_adapters(model, args)
    step = best["step"] if best else total_steps
    return {"epoch": round(step / steps_per_epoch, 4), "step": step}


def prefixed(metrics: dict, prefix: str) -> dict:
    """transformers' result keys: `eval_accuracy`, `test_f1`; a nested table (conlleval's
    per-type figures) flattened as `eval_LOC_f1`."""
    out = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            out.update(prefixed(value, f"{prefix}_{key}"))
        else:
            out[f"{prefix}_{key}"] = value
    return out


def write_results(output_dir: str, metrics: dict, *, split: str, source: str,
                  trained: dict | None = None) -> dict:
    """OUTPUT_DIR/{split}_results.json as transformers' scripts write it (`eval_` or
    `test_` before each metric, `epoch` and `step` of the weights measured), with the
    data named (`eval_split`: the file or dataset split). Returns the record."""
    from kbert.io import write_json

    record = {**prefixed(metrics, split), f"{split}_split": source, **(trained or {})}
    write_json(os.path.join(output_dir, f"{split}_results.json"), record, ensure_ascii=True)
    return record


def results_line(title: str, record: dict, split: str = "eval") -> str:
    """The line a task command prints last: what was measured, on which data, after
    which step, and its figures (the results file's keys)."""
    import json

    where = f" after step {record['step']} (epoch {record['epoch']:g})" \
        if "step" in record else ""
    figures = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in record.items()
               if k.startswith(f"{split}_") and k != f"{split}_split"}
    return f"{title}, {record.get(f'{split}_split', split)}{where}: {json.dumps(figures)}"


def loop_steps(args, steps_per_epoch: float, has_dev: bool) -> int:
    """fit's loop: --steps_per_loop, or with --eval_strategy the evaluation interval
    (each evaluation then falls on a checkpoint)."""
    strategy = getattr(args, "eval_strategy", "no")
    if strategy == "no":
        return args.steps_per_loop
    if not has_dev:
        raise ValueError(f"--eval_strategy {strategy}: needs a dev set to evaluate on")
    loop = training.eval_interval(strategy, args.eval_steps, steps_per_epoch,
                                  args.steps_per_execution)
    logger.info("evaluating every %d steps (checkpoints too)", loop)
    return loop


def best_model(args, evaluate, metrics: list[str], steps_per_loop: int,
               steps_per_epoch: float):
    """With --eval_strategy, the `training.BestModel` that `evaluate(model) -> {metric:
    value}` feeds (--metric_for_best_model among `metrics`, default the first); else
    None."""
    if getattr(args, "eval_strategy", "no") == "no":
        return None
    metric = args.metric_for_best_model or metrics[0]
    if metric.startswith("eval_") and metric[5:] in metrics:  # eval_results.json's name
        metric = metric[5:]
    if metric not in metrics:
        raise ValueError(f"--metric_for_best_model {metric}: the dev metrics are "
                         f"{', '.join(metrics)}")
    options = fit_options(args)
    return training.BestModel(
        evaluate, metric, os.path.join(args.output_dir, "best"), steps_per_loop,
        args.greater_is_better, args.early_stopping_patience, steps_per_epoch,
        options["tensorboard_dir"],
        resume=training.latest_step(options["checkpoint_dir"]) is not None)


def tokenizer_options(args, family, default_lowercase: bool = True) -> dict:
    """`build_tokenizer`'s arguments from the model flags (`family`: the run's)."""
    return dict(init_from=args.init_from, family=family,
                default_lowercase=default_lowercase,
                lowercase=None if args.do_lower_case is None else bool(args.do_lower_case),
                vocab_size=args.vocab_size, seq_length=args.max_seq_length)


def encoder_options(args, demo_config: dict, family) -> dict:
    """`build_encoder`'s arguments from the model flags (`family`: the run's)."""
    return dict(init_from=args.init_from, family=family, preset=args.preset,
                demo_config=demo_config, seq_length=args.max_seq_length,
                position_init=getattr(args, "position_init", "normal"))


def char_offset_table(text: str) -> np.ndarray:
    """`table[b]` is the code-point index of UTF-8 byte offset `b` of `text` (the
    character that byte belongs to); `table[len(bytes)] == len(text)`."""
    table = np.zeros(len(text.encode("utf-8")) + 1, dtype=np.int64)
    pos = 0
    for i, ch in enumerate(text):
        n = len(ch.encode("utf-8"))
        table[pos:pos + n] = i
        pos += n
    table[pos] = len(text)
    return table


# ------------------------------------------------------------------ command lines
def model_positions(init_from: str | None) -> int | None:
    """The position-table size of the model folder `init_from` (None from scratch or
    when its config does not say)."""
    if not init_from:
        return None
    if not os.path.isdir(init_from):
        raise FileNotFoundError(f"--init_from {init_from}: no such folder")
    family = registry.family_of_folder(init_from)
    for name in ("config.json", "bert_config.json", "hparams.json"):
        path = os.path.join(init_from, name)
        if os.path.exists(path):
            config = family.config_class.from_json_file(path)
            return getattr(config, "max_position_embeddings", None)
    return None


def model_family(args) -> str:
    """The family a task command runs: --model, else that of --init_from, else the
    registry's default (the family trained from scratch)."""
    if getattr(args, "model", None):
        return args.model
    init_from = getattr(args, "init_from", None)
    if init_from and os.path.isdir(init_from):
        return registry.family_of_folder(init_from).name
    return registry.DEFAULT_FAMILY


def check_model_flag(args, task: str | None = None) -> None:
    """--model: a registered family, one that runs `task` (`check_task_support`), the
    same as --init_from's, and one that trains from scratch when no folder is given."""
    model, init_from = getattr(args, "model", None), getattr(args, "init_from", None)
    if not model:
        return
    try:
        family = registry.get_family(model)
    except ValueError:
        raise UsageError(f"--model {model}: not a model family; choose from "
                         f"{', '.join(registry.families())}") from None
    if task is not None and not init_from:
        check_task_support(args, task)
    if init_from:
        if not os.path.isdir(init_from):
            raise FileNotFoundError(f"--init_from {init_from}: no such folder")
        found = registry.family_of_folder(init_from).name
        if found != family.name:
            raise UsageError(f"--model {model}: --init_from {init_from} holds a {found} "
                             "model")
    else:
        _scratch_hook(family, "scratch_encoder")


def check_task_support(args, task: str) -> None:
    """The family of --init_from (or --model) can run `task` (its tokenizer lists it in
    `Tokenizer.tasks`), else one UsageError line naming the family and those that can."""
    family = registry.get_family(model_family(args))
    tasks = family.tokenizer_class.tasks
    if task not in tasks:
        source = (f"--init_from {args.init_from} holds a {family.name} model"
                  if getattr(args, "init_from", None) else f"--model {family.name}")
        able = [f.name for f in registry.all_families() if task in f.tokenizer_class.tasks]
        raise UsageError(f"{source}: kbert runs {task} on models whose tokenizer gives "
                         f"{TASK_NEEDS.get(task, 'what the task needs')} ({', '.join(able)}); "
                         f"{family.name} runs {', '.join(sorted(tasks))}")


def check_export_support(args, export: str) -> None:
    """--export_dir: the family's tokenizer prepares the `export` SavedModel's inputs in
    the graph (it lists it in `Tokenizer.exports`), else one UsageError line."""
    family = registry.get_family(model_family(args))
    exports = family.tokenizer_class.exports
    if export not in exports:
        able = [f.name for f in registry.all_families() if export in f.tokenizer_class.exports]
        raise UsageError(f"--export_dir: the {export} SavedModel takes {', '.join(able)} "
                         f"models; {family.name} exports {', '.join(sorted(exports)) or 'none'} "
                         "(the run writes the task folder, model.keras)")


def check_quantize_flag(args) -> None:
    """--quantize and --dtype set the export's weights: they need --export_dir, and
    only one of them (checked with the other flags, before any work)."""
    quantize, dtype = getattr(args, "quantize", None), getattr(args, "dtype", None)
    for flag, value in (("quantize", quantize), ("dtype", dtype)):
        if value and not getattr(args, "export_dir", None):
            raise UsageError(f"--{flag} {value}: sets the SavedModel's weights; give "
                             "--export_dir too")
    from kbert.export.folder import check_variant

    try:
        check_variant(quantize, dtype)
    except ValueError as e:
        raise UsageError(str(e)) from None


TASK_NEEDS = {"squad": "character offsets",
              "ner": "words aligned with its tokens",
              "seq2seq": "text back from generated ids (an encoder-decoder, or a causal LM "
                         "with an end token)"}


def check_training_flags(args, specials: int | None = None, model_flag: bool = True,
                         task: str | None = None, pair: bool = False) -> None:
    """--quantize and the sequence length, before any work or file (the values alone
    of batch sizes, steps and epochs: `kbert.cli.check_training_values`, which
    `run_command` runs before TensorFlow is imported); with
    `model_flag`, --model against --init_from (`check_model_flag`); with `task`, that
    the family runs it (`check_task_support`). `specials`: the special tokens each
    input holds (None: what the family's tokenizer adds to one text, or to a pair with
    `pair`)."""
    check_quantize_flag(args)
    if model_flag:
        check_model_flag(args, task)
    if task is not None:
        check_task_support(args, task)
    seq = getattr(args, "max_seq_length", None)
    if seq is not None:
        if specials is None:
            specials = registry.get_family(model_family(args)).tokenizer_class.special_tokens[
                int(pair)]
        if seq < specials + 1:
            raise UsageError(f"--max_seq_length {seq}: leaves no room for a token besides "
                             f"the {specials} special tokens")
        limit = model_positions(getattr(args, "init_from", None))
        if limit is not None and seq > limit:
            raise UsageError(f"--max_seq_length {seq}: the model in --init_from "
                             f"{args.init_from} has {limit} positions")
