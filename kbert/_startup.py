"""Keeps TensorFlow's start-up chatter off the terminal of kbert's command lines.

`import tensorflow` writes lines such as "WARNING: All log messages before
absl::InitializeLog() is called are written to STDERR" and "I0000 ... oneDNN custom
operations are on" straight to file descriptor 2 from C++, before any Python logging
exists and whatever TF_CPP_MIN_LOG_LEVEL says. kbert's command lines, after parsing
their flags and without `--verbose` (`kbert.cli.run_command`, the demos), import
TensorFlow with descriptor 2 pointed at a temporary file; if the import fails, what it
wrote is replayed before the exception, so nothing is lost.
"""

import os
import sys
import tempfile


def quiet_import_tensorflow() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable descriptor 2: nothing to keep quiet
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
            import tensorflow_text  # noqa: F401
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
