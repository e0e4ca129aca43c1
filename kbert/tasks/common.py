"""What the task command lines share: model and training flags, and building the
tokenizer and encoder from a model folder (any registered family) or from scratch.

The builders take explicit arguments; `tokenizer_options` and `encoder_options`
translate the command lines' flags into them."""

from __future__ import annotations

import argparse
import os
import logging

import numpy as np
import tensorflow as tf

from kbert import BertConfig, BertEncoder, BertTokenizer, build_vocab
from kbert.models import registry
from kbert.models.bert.encoder import init_sinusoidal_positions
from kbert.cli import UsageError, parse_bool
from kbert.tokenizers.base import Tokenizer

logger = logging.getLogger(__name__)


MODEL_HELP = {"gpt": "gpt fine-tunes as the GPT paper and needs --init_from a GPT folder",
              "elmo": "elmo trains a head on a frozen biLM (feature-based, as the ELMo paper) "
                      "and needs --init_from an ELMo folder"}


def add_model_flags(parser: argparse.ArgumentParser, *, demo: str, vocab_size: int,
                    init_help: str = "", position_init: str = "normal",
                    models: tuple = ("bert", "gpt")) -> argparse._ArgumentGroup:
    group = parser.add_argument_group("model")
    group.add_argument("--model", default=None, choices=list(models),
                       help="model family (default: the family of --init_from, or BERT from "
                            "scratch); " + "; ".join(MODEL_HELP[m] for m in models
                                                     if m in MODEL_HELP))
    group.add_argument("--init_from", help="a model folder (kbert, Hugging Face or Google "
                                           "BERT, with its vocabulary); none: train from "
                                           "scratch" + init_help)
    group.add_argument("--preset", default="demo",
                       help=f"BertConfig preset when training from scratch ('demo': {demo})")
    group.add_argument("--vocab_size", type=int, default=vocab_size,
                       help="WordPiece vocabulary learned from the training texts when "
                            "training from scratch")
    group.add_argument("--do_lower_case", type=parse_bool, default=None,
                       metavar="true|false",
                       help="override the casing read from --init_from")
    group.add_argument("--position_init", default=position_init,
                       choices=["normal", "sinusoidal"],
                       help="from scratch: start the learned position embeddings as BERT "
                            "does (truncated normal) or as scaled sinusoids, which lets a "
                            "small model learn word order fast (ignored with --init_from)")
    return group


def add_training_flags(group, *, learning_rate, epochs, output_dir: str, export_help: str,
                       batch_size: int = 32, seq_help: str | None = None,
                       trim_padding: bool = False) -> None:
    """Batch sizes, schedule, checkpoints, output and export folders, seed. With
    `learning_rate=None` the command defines --learning_rate and --num_train_epochs;
    with `seq_help`, --max_seq_length (default 128) is added too; with `trim_padding`,
    --trim_padding (see `trim_multiple`)."""
    if seq_help:
        group.add_argument("--max_seq_length", type=int, default=128, help=seq_help)
    if trim_padding:
        group.add_argument("--trim_padding", type=int, default=32, metavar="N",
                           help="cut each batch's trailing padding to a multiple of N tokens "
                                "(same results, less work on short texts; 0: every batch "
                                "at max_seq_length; always 0 on TPU and multi_worker)")
    group.add_argument("--train_batch_size", type=int, default=batch_size,
                       help="global batch size")
    group.add_argument("--predict_batch_size", type=int, default=64,
                       help="batch size for prediction")
    if learning_rate is not None:
        group.add_argument("--learning_rate", type=float, default=learning_rate,
                           help="peak learning rate")
        group.add_argument("--num_train_epochs", type=float, default=epochs, help="epochs")
    group.add_argument("--warmup_proportion", type=float, default=0.1,
                       help="share of training steps with linear learning-rate warmup")
    group.add_argument("--steps_per_loop", type=int, default=200,
                       help="steps between checkpoints")
    group.add_argument("--keep_checkpoints", type=int, default=1,
                       help="checkpoints kept after a finished run (the last ones; with 0 "
                            "none, and a rerun trains again)")
    group.add_argument("--tensorboard_dir", default=None,
                       help="TensorBoard logs (default OUTPUT_DIR/tensorboard; 'none': off)")
    group.add_argument("--output_dir", default=output_dir,
                       help="predictions, metrics, checkpoints and the fine-tuned model")
    group.add_argument("--export_dir", default=None, help=export_help)
    group.add_argument("--seed", type=int, default=0,
                       help="seed for initialization and shuffling")


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


def build_tokenizer(texts, *, init_from: str | None = None, lowercase: bool | None = None,
                    default_lowercase: bool = True, vocab_size: int = 8000,
                    seq_length: int = 128) -> Tokenizer:
    """The tokenizer of the model folder `init_from` (any registered family), or, from
    scratch, a `BertTokenizer` with a WordPiece vocabulary of about `vocab_size` learned
    from `texts`. `lowercase` overrides the folder's casing (None: the folder's, or
    `default_lowercase` from scratch)."""
    if init_from:
        family = registry.family_of_folder(init_from)
        options = {"seq_length": seq_length}
        if lowercase is not None:
            options["lowercase"] = lowercase
        return family.tokenizer_class.from_pretrained(init_from, **options)
    lowercase = default_lowercase if lowercase is None else lowercase
    vocab = build_vocab(list(dict.fromkeys(texts)), vocab_size=vocab_size, min_count=1,
                        lowercase=lowercase)
    return BertTokenizer(vocab, lowercase=lowercase, seq_length=seq_length)


def build_encoder(tokenizer, *, init_from: str | None = None, preset: str = "demo",
                  demo_config: dict | None = None, seq_length: int = 128,
                  position_init: str = "normal"):
    """The encoder of the model folder `init_from` (any registered family), or a new
    BERT of `preset` ("demo": `demo_config`) sized to the tokenizer's vocabulary, whose
    position embeddings start as `position_init` says ("normal" or "sinusoidal")."""
    if init_from:
        return registry.family_of_folder(init_from).encoder_class.from_pretrained(init_from)
    overrides = dict(vocab_size=tokenizer.vocab_size,
                     max_position_embeddings=max(seq_length, 64))
    config = (BertConfig(**(demo_config or {}), **overrides) if preset == "demo"
              else BertConfig.preset(preset, **overrides))
    encoder = BertEncoder(config)
    if position_init == "sinusoidal":
        init_sinusoidal_positions(encoder)
    return encoder


def tokenizer_options(args, default_lowercase: bool = True) -> dict:
    """`build_tokenizer`'s arguments from the model flags."""
    return dict(init_from=args.init_from, default_lowercase=default_lowercase,
                lowercase=None if args.do_lower_case is None else bool(args.do_lower_case),
                vocab_size=args.vocab_size, seq_length=args.max_seq_length)


def encoder_options(args, demo_config: dict) -> dict:
    """`build_encoder`'s arguments from the model flags."""
    return dict(init_from=args.init_from, preset=args.preset, demo_config=demo_config,
                seq_length=args.max_seq_length,
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
    """The family a task command runs: --model, else that of --init_from, else bert."""
    if getattr(args, "model", None):
        return args.model
    init_from = getattr(args, "init_from", None)
    if init_from and os.path.isdir(init_from):
        return registry.family_of_folder(init_from).name
    return "bert"


def check_model_flag(args) -> None:
    """--model against --init_from: the same family, and GPT only from a folder."""
    model, init_from = getattr(args, "model", None), getattr(args, "init_from", None)
    if not model:
        return
    if init_from:
        if not os.path.isdir(init_from):
            raise FileNotFoundError(f"--init_from {init_from}: no such folder")
        family = registry.family_of_folder(init_from).name
        if family != model:
            raise UsageError(f"--model {model}: --init_from {init_from} holds a {family} "
                             "model")
    elif model != "bert":
        raise UsageError(f"--model {model} needs --init_from a {model} folder (kbert has no "
                         f"{model} vocabulary to train one from scratch; e.g. " + (
                             "Hugging Face's gpt2 or OpenAI's GPT-2 release)" if model == "gpt"
                             else "a bilm-tf / AllenNLP ELMo folder, or one that "
                                  "ELMoLanguageModel.save_pretrained wrote)"))


def check_task_support(args, task: str) -> None:
    """The family of --init_from (or --model) can run `task` (its tokenizer lists it in
    `Tokenizer.tasks`), else one UsageError line naming the family."""
    family = registry.get_family(model_family(args))
    tasks = family.tokenizer_class.tasks
    if task not in tasks:
        source = (f"--init_from {args.init_from} holds a {family.name} model"
                  if getattr(args, "init_from", None) else f"--model {family.name}")
        raise UsageError(f"{source}: kbert runs {task} on models whose tokenizer gives "
                         f"{TASK_NEEDS.get(task, 'what the task needs')}; "
                         f"{family.name} runs {', '.join(sorted(tasks))}")


TASK_NEEDS = {"squad": "character offsets (BERT's WordPiece)",
              "ner": "words aligned with its tokens (BERT's WordPiece, ELMo's characters)"}


def check_training_flags(args, specials: int = 2, model_flag: bool = True,
                         task: str | None = None) -> None:
    """Batch sizes, epochs and the sequence length, before any work or file; with
    `model_flag`, --model against --init_from (`check_model_flag`); with `task`, that
    the family runs it (`check_task_support`)."""
    for flag in ("train_batch_size", "predict_batch_size"):
        if getattr(args, flag, 1) < 1:
            raise UsageError(f"--{flag} {getattr(args, flag)}: must be at least 1")
    for flag in ("steps_per_loop", "steps_per_execution"):
        if getattr(args, flag, 1) < 1:
            raise UsageError(f"--{flag} {getattr(args, flag)}: must be at least 1")
    loop, execution = getattr(args, "steps_per_loop", 1), getattr(args, "steps_per_execution", 1)
    if loop % execution:
        raise UsageError(f"--steps_per_loop {loop}: must be a multiple of "
                         f"--steps_per_execution {execution} (Keras runs whole executions)")
    if getattr(args, "keep_checkpoints", 0) < 0:
        raise UsageError(f"--keep_checkpoints {args.keep_checkpoints}: must be 0 or more")
    epochs = getattr(args, "num_train_epochs", None)
    if epochs is not None and not epochs > 0:
        raise UsageError(f"--num_train_epochs {epochs}: must be more than 0")
    if model_flag:
        check_model_flag(args)
    if task is not None:
        check_task_support(args, task)
    seq = getattr(args, "max_seq_length", None)
    if seq is not None:
        if seq < specials + 1:
            raise UsageError(f"--max_seq_length {seq}: leaves no room for a token besides "
                             f"the {specials} special tokens")
        limit = model_positions(getattr(args, "init_from", None))
        if limit is not None and seq > limit:
            raise UsageError(f"--max_seq_length {seq}: the model in --init_from "
                             f"{args.init_from} has {limit} positions")
