"""Which op types a stock `tensorflow_model_server` can run, and the ops a SavedModel uses.

The stock server links TensorFlow's kernels plus the tensorflow-text `ops_lib` that
its release pins. TF Serving 2.12 to 2.19 pin tensorflow-text 2.12.1; 2.20 and 2.21
pin the matching tensorflow-text release. tensorflow-text ops newer than 2.12.1
(`TFText>RoundRobinTrim` among them: tensorflow/serving#2267) are missing from those
servers, so a model that uses one fails to load there with "Op type not registered".

The core set is the op registry of the TensorFlow running the check, less the ops whose
kernels live in the Python runtime (`tf.py_function`, `tf.numpy_function`): a server
has no Python. Core ops added to TensorFlow after the target server's release are not
told apart (SavedModels written by TF 2.21 hold `DisableCopyOnRead`, which older
servers lack): serve with a release at least as new as the exporting TensorFlow.
"""

from __future__ import annotations

import importlib
import os

from kbert import internals

# Every op the tensorflow-text 2.21 ops library registers.
_TEXT_OPS_2_21 = frozenset({
    "CaseFoldUTF8", "ConstrainedSequence", "FastBertNormalize",
    "FastWordpieceTokenizeWithOffsets", "FindSourceOffsets", "MaxSpanningTree",
    "NormalizeUTF8", "NormalizeUTF8WithOffsetsMap", "PhraseTokenize", "RegexSplitWithOffsets",
    "RougeL", "SentenceFragments", "SentenceFragmentsV2", "SentencepieceDetokenizeOp",
    "SentencepieceIdToStringOp", "SentencepieceOp", "SentencepieceStringToIdOp",
    "SentencepieceTokenizeOp", "SentencepieceTokenizeWithOffsetsOp",
    "SentencepieceVocabSizeOp", "SplitMergeTokenizeWithOffsets", "TFText>BoiseTagsToOffsets",
    "TFText>ByteSplitByOffsets", "TFText>ByteSplitWithOffsets",
    "TFText>FastSentencepieceDetokenize", "TFText>FastSentencepieceTokenize",
    "TFText>FastWordpieceDetokenize", "TFText>NgramsStringJoin", "TFText>OffsetsToBoiseTags",
    "TFText>PhraseDetokenize", "TFText>RoundRobinGenerateMasks", "TFText>RoundRobinTrim",
    "TFText>Utf8Binarize", "TFText>WhitespaceTokenizeWithOffsetsV2", "TokenizerFromLogits",
    "UnicodeScriptTokenizeWithOffsets", "WhitespaceTokenizeWithOffsets",
    "WordpieceTokenizeWithOffsets",
})
# Ops of 2.21 that tensorflow-text 2.12.1 lacks or that kbert could not confirm there;
# the check is conservative: an op in doubt counts as missing.
_NEWER_THAN_2_12 = frozenset({
    "TFText>RoundRobinGenerateMasks", "TFText>RoundRobinTrim", "TFText>BoiseTagsToOffsets",
    "TFText>OffsetsToBoiseTags", "PhraseTokenize", "TFText>PhraseDetokenize",
    "TFText>Utf8Binarize",
})
# Registered in TensorFlow's op registry, but run by the Python interpreter.
PYTHON_ONLY_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

# Core ops that TensorFlow writes into SavedModels and that TF Serving 2.12, the oldest
# release checked here, does not register, as read from that release: none known.
# (DisableCopyOnRead, which TF 2.21 exports' variable-restore functions call, was listed
# here by guess; TensorFlow 2.12.0's own wheel defines it,
# tensorflow/python/ops/gen_resource_variable_ops.py: disable_copy_on_read.) Per-release
# core-op tables read from each wheel are not built yet, so other core ops newer than the
# target are not caught: see older_server_warning.
CORE_OPS_NEWER_THAN_2_12 = frozenset()

SERVING_VERSIONS = ("2.12", "2.13", "2.14", "2.15", "2.16", "2.17", "2.18", "2.19", "2.20",
                    "2.21")
DEFAULT_SERVING_VERSION = SERVING_VERSIONS[-1]


def text_ops(serving_version: str) -> frozenset:
    """The tensorflow-text ops linked by the stock server of `serving_version`."""
    if serving_version not in SERVING_VERSIONS:
        raise ValueError(f"--serving_version {serving_version!r}: known versions are "
                         f"{', '.join(SERVING_VERSIONS)}")
    if tuple(map(int, serving_version.split("."))) < (2, 20):
        return _TEXT_OPS_2_21 - _NEWER_THAN_2_12
    return _TEXT_OPS_2_21


def serving_ops(serving_version: str = DEFAULT_SERVING_VERSION) -> frozenset:
    """Op types the stock `tensorflow_model_server` of `serving_version` can run."""
    importlib.import_module("tensorflow_text")  # registers its ops

    registered = internals.registered_op_names()
    core = {op for op in registered
            if op not in _TEXT_OPS_2_21 and not op.startswith(("TFText>", "Sentencepiece"))}
    return frozenset((core - PYTHON_ONLY_OPS) | text_ops(serving_version))


def saved_model_ops(export_dir: str) -> dict[str, set[str]]:
    """Op type -> names of the functions (or "graph") using it, from saved_model.pb."""
    path = os.path.join(export_dir, "saved_model.pb")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{export_dir}: no saved_model.pb (not a SavedModel folder)")
    sm = internals.read_saved_model_proto(path)
    used: dict[str, set[str]] = {}
    for meta in sm.meta_graphs:
        for node in meta.graph_def.node:
            used.setdefault(node.op, set()).add("graph")
        for fn in meta.graph_def.library.function:
            for node in fn.node_def:
                used.setdefault(node.op, set()).add(fn.signature.name)
    # Calls of library functions appear as ops named after the function.
    functions = {fn.signature.name for meta in sm.meta_graphs
                 for fn in meta.graph_def.library.function}
    return {op: where for op, where in used.items() if op not in functions}


def missing_ops(export_dir: str, serving_version: str = DEFAULT_SERVING_VERSION) -> dict:
    """Ops of the SavedModel that the target server lacks: op type -> functions."""
    available = serving_ops(serving_version)
    return {op: where for op, where in sorted(saved_model_ops(export_dir).items())
            if op not in available}


class UnsupportedOpError(ValueError):
    pass


def writer_version(export_dir: str) -> str:
    """The TensorFlow version that wrote the SavedModel ("" if it does not say)."""
    sm = internals.read_saved_model_proto(os.path.join(export_dir, "saved_model.pb"))
    return next((m.meta_info_def.tensorflow_version for m in sm.meta_graphs
                 if m.meta_info_def.tensorflow_version), "")


def older_server_warning(export_dir: str, serving_version: str) -> str | None:
    """A warning when `serving_version` is older than the TensorFlow that wrote the
    export: TensorFlow supports a SavedModel only on a runtime at least as new, and the
    check's core-op list is that of the TensorFlow running it."""
    written = writer_version(export_dir)
    if not written:
        return None

    def minor(v):
        return tuple(int(x) for x in v.split(".")[:2])

    if minor(serving_version) >= minor(written):
        return None
    known = sorted(op for op in saved_model_ops(export_dir)
                   if op in CORE_OPS_NEWER_THAN_2_12) if serving_version == "2.12" else []
    lacks = (f"; TF Serving 2.12 lacks the core op(s) {', '.join(known)} that it uses"
             if known else "")
    return (f"written by TensorFlow {written}, newer than TF Serving {serving_version}: "
            "the core ops are checked against this TensorFlow, not that server's"
            f"{lacks}. Serve it with TF Serving {'.'.join(written.split('.')[:2])} or later.")


def check_ops(export_dir: str, serving_version: str = DEFAULT_SERVING_VERSION) -> set[str]:
    """Raises UnsupportedOpError naming every op the target server lacks; returns the
    op types used."""
    missing = missing_ops(export_dir, serving_version)
    if missing:
        lines = [f"  {op} (in {', '.join(sorted(where))[:120]})" for op, where in
                 missing.items()]
        raise UnsupportedOpError(
            f"{export_dir}: op(s) not in the stock tensorflow_model_server "
            f"{serving_version}:\n" + "\n".join(lines))
    return set(saved_model_ops(export_dir))
