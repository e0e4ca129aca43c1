"""What the task command lines share: model and training flags, and building the
tokenizer and encoder from a model folder (any registered family) or from scratch.

The builders take explicit arguments; `tokenizer_options` and `encoder_options`
translate the command lines' flags into them."""

from __future__ import annotations

import os
import logging

import numpy as np
import tensorflow as tf

from kbert import BertConfig, BertEncoder, BertTokenizer, build_vocab
from kbert.models import registry
from kbert.models.bert.encoder import init_sinusoidal_positions
from kbert.cli import UsageError
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
