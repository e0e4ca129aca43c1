"""Model folders, once for every family: which format a folder holds, reading its config
and tensors, and writing a kbert folder atomically. A family supplies a `FolderSpec`: its
config class, the prefix Hugging Face puts before its names, a name normalizer, and the
other reference formats it reads (Google's TF1 BERT, OpenAI's GPT-2) with their readers.
Its name table (`Rule`s) then maps the normalized names to its variables
(`kbert.convert.convert`)."""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from collections.abc import Mapping
from typing import Callable

import numpy as np

from kbert.convert.readers import (SAFETENSORS_DTYPES, LazyTensors, lazy,
                                   read_hf_folder_weights, read_safetensors)
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


def hf_tensors(folder: str, spec: FolderSpec) -> tuple[LazyTensors, dict, str]:
    """A Hugging Face folder's tensors by normalized name (`spec.hf_prefix` removed,
    `spec.normalize` applied; each read when asked for), the names as stored, and the
    file read."""
    raw, source = read_hf_folder_weights(folder)
    readers, display = {}, {}
    for key in raw:
        name = spec.normalize(key.removeprefix(spec.hf_prefix))
        readers[name], display[name] = (lambda key=key: raw[key]), key
    return (LazyTensors(readers, {n: raw.shape(k) for n, k in display.items()}, raw.fresh),
            display, source)


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


def write_folder(path, config, tensors: Mapping[str, np.ndarray], tokenizer=None,
                 layout: str = "kbert") -> None:
    """A kbert folder: `config.json` (with `kbert_model`), `model.safetensors` (float32;
    `layout` in its metadata: "pt" where the tensors are in PyTorch's layout; written
    tensor by tensor from a `LazyTensors` that knows its shapes) and the tokenizer's
    files; a crash leaves the old folder or the new one."""
    with atomic_directory(path) as tmp:
        config.to_json_file(os.path.join(tmp, CONFIG))
        write_safetensors(os.path.join(tmp, WEIGHTS), tensors, {"format": layout})
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)


def write_hf_folder(path, hf_config: dict, tensors: Mapping[str, np.ndarray],
                    tokenizer=None) -> None:
    """A Hugging Face folder, as `transformers`' `save_pretrained` writes one: its
    `config.json` (no kbert keys), `model.safetensors` (PyTorch's layout, `format: pt`)
    and the tokenizer's files; written atomically, tensor by tensor."""
    import json

    with atomic_directory(path) as tmp:
        with open(os.path.join(tmp, CONFIG), "w", encoding="utf-8") as f:
            json.dump(hf_config, f, indent=2, sort_keys=True)
            f.write("\n")
        write_safetensors(os.path.join(tmp, WEIGHTS), tensors, {"format": "pt"})
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)


def write_safetensors(path: str, tensors: Mapping[str, np.ndarray],
                      metadata: dict[str, str] | None = None, dtype=np.float32,
                      dtypes: dict[str, str] | None = None) -> None:
    """A safetensors file (the public format: an 8-byte little-endian header length, the
    JSON header, the data; tensors in name order, as `safetensors` orders tensors of one
    dtype), every tensor as `dtype` (or as `dtypes[name]`). The header is made from the
    shapes alone, then each tensor is asked for, converted and written before the next,
    so the whole model is never copied in memory. Not atomic by itself: `write_folder` writes it in its
    temporary folder."""
    tensors = lazy(tensors)
    codes = {kind: code for code, kind in SAFETENSORS_DTYPES.items()}
    header: dict = {"__metadata__": dict(metadata)} if metadata else {}
    names = sorted(tensors)
    kinds = {name: np.dtype((dtypes or {}).get(name, dtype)) for name in names}
    offset = 0
    for name in names:
        shape = tensors.shape(name)
        if shape is None:
            raise ValueError(f"{path}: {name}: no shape known before it is made")
        size = int(np.prod(shape, dtype=np.int64)) * kinds[name].itemsize
        header[name] = {"dtype": codes[kinds[name].name], "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors pads
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in names:
            value = np.ascontiguousarray(np.asarray(tensors[name], dtype=kinds[name]))
            if tuple(value.shape) != tuple(header[name]["shape"]):
                raise ValueError(f"{path}: {name} is {list(value.shape)}, its header says "
                                 f"{header[name]['shape']}")
            f.write(memoryview(value).cast("B"))
            del value
