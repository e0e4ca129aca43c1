"""LoRA (Hu et al. 2021) for every family, through Keras' own `Dense.enable_lora`:
low-rank adapters A (in x r, random) and B (r x out, zeros) beside the chosen
projections, the output `x W + (alpha / r) x A B`; the encoder's other weights frozen.

    kbert.enable_lora(model, rank=8)                 # the attention query and value
    kbert.enable_lora(model, 8, targets=["query", "value", "intermediate"])
    model.compile(...); model.fit(...)               # adapters (and a task head) train
    kbert.save_lora(model, "adapter")                # the adapters alone
    kbert.load_lora(fresh_model, "adapter")          # onto the same base
    kbert.merge_lora(model)                          # W += (alpha / r) A B: plain layers

A target names layers by their path's end (`query` is every `.../attention/query`) or
by a shell pattern over the whole path (`*layer_1*/intermediate`). The adapter folder
holds `adapter_config.json` (rank, alpha, targets, the layers) and
`adapter_model.safetensors` (A and B per layer path)."""

from __future__ import annotations

import fnmatch
import json
import os

import keras
import numpy as np

from kbert import internals
from kbert.io import atomic_directory, read_json
from kbert.models.interface import find_encoder

DEFAULT_TARGETS = ("query", "value")  # the LoRA paper's W_q, W_v (keras-hub's, peft's)
CONFIG, WEIGHTS = "adapter_config.json", "adapter_model.safetensors"


def _dense_layers(model):
    return [layer for layer in internals.flatten_layers(model)
            if isinstance(layer, keras.layers.Dense)]


def _matches(path: str, targets) -> bool:
    return any(path == t or path.endswith("/" + t) or fnmatch.fnmatchcase(path, t)
               for t in targets)


def _base(model):
    """The part whose weights LoRA freezes: the encoder inside a task model, else the
    model itself."""
    return find_encoder(model) or model


def lora_layers(model) -> list:
    """The layers of `model` with LoRA enabled."""
    return [layer for layer in _dense_layers(model) if layer.lora_enabled]


def enable_lora(model, rank: int, targets=None, alpha: float | None = None) -> list[str]:
    """Adds rank-`rank` adapters to the encoder's Dense layers that `targets` names
    (default: the attention query and value projections) and freezes the encoder's
    other weights; a task head outside the encoder stays trainable. `alpha` scales the
    update by alpha / rank (default: rank, a scale of 1). Compile the model afterwards.
    Returns the adapted layers' paths; none found is an error naming the targets."""
    if not isinstance(rank, int) or rank < 1:
        raise ValueError(f"LoRA rank {rank!r}: must be a whole number of at least 1")
    targets = tuple(targets or DEFAULT_TARGETS)
    base = _base(model)
    if not base.built:
        raise ValueError(f"{base.name}: build the model (call it once) before enable_lora")
    if lora_layers(base):
        raise ValueError(f"{base.name}: LoRA is enabled already")
    chosen = [layer for layer in _dense_layers(base) if _matches(layer.path, targets)]
    if not chosen:
        paths = sorted({layer.path.rsplit("/", 1)[-1] for layer in _dense_layers(base)})
        raise ValueError(f"LoRA targets {list(targets)} match no Dense layer of "
                         f"{base.name}; its Dense layers end in {', '.join(paths)}")
    for variable in base.weights:
        variable.trainable = False
    for layer in chosen:
        if layer.quantization_mode not in (None, "int8"):
            raise NotImplementedError(f"{layer.path}: LoRA over a {layer.quantization_mode} "
                                      "layer; Keras adapts float and int8 Dense layers")
        layer.enable_lora(rank, lora_alpha=alpha)
    return [layer.path for layer in chosen]


def merge_lora(model) -> int:
    """Folds each adapter into its kernel (W + (alpha / r) A B) and removes it, so the
    layer computes as a plain Dense (an export costs what the base model costs); the
    outputs stay the same (float rounding aside). The encoder's weights become
    trainable again. Returns how many layers were merged."""
    merged = lora_layers(model)
    for layer in merged:  # refused before any layer is merged
        if layer.quantization_mode is not None:
            raise NotImplementedError(f"{layer.path}: merging LoRA into a "
                                      f"{layer.quantization_mode} kernel would requantize "
                                      "it; merge before quantizing, or serve the adapters")
    # One garbage collection for the model, not one per layer (internals.one_gc_collect:
    # a full collection takes a second in a process holding a few million objects).
    with internals.one_gc_collect():
        for layer in merged:
            internals.merge_lora_into_kernel(layer)
    if merged:
        for variable in _base(model).weights:
            if not variable.path.endswith("seed_generator_state"):
                variable.trainable = True
    return len(merged)


def save_lora(model, path: str | os.PathLike) -> None:
    """Writes the adapters alone (atomically): their config and A, B per layer path."""
    from kbert.convert.folders import write_safetensors

    layers = lora_layers(model)
    if not layers:
        raise ValueError(f"{model.name}: no LoRA adapters to save (enable_lora first)")
    base = _base(model)
    config = {"kbert_lora": 1, "rank": layers[0].lora_rank, "alpha": layers[0].lora_alpha,
              "layers": [_relative(layer.path, base) for layer in layers]}
    tensors = {}
    for layer, name in zip(layers, config["layers"]):
        tensors[f"{name}/lora_a"] = np.asarray(layer.lora_kernel_a.numpy(), np.float32)
        tensors[f"{name}/lora_b"] = np.asarray(layer.lora_kernel_b.numpy(), np.float32)
    with atomic_directory(path) as tmp:
        with open(os.path.join(tmp, CONFIG), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
        write_safetensors(os.path.join(tmp, WEIGHTS), tensors)


def load_lora(model, path: str | os.PathLike) -> list[str]:
    """Enables LoRA on `model` as the saved adapters were (rank, alpha, layers) and
    loads their A and B. A layer the model lacks, or a shape that differs, is an error
    naming it."""
    from kbert.convert.readers import read_safetensors

    path = os.fspath(path)
    config_file = os.path.join(path, CONFIG)
    if not os.path.exists(config_file):
        raise FileNotFoundError(f"{path}: no {CONFIG} (a folder save_lora wrote)")
    config = read_json(config_file)
    base = _base(model)
    by_name = {_relative(layer.path, base): layer for layer in _dense_layers(base)}
    missing = [name for name in config["layers"] if name not in by_name]
    if missing:
        raise ValueError(f"{path}: adapters for layers {base.name} lacks: "
                         f"{', '.join(missing)}")
    enable_lora(model, int(config["rank"]), targets=[by_name[n].path for n in config["layers"]],
                alpha=config["alpha"])
    tensors = read_safetensors(os.path.join(path, WEIGHTS))
    for name in config["layers"]:
        layer = by_name[name]
        for suffix, variable in (("lora_a", layer.lora_kernel_a), ("lora_b", layer.lora_kernel_b)):
            value = tensors[f"{name}/{suffix}"]
            if tuple(value.shape) != tuple(variable.shape):
                raise ValueError(f"{path}: {name}/{suffix} has shape {tuple(value.shape)}, "
                                 f"the model's {tuple(variable.shape)}")
            variable.assign(value)
    return list(config["layers"])


def _relative(path: str, base) -> str:
    """A layer path without the model's own name (stable across instances)."""
    prefix = base.name + "/"
    return path[len(prefix):] if path.startswith(prefix) else path
