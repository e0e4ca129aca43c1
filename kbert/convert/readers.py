"""Readers of checkpoint formats into {name: numpy array}; errors name the file.

- safetensors (Hugging Face, kbert folders),
- PyTorch pickles (`pytorch_model.bin`; needs torch, loaded with weights_only=True),
- TensorFlow checkpoints (Google's BERT, OpenAI's GPT-2: `*.ckpt.index` + data),
- HDF5 weight files (bilm-tf and AllenNLP ELMo): datasets by their full path.
"""

from __future__ import annotations

import glob
import os
from typing import Callable

import numpy as np


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return load_file(path)
    except (SafetensorError, OSError) as e:
        raise ValueError(f"{path}: cannot read safetensors ({e})") from None


def read_torch_bin(path: str) -> dict[str, np.ndarray]:
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"{path} is a PyTorch pickle; reading it needs `torch`. Install torch, or "
            "convert the folder to model.safetensors.") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError/UnpicklingError with long texts
        raise ValueError(f"{path}: cannot read PyTorch weights ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''})") from None
    return {k: v.float().numpy() if v.is_floating_point() else v.numpy()
            for k, v in state.items()}


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
                       ) -> tuple[dict[str, np.ndarray], str]:
    """(tensors whose names `keep` accepts, the checkpoint prefix)."""
    import tensorflow as tf

    prefix = tf_checkpoint_prefix(folder_or_prefix)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except Exception as e:  # tf raises DataLossError / NotFoundError with long texts
        raise ValueError(f"{prefix}: cannot read TF checkpoint ({type(e).__name__}: "
                         f"{str(e).splitlines()[0]})") from None
    tensors = {}
    for name in sorted(reader.get_variable_to_shape_map()):
        if not keep(name):
            continue
        try:
            tensors[name] = reader.get_tensor(name)
        except Exception as e:
            raise ValueError(f"{prefix}: variable {name} cannot be read "
                             f"({type(e).__name__}: {str(e).splitlines()[0]})") from None
    return tensors, prefix


def read_hdf5(path: str) -> dict[str, np.ndarray]:
    """Every dataset of an HDF5 file by its path without the leading slash
    (`RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0`)."""
    import h5py

    tensors: dict[str, np.ndarray] = {}
    try:
        with h5py.File(path, "r") as f:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    tensors[name] = np.asarray(obj[()])
            f.visititems(visit)
    except OSError as e:
        raise ValueError(f"{path}: cannot read HDF5 ({e})") from None
    return tensors


def read_weights_file(path: str) -> dict[str, np.ndarray]:
    """By extension: `.safetensors`, `.bin`/`.pt`, `.hdf5`/`.h5`."""
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    if path.endswith((".bin", ".pt", ".pth")):
        return read_torch_bin(path)
    if path.endswith((".hdf5", ".h5")):
        return read_hdf5(path)
    raise ValueError(f"{path}: unknown weights format (expected .safetensors, .bin, .hdf5)")


def read_hf_folder_weights(folder: str) -> tuple[dict[str, np.ndarray], str]:
    """A Hugging Face model folder's weights, as stored: `model.safetensors`, else
    `pytorch_model.bin`. Returns (tensors by name, the file read)."""
    for name, reader in (("model.safetensors", read_safetensors),
                         ("pytorch_model.bin", read_torch_bin)):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return reader(path), path
    raise FileNotFoundError(f"{folder}: no model.safetensors or pytorch_model.bin")

