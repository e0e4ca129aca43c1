"""Reference implementations that the parity tests run, and where they come from.

Each loader fails (never skips) when its reference is missing: the references are part
of the test set-up (`make test` installs the `test` extra and downloads the wheels
below into `.venv/refs`).
"""

from __future__ import annotations

import glob
import importlib
import os
import sys

REFS_DIR = os.path.join(sys.prefix, "refs")


def _wheel(pattern: str) -> str:
    found = sorted(glob.glob(os.path.join(REFS_DIR, pattern)))
    if not found:
        raise RuntimeError(f"reference wheel {pattern} is missing from {REFS_DIR}; "
                           "run `make test` (it downloads the references) or `make refs`")
    return found[-1]


def squad_official(version: str):
    """The SQuAD evaluation scripts as TF Model Garden ships them (tf-models-official
    2.20.0, `official/nlp/tools/squad_evaluate_v{1_1,2_0}.py`, the official scripts'
    functions), imported from the wheel itself. Its `evaluate(data, preds)` returns
    v1.1 `{"exact_match", "final_f1"}` in 0..1; v2.0 the official keys in 0..100.

    The wheel is not installed (it pins another TensorFlow); only these two modules,
    which need nothing but `absl`, are imported from it.
    """
    name = {"v1.1": "squad_evaluate_v1_1", "v2.0": "squad_evaluate_v2_0"}[version]
    wheel = _wheel("tf_models_official-2.20.0-*.whl")
    if wheel not in sys.path:
        sys.path.append(wheel)
    return importlib.import_module(f"official.nlp.tools.{name}")
