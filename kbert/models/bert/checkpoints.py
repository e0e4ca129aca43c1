"""Reading and writing BERT weights: kbert, Hugging Face and Google TF1 folders.

Every variable of a `BertEncoder` has one canonical name: the name Google's TF1
checkpoints use (`bert/encoder/layer_0/attention/self/query/kernel`). Hugging Face
names derive from it by a fixed rule (`encoder.layer.0.attention.self.query.weight`,
dense kernels transposed). kbert folders store the canonical names in safetensors.
"""

from __future__ import annotations

import glob
import logging
import os
import re

import numpy as np

from kbert.io import atomic_directory, read_json
from kbert.models.bert.config import BertConfig

logger = logging.getLogger(__name__)

KBERT_WEIGHTS = "model.safetensors"
CONFIG = "config.json"


def variable_map(encoder) -> dict:
    """Canonical (Google TF1) name -> Keras variable, for every weight of `encoder`."""
    emb = encoder.embeddings
    names = {
        "bert/embeddings/word_embeddings": emb.word_embeddings.embeddings,
        "bert/embeddings/token_type_embeddings": emb.token_type_embeddings.embeddings,
        "bert/embeddings/position_embeddings": emb.position_embeddings.embeddings,
        "bert/embeddings/LayerNorm/gamma": emb.layer_norm.gamma,
        "bert/embeddings/LayerNorm/beta": emb.layer_norm.beta,
    }
    for i, block in enumerate(encoder.transformer_layers):
        p = f"bert/encoder/layer_{i}"
        dense = {
            "attention/self/query": block.attention.query,
            "attention/self/key": block.attention.key,
            "attention/self/value": block.attention.value,
            "attention/output/dense": block.attention_output,
            "intermediate/dense": block.intermediate,
            "output/dense": block.output_dense,
        }
        for sub, layer in dense.items():
            names[f"{p}/{sub}/kernel"] = layer.kernel
            names[f"{p}/{sub}/bias"] = layer.bias
        for sub, layer in {"attention/output/LayerNorm": block.attention_layer_norm,
                           "output/LayerNorm": block.output_layer_norm}.items():
            names[f"{p}/{sub}/gamma"] = layer.gamma
            names[f"{p}/{sub}/beta"] = layer.beta
    names["bert/pooler/dense/kernel"] = encoder.pooler.kernel
    names["bert/pooler/dense/bias"] = encoder.pooler.bias
    assert len(names) == len(encoder.weights), (len(names), len(encoder.weights))
    return names


def google_to_hf(name: str) -> tuple[str, bool]:
    """`bert/encoder/layer_0/attention/self/query/kernel` ->
    (`encoder.layer.0.attention.self.query.weight`, transpose=True)."""
    parts = name.removeprefix("bert/").split("/")
    last = parts.pop()
    transpose = last == "kernel"
    suffix = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}.get(last)
    if suffix is None:  # the three embedding tables
        parts.append(last)
        suffix = "weight"
    return ".".join(parts).replace("layer_", "layer.") + "." + suffix, transpose


# ---------------------------------------------------------------------------- reading
def _read_safetensors(path: str) -> dict:
    from safetensors.numpy import load_file

    return load_file(path)


def _read_torch_bin(path: str) -> dict:
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"{path} is a PyTorch pickle; reading it needs `torch`. Install torch, or "
            "convert the folder to model.safetensors.") from None
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {k: v.float().numpy() if v.is_floating_point() else v.numpy()
            for k, v in state.items()}


def _hf_tensors(folder: str) -> tuple[dict, str]:
    """Reads a Hugging Face BERT's weights into canonical names."""
    st = os.path.join(folder, "model.safetensors")
    pt = os.path.join(folder, "pytorch_model.bin")
    if os.path.exists(st):
        raw, source = _read_safetensors(st), st
    elif os.path.exists(pt):
        raw, source = _read_torch_bin(pt), pt
    else:
        raise FileNotFoundError(f"{folder}: no model.safetensors or pytorch_model.bin")
    hf = {}
    for key, value in raw.items():
        k = key.removeprefix("bert.")
        k = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", k)
        k = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", k)
        hf[k] = (key, value)
    return hf, source


def _google_tensors(folder_or_prefix: str) -> tuple[dict, str]:
    import tensorflow as tf

    prefix = folder_or_prefix
    if os.path.isdir(prefix):
        prefix = tf.train.latest_checkpoint(folder_or_prefix)
        if prefix is None:
            found = sorted(glob.glob(os.path.join(folder_or_prefix, "*.ckpt*.index")))
            if not found:
                raise FileNotFoundError(f"{folder_or_prefix}: no TF checkpoint (*.ckpt.index)")
            prefix = found[0][: -len(".index")]
    try:
        reader = tf.train.load_checkpoint(prefix)
    except Exception as e:  # tf raises DataLossError / NotFoundError with long texts
        raise ValueError(f"{prefix}: cannot read TF checkpoint ({type(e).__name__}: "
                         f"{str(e).splitlines()[0]})") from None
    tensors = {}
    for name in reader.get_variable_to_shape_map():
        if not name.startswith("bert/") or name.endswith(("/adam_m", "/adam_v")):
            continue  # pretraining heads (cls/...), task heads, optimizer slots, step
        try:
            tensors[name] = reader.get_tensor(name)
        except Exception as e:
            raise ValueError(f"{prefix}: variable {name} cannot be read "
                             f"({type(e).__name__}: {str(e).splitlines()[0]})") from None
    return tensors, prefix


def detect_format(folder: str) -> str:
    """'kbert', 'hf' or 'google' for a checkpoint folder."""
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: not a folder")
    cfg = os.path.join(folder, CONFIG)
    if os.path.exists(cfg):
        return "kbert" if "kbert_model" in read_json(cfg) else "hf"
    if os.path.exists(os.path.join(folder, "bert_config.json")):
        return "google"
    raise FileNotFoundError(
        f"{folder}: no config.json (kbert or Hugging Face) or bert_config.json (Google)")


def read_checkpoint(folder: str) -> tuple[BertConfig, dict, str, str]:
    """Returns (config, tensors by canonical name, format, source file)."""
    folder = os.fspath(folder)
    fmt = detect_format(folder)
    if fmt == "google":
        config = BertConfig.from_json_file(os.path.join(folder, "bert_config.json"))
        tensors, source = _google_tensors(folder)
        return config, tensors, fmt, source
    config = BertConfig.from_json_file(os.path.join(folder, CONFIG))
    if fmt == "kbert":
        source = os.path.join(folder, KBERT_WEIGHTS)
        return config, _read_safetensors(source), fmt, source
    hf, source = _hf_tensors(folder)
    return config, hf, fmt, source


def assign(encoder, tensors: dict, fmt: str, source: str) -> None:
    """Copies `tensors` into `encoder`, checking names and shapes first.

    For `fmt == "hf"`, `tensors` maps Hugging Face names to (original key, array).
    Raises ValueError naming every missing, unexpected or mis-shaped variable.
    """
    targets = variable_map(encoder)
    values, problems = {}, []
    if fmt == "hf":
        wanted = {}
        for canonical in targets:
            hf_name, transpose = google_to_hf(canonical)
            wanted[hf_name] = (canonical, transpose)
        for hf_name, (canonical, transpose) in wanted.items():
            if hf_name not in tensors:
                problems.append(f"missing variable {hf_name} (for {canonical})")
                continue
            key, arr = tensors[hf_name]
            values[canonical] = (key, arr.T if transpose else arr)
        for hf_name, (key, _) in tensors.items():
            if hf_name in wanted or hf_name == "embeddings.position_ids":
                continue
            if hf_name.startswith(("embeddings.", "encoder.", "pooler.")):
                problems.append(f"unexpected variable {key}")
            else:
                logger.info("%s: ignoring %s (not part of the encoder)", source, key)
    else:
        for canonical in targets:
            if canonical not in tensors:
                problems.append(f"missing variable {canonical}")
            else:
                values[canonical] = (canonical, tensors[canonical])
        problems += [f"unexpected variable {k}" for k in tensors if k not in targets]
    for canonical, (key, arr) in values.items():
        want = tuple(targets[canonical].shape)
        if tuple(arr.shape) != want:
            problems.append(f"variable {key} has shape {tuple(arr.shape)}, expected {want}")
    if problems:
        raise ValueError(f"{source}: cannot load into BertEncoder:\n  " + "\n  ".join(problems))
    for canonical, (_, arr) in values.items():
        var = targets[canonical]
        var.assign(np.asarray(arr, dtype=var.dtype))


def load_encoder(cls, path, dtype=None, **config_overrides):
    config, tensors, fmt, source = read_checkpoint(os.fspath(path))
    if config_overrides:
        config = BertConfig.from_dict({**config.to_dict(), **config_overrides})
    encoder = cls(config, dtype=dtype)
    assign(encoder, tensors, fmt, source)
    logger.info("Loaded BertEncoder (%s format) from %s", fmt, source)
    return encoder


def save_encoder(encoder, path, tokenizer=None) -> None:
    """Writes a kbert folder; a crash leaves either the old folder or the new one."""
    from safetensors.numpy import save_file

    tensors = {name: np.ascontiguousarray(np.asarray(var.numpy(), dtype=np.float32))
               for name, var in variable_map(encoder).items()}
    with atomic_directory(path) as tmp:
        encoder.config.to_json_file(os.path.join(tmp, CONFIG))
        save_file(tensors, os.path.join(tmp, KBERT_WEIGHTS), metadata={"format": "kbert"})
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
