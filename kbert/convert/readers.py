"""Readers of checkpoint formats into lazy {name: numpy array} mappings; errors name the
file.

A reader opens the file, checks it and lists its tensors; a tensor is read only when it is
asked for (`tensors[name]`) and is not kept, so a loader that converts and assigns one
tensor before asking for the next holds about one tensor beside the model
(`kbert.convert.rules.load_into`).

- safetensors (Hugging Face, kbert folders): checked by `safetensors`, each tensor read
  by its offsets (no memory map whose pages stay resident),
- PyTorch pickles (`pytorch_model.bin`; needs torch; `weights_only=True`, memory-mapped
  where the file is a zip archive),
- TensorFlow checkpoints (Google's BERT, OpenAI's GPT-2: `*.ckpt.index` + data),
- HDF5 weight files (bilm-tf and AllenNLP ELMo): datasets by their full path.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import Callable, Iterator

import numpy as np

from kbert.io import read_json


class LazyTensors(Mapping):
    """Tensors by name, each made by its reader when asked for and not cached. `shapes`
    (optional) gives each tensor's shape without reading it. `fresh`: every array read
    is new memory that nothing else holds or writes (a file read into a new buffer),
    so a variable may take it over without a copy (`kbert.convert.rules.load_into`)."""

    def __init__(self, readers: dict[str, Callable[[], np.ndarray]],
                 shapes: dict[str, tuple] | None = None, fresh: bool = False):
        self._readers = dict(readers)
        self._shapes = dict(shapes or {})
        self.fresh = fresh

    def __getitem__(self, name: str) -> np.ndarray:
        return self._readers[name]()

    def __iter__(self) -> Iterator[str]:
        return iter(self._readers)

    def __len__(self) -> int:
        return len(self._readers)

    def __contains__(self, name) -> bool:  # Mapping's own would read the tensor
        return name in self._readers

    def __repr__(self) -> str:
        return f"LazyTensors({len(self)} tensors)"

    def shape(self, name: str) -> tuple | None:
        return self._shapes.get(name)

    def subset(self, keep: Callable[[str], bool]) -> "LazyTensors":
        """The tensors whose names `keep` accepts (nothing is read)."""
        return LazyTensors({k: r for k, r in self._readers.items() if keep(k)},
                           {k: s for k, s in self._shapes.items() if keep(k)}, self.fresh)


def lazy(tensors: Mapping) -> LazyTensors:
    """`tensors` as a LazyTensors (a dict of arrays: each array returned as is)."""
    if isinstance(tensors, LazyTensors):
        return tensors
    return LazyTensors({k: (lambda k=k: tensors[k]) for k in tensors},
                       {k: tuple(np.shape(v)) for k, v in tensors.items()})


# safetensors' dtype codes -> NumPy dtype names (the writer, `folders.write_safetensors`,
# uses the same table)
SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16",
                       "BF16": "bfloat16", "I64": "int64", "I32": "int32", "I16": "int16",
                       "I8": "int8", "U8": "uint8", "BOOL": "bool"}


def read_safetensors(path: str) -> LazyTensors:
    """A safetensors file, checked by `safetensors` itself; each tensor then read by its
    offsets (the format's public header) into fresh 64-byte-aligned memory, which a
    variable takes over without another copy, and no memory map keeps pages resident."""
    import json
    import struct

    from safetensors import SafetensorError, safe_open

    def failed(e):
        return ValueError(f"{path}: cannot read safetensors ({e})")

    try:
        with safe_open(path, framework="numpy"):
            pass
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
    except (SafetensorError, OSError, ValueError) as e:
        raise failed(e) from None
    header.pop("__metadata__", None)
    start = 8 + size

    def reader(name, info):
        begin, end = info["data_offsets"]
        kind = SAFETENSORS_DTYPES.get(info["dtype"])
        if kind is None:
            raise ValueError(f"{path}: {name}: dtype {info['dtype']} is not supported")
        if kind == "bfloat16":
            import ml_dtypes

            kind = ml_dtypes.bfloat16

        def read():
            buffer = aligned_bytes(end - begin)
            try:
                with open(path, "rb") as f:
                    f.seek(start + begin)
                    if f.readinto(memoryview(buffer)) != end - begin:
                        raise OSError(f"{name}: the file ends inside the tensor")
            except OSError as e:
                raise failed(e) from None
            return buffer.view(kind).reshape(info["shape"])
        return read

    return LazyTensors({k: reader(k, v) for k, v in header.items()},
                       {k: tuple(v["shape"]) for k, v in header.items()}, fresh=True)


def aligned_bytes(size: int, alignment: int = 64) -> np.ndarray:
    """`size` uninitialized bytes starting on an `alignment` boundary (what TensorFlow's
    kernels expect of a buffer a variable takes over). A large buffer is its own
    anonymous memory map, so that freeing it gives the memory back to the system at
    once (from the C heap, a freed 16 MB kernel stays in the process: after an int8
    load, that was the whole float model). Its pages are made present when it is
    mapped (`MAP_POPULATE`: one call into the kernel instead of a fault per 4 KB page;
    the callers fill every byte at once). GPT-2 medium's float32 `from_pretrained`:
    2.4 s with it, 3.0 s without (medians of 4 fresh processes, 2026-12-03)."""
    if size >= _OWN_MAP_BYTES:
        import mmap

        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
        return np.frombuffer(mmap.mmap(-1, size, flags=flags), dtype=np.uint8)  # page-aligned
    raw = np.empty(size + alignment, dtype=np.uint8)
    skip = -raw.ctypes.data % alignment
    return raw[skip: skip + size]


_OWN_MAP_BYTES = 1 << 20


def read_torch_bin(path: str) -> LazyTensors:
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"{path} is a PyTorch pickle; reading it needs `torch`. Install torch, or "
            "convert the folder to model.safetensors.") from None

    def failed(e):
        return ValueError(f"{path}: cannot read PyTorch weights ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''})")

    try:
        try:  # memory-mapped: a tensor's pages are read when it is converted
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as e:
            if "mmap" not in str(e):
                raise
            state = torch.load(path, map_location="cpu", weights_only=True)  # legacy format
    except Exception as e:  # torch raises RuntimeError/UnpicklingError with long texts
        raise failed(e) from None

    def reader(name):
        def read():
            v = state[name]
            return (v.float() if v.is_floating_point() else v).numpy()
        return read

    return LazyTensors({k: reader(k) for k in state},
                       {k: tuple(v.shape) for k, v in state.items()})


def tf_checkpoint_prefix(folder_or_prefix: str) -> str:
    """The checkpoint prefix of a folder (its `checkpoint` file, else the first
    `*.ckpt*.index`), or the prefix given."""
    import tensorflow as tf

    if not os.path.isdir(folder_or_prefix):
        return folder_or_prefix
    prefix = tf.train.latest_checkpoint(folder_or_prefix)
    if prefix is None:
        found = sorted(glob.glob(os.path.join(folder_or_prefix, "*.ckpt*.index")))
        if not found:
            raise FileNotFoundError(f"{folder_or_prefix}: no TF checkpoint (*.ckpt.index)")
        prefix = found[0][: -len(".index")]
    return prefix


def read_tf_checkpoint(folder_or_prefix: str, keep: Callable[[str], bool] = lambda name: True
                       ) -> tuple[LazyTensors, str]:
    """(tensors whose names `keep` accepts, the checkpoint prefix); each tensor is read
    from the checkpoint's data file when asked for."""
    import tensorflow as tf

    prefix = tf_checkpoint_prefix(folder_or_prefix)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except Exception as e:  # tf raises DataLossError / NotFoundError with long texts
        raise ValueError(f"{prefix}: cannot read TF checkpoint ({type(e).__name__}: "
                         f"{str(e).splitlines()[0]})") from None

    def tensor(name):
        def read():
            try:
                return reader.get_tensor(name)
            except Exception as e:
                raise ValueError(f"{prefix}: variable {name} cannot be read "
                                 f"({type(e).__name__}: {str(e).splitlines()[0]})") from None
        return read

    shapes = {name: tuple(shape) for name, shape
              in sorted(reader.get_variable_to_shape_map().items()) if keep(name)}
    return LazyTensors({name: tensor(name) for name in shapes}, shapes, fresh=True), prefix


def read_hdf5(path: str) -> LazyTensors:
    """Every dataset of an HDF5 file by its path without the leading slash
    (`RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0`), each read when asked for."""
    import h5py

    shapes: dict[str, tuple] = {}
    try:
        with h5py.File(path, "r") as f:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    shapes[name] = tuple(obj.shape)
            f.visititems(visit)
    except OSError as e:
        raise ValueError(f"{path}: cannot read HDF5 ({e})") from None

    def dataset(name):
        def read():
            try:
                with h5py.File(path, "r") as f:
                    return np.asarray(f[name][()])
            except OSError as e:
                raise ValueError(f"{path}: {name}: cannot read HDF5 ({e})") from None
        return read

    return LazyTensors({name: dataset(name) for name in shapes}, shapes, fresh=True)


def read_weights_file(path: str) -> LazyTensors:
    """By extension: `.safetensors`, `.bin`/`.pt`, `.hdf5`/`.h5`."""
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    if path.endswith((".bin", ".pt", ".pth")):
        return read_torch_bin(path)
    if path.endswith((".hdf5", ".h5")):
        return read_hdf5(path)
    raise ValueError(f"{path}: unknown weights format (expected .safetensors, .bin, .hdf5)")


def read_hf_folder_weights(folder: str) -> tuple[LazyTensors, str]:
    """A Hugging Face model folder's weights, as stored: `model.safetensors`, else
    `pytorch_model.bin`, each whole or in shards (`*.index.json`, as `transformers`
    writes models above its shard size and the Hub serves them). Returns (tensors by
    name, the file read)."""
    for name, reader in (("model.safetensors", read_safetensors),
                         ("pytorch_model.bin", read_torch_bin)):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return reader(path), path
        if os.path.exists(path + ".index.json"):
            return read_shards(path + ".index.json", reader), path + ".index.json"
    raise FileNotFoundError(f"{folder}: no model.safetensors or pytorch_model.bin "
                            "(whole or sharded)")


def read_shards(index_file: str, reader: Callable[[str], LazyTensors]) -> LazyTensors:
    """The tensors of a sharded checkpoint: the index's `weight_map` (name -> shard
    file); each shard opened by `reader`, its tensors still read one at a time."""
    index = read_json(index_file)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index_file}: no weight_map (tensor name -> shard file)")
    readers, shapes, fresh = {}, {}, True
    folder = os.path.dirname(index_file)
    for shard in sorted(set(weight_map.values())):
        path = os.path.join(folder, shard)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{index_file}: names shard {shard}, which {folder} "
                                    "lacks")
        tensors = reader(path)
        fresh = fresh and tensors.fresh
        wanted = {n for n, s in weight_map.items() if s == shard}
        absent = sorted(wanted - set(tensors))
        if absent:
            raise ValueError(f"{path}: lacks {', '.join(absent[:5])}, which {index_file} "
                             "places there")
        for name in wanted:
            readers[name] = (lambda t=tensors, n=name: t[n])
            shapes[name] = tensors.shape(name)
    return LazyTensors(readers, {k: v for k, v in shapes.items() if v is not None}, fresh)
