"""Command-line plumbing shared by kbert's commands: flag checks that name the flag,
one-line errors with exit statuses (2 for flags, 1 for data), a word on Ctrl-C, and
no output folder left behind by a run that failed before writing anything."""

from __future__ import annotations

import argparse
import logging
import os


def parse_bool(text) -> bool:
    """absl-style booleans, as the original scripts take them: true/false, 1/0."""
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "t", "y"):
        return True
    if value in ("0", "false", "no", "f", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class UsageError(ValueError):
    """A flag value that cannot work: reported as `error: ...`, exit status 2."""


# Failures of the user's input (files, folders, values): one line, exit status 1.
DATA_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError,
               PermissionError, KeyError)


def add_cli_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", action="store_true",
                        help="show tracebacks and TensorFlow's own log lines")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --export_dir version folder")


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


def run_command(parser: argparse.ArgumentParser, argv, run, validate=None):
    """Parses `argv`, validates (`validate(args)`), runs `run(args)` and returns its
    result. Expected failures print one line, `error: ...` (exit status 2 for flags,
    1 for data), with a traceback only under --verbose; an interrupted run says where
    its last checkpoint is; an output folder the command created is removed when the
    run fails before writing anything into it."""
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        logging.getLogger("absl").setLevel(logging.WARNING)  # TF's sharding chatter
        logging.getLogger("tensorflow").setLevel(logging.WARNING)
    output_dir = getattr(args, "output_dir", None)
    existed = output_dir is None or os.path.exists(output_dir)
    try:
        if validate is not None:
            validate(args)
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
        message = str(e) if not isinstance(e, KeyError) else f"missing {e}"
        parser.exit(1, f"error: {message}\n")
    except SystemExit as e:
        _remove_if_empty(output_dir, existed)
        if isinstance(e.code, str) and not e.code.startswith("error:"):
            raise SystemExit(f"error: {e.code}") from None
        raise


def _remove_if_empty(output_dir, existed: bool) -> None:
    """A folder this command made and left empty (or holding only what the failed run's
    first steps wrote before any training) is not a result: remove it."""
    if existed or not output_dir or not os.path.isdir(output_dir):
        return
    if not os.listdir(output_dir):
        os.rmdir(output_dir)
