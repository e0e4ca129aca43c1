"""One SavedModel, several task heads over one encoder: one set of encoder weights in
memory, a signature per head.

    python -m kbert.export --heads sentiment=runs/sst2 entities=runs/conll \\
        --export_dir serving/text/1

Each head is the folder of a kbert task run (classifier, squad or ner) whose encoder
was frozen while its head trained (GLUE's `--freeze_encoder`, NER's `--mode feature`,
or heads trained in Python over one frozen encoder), so that every folder holds the
same encoder weights; a folder
whose encoder differs is refused, naming the first variable that differs. The heads'
models are rebuilt over the first folder's encoder object, so the SavedModel holds its
variables once.

Signatures: each head's task signature under the head's name (inputs and outputs as
the single export's), its other signatures as `NAME_token_ids`, `NAME_classify` /
`NAME_regress` (classifiers), and `serving_default`, the first head's. Every head's
warmup requests are written under its signatures and replayed through TF Serving's C++
loader before the export is moved into place.
"""

from __future__ import annotations

import os
import re

import numpy as np

from kbert.export import ops as ops_lib

HEAD_TASKS = ("classifier", "squad", "ner")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def parse_heads(values: list[str]) -> dict[str, str]:
    """`NAME=FOLDER` strings -> {name: folder}, or ValueError in one line."""
    heads = {}
    for value in values:
        name, sep, folder = value.partition("=")
        if not sep or not folder:
            raise ValueError(f"--heads {value}: expected NAME=FOLDER")
        if not _NAME.fullmatch(name) or name == "serving_default":
            raise ValueError(f"--heads {value}: the name {name!r} must be a signature name "
                             "(a letter, then letters, digits or _; not serving_default)")
        if name in heads:
            raise ValueError(f"--heads {value}: the name {name!r} is given twice")
        heads[name] = folder
    if len(heads) < 2:
        raise ValueError("--heads: give two or more NAME=FOLDER (one head: use --model_dir "
                         "and --task)")
    return heads


# Config fields that say how an encoder is used, not what it is: a classifier's BERT
# computes its last layer on [CLS] only (`output_range`), a frozen one is not trainable.
_USE_FIELDS = ("output_range", "trainable", "name")


def _what(encoder) -> dict:
    return {k: v for k, v in encoder.get_config().items() if k not in _USE_FIELDS}


def _same_encoder(first, other, name: str, folder: str, first_name: str) -> None:
    """Refuses an encoder whose class, config or any weight differs from `first`'s."""
    if type(first) is not type(other) or _what(first) != _what(other):
        raise ValueError(f"--heads {name}={folder}: its encoder ({type(other).__name__}) is "
                         f"not the one of {first_name} ({type(first).__name__}, same config)")
    for a, b in zip(first.weights, other.weights):
        if tuple(a.shape) != tuple(b.shape) or not np.array_equal(np.asarray(a),
                                                                   np.asarray(b)):
            raise ValueError(f"--heads {name}={folder}: encoder variable {b.path} differs "
                             f"from {first_name}'s; heads share one encoder only when each "
                             "was trained over the same frozen encoder")


def _over(model, encoder, shared):
    """`model` (a functional task model) rebuilt with `shared` in place of its
    `encoder` (a view of `shared` computing what `encoder` computes, where they differ
    in `output_range`), every other layer the same object."""
    import keras

    if model is encoder or not isinstance(model, keras.Model) or not hasattr(model, "_nodes"):
        raise ValueError(f"{type(model).__name__}: only functional task models can share an "
                         "encoder")
    wanted = getattr(encoder, "output_range", None)
    if wanted != getattr(shared, "output_range", None):
        shared = shared.with_output_range(wanted)  # the same layers and variables
    return keras.models.clone_model(
        model, clone_function=lambda layer: shared if layer is encoder else layer)


def export_heads(heads: dict[str, str], export_dir: str, *,
                 serving_version: str | None = None) -> str:
    """Writes one SavedModel of the task folders `heads` (signature name -> folder) over
    their one encoder (see the module docstring); returns `export_dir`."""
    from kbert.export.base import collect_exports, write_export
    from kbert.export.folder import export_task, load_task_folder
    from kbert.models.interface import find_encoder

    version = serving_version or ops_lib.DEFAULT_SERVING_VERSION
    loaded, shared, first_name = {}, None, None
    for name, folder in heads.items():
        if not os.path.isdir(folder):
            raise ValueError(f"--heads {name}={folder}: no such folder")
        task, model, tokenizer, settings = load_task_folder(folder)
        if task not in HEAD_TASKS:
            raise ValueError(f"--heads {name}={folder}: a {task} folder; heads are "
                             f"{', '.join(HEAD_TASKS)} runs")
        encoder = find_encoder(model)
        if shared is None:
            shared, first_name = encoder, f"{name}={folder}"
        else:
            _same_encoder(shared, encoder, name, folder, first_name)
            model = _over(model, encoder, shared)
        loaded[name] = (task, model, tokenizer, settings)
    with collect_exports() as parts:
        for name, (task, model, tokenizer, settings) in loaded.items():
            export_task(task, model, tokenizer, export_dir, version, settings)
    signatures, methods, warmup, files = {}, {}, [], {}
    for (name, _), part in zip(loaded.items(), parts):
        for signature, function in part.signatures.items():
            key = name if signature == "serving_default" else f"{name}_{signature}"
            signatures[key] = function
            if signature in part.method_names:
                methods[key] = part.method_names[signature]
        warmup += [(name if s == "serving_default" else f"{name}_{s}", r)
                   for s, r in part.warmup]
        files.update({f"{name}_{file}": text for file, text in part.extra_files.items()})
    # The first head's function again: warming its signature warms this one.
    signatures["serving_default"] = parts[0].signatures["serving_default"]
    return write_export([part.module for part in parts], signatures, export_dir, warmup,
                        version, files, methods)
