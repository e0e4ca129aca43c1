"""Model folders, once for every family: which format a folder holds, reading its config
and tensors, and writing a kbert folder atomically. A family supplies a `FolderSpec`: its
config class, the prefix Hugging Face puts before its names, a name normalizer, and the
other reference formats it reads (Google's TF1 BERT, OpenAI's GPT-2) with their readers.
Its name table (`Rule`s) then maps the normalized names to its variables
(`kbert.convert.convert`)."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

import numpy as np

from kbert.convert.readers import read_hf_folder_weights, read_safetensors
from kbert.io import atomic_directory, read_json

WEIGHTS = "model.safetensors"
CONFIG = "config.json"


@dataclasses.dataclass(frozen=True)
class Foreign:
    """A reference format besides Hugging Face's: recognized by its config file
    (`marker`), read by `read(folder) -> (tensors by normalized name, names as stored,
    source)`."""

    name: str
    marker: str
    read: Callable[[str], tuple[dict, dict, str]]


@dataclasses.dataclass(frozen=True)
class FolderSpec:
    """A family's folders (see the module docstring)."""

    config_class: type
    hf_prefix: str = ""
    normalize: Callable[[str], str] = lambda name: name
    foreign: tuple[Foreign, ...] = ()


def detect_format(folder: str, spec: FolderSpec) -> str:
    """'kbert', 'hf' or one of `spec.foreign`'s names."""
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: not a folder")
    config = os.path.join(folder, CONFIG)
    if os.path.exists(config):
        return "kbert" if "kbert_model" in read_json(config) else "hf"
    for fmt in spec.foreign:
        if os.path.exists(os.path.join(folder, fmt.marker)):
            return fmt.name
    others = "".join(f" or {f.marker} ({f.name})" for f in spec.foreign)
    raise FileNotFoundError(f"{folder}: no config.json (kbert or Hugging Face){others}")


def hf_tensors(folder: str, spec: FolderSpec) -> tuple[dict, dict, str]:
    """A Hugging Face folder's tensors by normalized name (`spec.hf_prefix` removed,
    `spec.normalize` applied), the names as stored, and the file read."""
    raw, source = read_hf_folder_weights(folder)
    tensors, display = {}, {}
    for key, value in raw.items():
        name = spec.normalize(key.removeprefix(spec.hf_prefix))
        tensors[name], display[name] = value, key
    return tensors, display, source


def read_folder(folder, spec: FolderSpec):
    """(config, tensors by normalized name, names as stored, format, file read). (The
    family's module first checks, through the registry, that the folder is not another
    family's: `kbert.models.registry.expect_family`.)"""
    folder = os.fspath(folder)
    fmt = detect_format(folder, spec)
    for other in spec.foreign:
        if fmt == other.name:
            config = spec.config_class.from_json_file(os.path.join(folder, other.marker))
            tensors, display, source = other.read(folder)
            return config, tensors, display, fmt, source
    config = spec.config_class.from_json_file(os.path.join(folder, CONFIG))
    if fmt == "kbert":
        source = os.path.join(folder, WEIGHTS)
        return config, read_safetensors(source), {}, fmt, source
    tensors, display, source = hf_tensors(folder, spec)
    return config, tensors, display, fmt, source


def with_overrides(config, overrides: dict):
    """`config` with some fields replaced (checked as the config class checks them)."""
    if not overrides:
        return config
    return type(config).from_dict({**config.to_dict(), **overrides})


def write_folder(path, config, tensors: dict[str, np.ndarray], tokenizer=None,
                 layout: str = "kbert") -> None:
    """A kbert folder: `config.json` (with `kbert_model`), `model.safetensors` (float32,
    contiguous; `layout` in its metadata: "pt" where the tensors are in PyTorch's layout)
    and the tokenizer's files; a crash leaves the old folder or the new one."""
    from safetensors.numpy import save_file

    tensors = {name: np.ascontiguousarray(np.asarray(value, dtype=np.float32))
               for name, value in tensors.items()}
    with atomic_directory(path) as tmp:
        config.to_json_file(os.path.join(tmp, CONFIG))
        save_file(tensors, os.path.join(tmp, WEIGHTS), metadata={"format": layout})
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
