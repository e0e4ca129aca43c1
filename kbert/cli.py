"""Command-line plumbing shared by kbert's commands: flag checks that name the flag,
one-line errors with exit statuses (2 for flags, 1 for data), a word on Ctrl-C, and
no output folder left behind by a run that failed before writing anything."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil

from kbert.io import atomic_file

# The flags a training run was started with, in its --output_dir.
RUN_FILE = "kbert_run.json"
# Flags that do not change what is trained (where it is written, what is predicted or
# exported afterwards, how much is printed).
NOT_SETTINGS = frozenset({
    "verbose", "overwrite", "overwrite_output_dir", "export_dir", "predict_batch_size",
    "do_train", "do_predict", "predict_file", "keep_checkpoints", "tensorboard_dir",
    "n_best_size", "max_answer_length", "null_score_diff_threshold", "ax_file", "model_dir",
    "no_check"})


def parse_bool(text) -> bool:
    """absl-style booleans, as the original scripts take them: true/false, 1/0."""
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "t", "y"):
        return True
    if value in ("0", "false", "no", "f", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def model_path(text: str) -> str:
    """argparse type of --init_from and --model_dir: a path on disk, or a Hugging Face
    Hub name resolved to its folder in the Hub cache (`kbert.hub.resolve`)."""
    from kbert.hub import resolve

    try:
        return resolve(text)
    except FileNotFoundError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default once: not when it is None (a default that depends on other
    flags, which the help text says) or when the help text already names it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (action.default is None or "default" in text or action.nargs == 0
                or action.default is argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


class UsageError(ValueError):
    """A flag value that cannot work: reported as `error: ...`, exit status 2."""


# Failures of the user's input (files, folders, values): one line, exit status 1.
# (A KeyError or any other exception is a bug and keeps its traceback.)
DATA_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError,
               PermissionError)


def add_cli_flags(parser: argparse.ArgumentParser, training: bool = True,
                  export: bool = True) -> None:
    parser.add_argument("--verbose", action="store_true",
                        help="show tracebacks and TensorFlow's own log lines")
    if export:
        parser.add_argument("--overwrite", action="store_true",
                            help="replace an existing --export_dir version folder")
    if training:
        parser.add_argument("--overwrite_output_dir", action="store_true",
                            help="start over in an --output_dir that holds a run (by "
                                 "default the same flags resume it, other flags are an "
                                 "error)")


def check_rerun(args, flags: dict, defaults: dict | None = None) -> None:
    """Records the run's flags in --output_dir, or compares them with a run already
    there: the same flags resume it; other flags are an error naming them, unless
    --overwrite_output_dir, which starts over (its checkpoints are removed).

    The flags are compared as given; the record also keeps each left-out flag's value
    in effect (a default that depends on other flags), which the message names instead
    of "None"."""
    output_dir = getattr(args, "output_dir", None)
    if not output_dir or getattr(args, "do_train", True) is False:
        return  # no training: nothing is resumed
    settings = {k: v for k, v in flags.items() if k not in NOT_SETTINGS}
    in_effect = {k: _json_value(getattr(args, k, None)) for k, v in settings.items()
                 if v is None}
    path = os.path.join(output_dir, RUN_FILE)
    # Only a run that got as far as a checkpoint is resumed (a run that failed on its
    # data before training is simply run again with the corrected flags).
    started = os.path.exists(os.path.join(output_dir, "checkpoints", "checkpoint"))
    if os.path.exists(path) and started:
        with open(path, encoding="utf-8") as f:
            before = json.load(f)
        before_in_effect = before.pop(IN_EFFECT, {})

        def shown(value, key, defaults):
            if value is None:
                return f"{defaults.get(key)} by default" if defaults.get(key) is not None \
                    else "not given"
            return value

        # A flag the record lacks (added to kbert after the run started) is unchanged
        # while it keeps its default.
        defaults = defaults or {}
        differ = sorted(k for k in set(before) | set(settings)
                        if before.get(k) != settings.get(k) and not (
                            k not in before and k in defaults
                            and settings.get(k) == defaults[k]))
        if differ and not getattr(args, "overwrite_output_dir", False):
            changes = ", ".join(f"--{k} {shown(settings.get(k), k, in_effect)} (was "
                                f"{shown(before.get(k), k, before_in_effect)})"
                                for k in differ)
            raise UsageError(f"--output_dir {output_dir} holds a run started with other "
                             f"flags: {changes}. Give the same flags to resume it, another "
                             "--output_dir, or --overwrite_output_dir to start over")
    if getattr(args, "overwrite_output_dir", False):
        for folder in ("checkpoints", "best"):  # best: kbert.training.evaluation's
            shutil.rmtree(os.path.join(output_dir, folder), ignore_errors=True)
    with atomic_file(path) as f:
        json.dump({**settings, IN_EFFECT: in_effect}, f, indent=2, sort_keys=True)


IN_EFFECT = "__in_effect__"  # RUN_FILE's record of the defaults a run used


def _json_value(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return str(value)


def check_export_dir(export_dir: str | None, overwrite: bool, flag: str = "--export_dir"
                     ) -> None:
    """TF Serving's layout, BASE/NAME/VERSION with a numeric VERSION; an existing version
    folder is refused (TF Serving does not reload a version it has) unless `overwrite`."""
    if not export_dir:
        return
    leaf = os.path.basename(os.path.normpath(export_dir))
    if not leaf.isdigit():
        raise UsageError(f"{flag} {export_dir}: must end in a version number, as TF Serving "
                         f"expects (BASE/NAME/VERSION, e.g. {os.path.join(export_dir, '1')})")
    if os.path.exists(export_dir) and not overwrite:
        raise UsageError(f"{flag} {export_dir}: exists already (TF Serving would not load "
                         "a changed model under a version it has); use a new version number "
                         "or --overwrite")
    check_writable_folder(os.path.dirname(os.path.abspath(export_dir)), flag, export_dir)


def check_writable_folder(folder: str, flag: str, given: str) -> None:
    """The folder can be created and written (a file is made and removed in its nearest
    existing ancestor), so that a run does not find out after training."""
    import tempfile

    ancestor = os.path.abspath(folder)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise UsageError(f"{flag} {given}: {ancestor} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".kbert-write-check-", dir=ancestor)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise UsageError(f"{flag} {given}: cannot write in {ancestor} "
                         f"({e.strerror or e})") from None


def check_training_values(args) -> None:
    """The training flags that a value alone makes wrong (batch sizes, steps, epochs,
    checkpoints kept, LoRA and evaluation settings; a flag the command lacks is
    skipped). `run_command` checks them right after parsing, before TensorFlow is
    imported, so that such a mistake is answered at once."""
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
    rank = getattr(args, "lora_rank", 0)
    if rank < 0:
        raise UsageError(f"--lora_rank {rank}: must be 0 (off) or more")
    if rank and not getattr(args, "init_from", None):
        raise UsageError(f"--lora_rank {rank}: adapts a pretrained encoder; give --init_from")
    if rank and getattr(args, "freeze_encoder", False):
        raise UsageError(f"--lora_rank {rank}: --freeze_encoder trains no encoder weight at "
                         "all; give one of them")
    for flag in ("lora_alpha", "lora_targets"):
        if getattr(args, flag, None) is not None and not rank:
            raise UsageError(f"--{flag}: goes with --lora_rank")
    strategy = getattr(args, "eval_strategy", "no")
    if getattr(args, "eval_steps", None) is not None and strategy != "steps":
        raise UsageError(f"--eval_steps {args.eval_steps}: goes with --eval_strategy steps")
    if strategy == "steps" and not (args.eval_steps or 0) >= 1:
        raise UsageError("--eval_strategy steps: give --eval_steps (at least 1)")
    patience = getattr(args, "early_stopping_patience", 0)
    if patience < 0:
        raise UsageError(f"--early_stopping_patience {patience}: must be 0 or more")
    if strategy == "no":
        for flag in ("early_stopping_patience", "metric_for_best_model"):
            if getattr(args, flag, None):
                raise UsageError(f"--{flag}: needs --eval_strategy epoch or steps")
    epochs = getattr(args, "num_train_epochs", None)
    if epochs is not None and not epochs > 0:
        raise UsageError(f"--num_train_epochs {epochs}: must be more than 0")
    max_steps = getattr(args, "max_steps", -1)
    if max_steps is not None and max_steps == 0 or (max_steps or -1) < -1:
        raise UsageError(f"--max_steps {max_steps}: must be more than 0 (or -1: off)")


def run_command(parser: argparse.ArgumentParser, argv, run, validate=None):
    """Parses `argv`, checks the training flags' values (`check_training_values`, before
    TensorFlow is imported), validates (`validate(args)`), runs `run(args)` and returns its
    result. Expected failures print one line, `error: ...` (exit status 2 for flags,
    1 for data), with a traceback only under --verbose; an interrupted run says where
    its last checkpoint is; an output folder the command created is removed when the
    run fails before writing anything into it."""
    args = parser.parse_args(argv)
    flags = dict(vars(args))  # as given, before defaults that depend on other flags
    try:
        check_training_values(args)
    except UsageError as e:
        if args.verbose:
            raise
        parser.exit(2, f"error: {e}\n")
    # TensorFlow is imported after parsing (so --help and flag errors need none of it),
    # with its start-up lines kept off the terminal unless --verbose.
    from kbert import _startup

    if args.verbose:
        import tensorflow  # noqa: F401
    else:
        _startup.quiet_import_tensorflow()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        logging.getLogger("absl").setLevel(logging.WARNING)  # TF's sharding chatter
        logging.getLogger("tensorflow").setLevel(logging.WARNING)
    output_dir = getattr(args, "output_dir", None)
    existed = output_dir is None or os.path.exists(output_dir)
    try:
        if validate is not None:
            validate(args)
        check_rerun(args, flags, {a.dest: a.default for a in parser._actions})
        return run(args)
    except UsageError as e:
        _remove_if_empty(output_dir, existed)
        if args.verbose:
            raise
        parser.exit(2, f"error: {e}\n")
    except KeyboardInterrupt:
        checkpoints = os.path.join(output_dir or ".", "checkpoints")
        where = (f"the last checkpoint is in {checkpoints}; run the same command again "
                 "to resume from it" if os.path.isdir(checkpoints)
                 else "no checkpoint was written yet")
        parser.exit(130, f"interrupted: {where}\n")
    except DATA_ERRORS as e:
        _remove_if_empty(output_dir, existed)
        if args.verbose:
            raise
        parser.exit(1, f"error: {e}\n")
    except SystemExit as e:
        _remove_if_empty(output_dir, existed)
        if isinstance(e.code, str) and not e.code.startswith("error:"):
            raise SystemExit(f"error: {e.code}") from None
        raise


def _remove_if_empty(output_dir, existed: bool) -> None:
    """A folder this command made that holds nothing but the run's flag record is not a
    result: remove it. Anything else (sample files, predictions) is kept."""
    if existed or not output_dir or not os.path.isdir(output_dir):
        return
    if set(os.listdir(output_dir)) <= {RUN_FILE}:
        shutil.rmtree(output_dir)
