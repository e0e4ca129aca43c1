"""Reading and writing BERT weights: kbert, Hugging Face and Google TF1 folders.

Every variable of a `BertEncoder` has one canonical name: the name Google's TF1
checkpoints use (`bert/encoder/layer_0/attention/self/query/kernel`). Hugging Face
names derive from it by a fixed rule (`encoder.layer.0.attention.self.query.weight`,
dense kernels transposed). kbert folders store the canonical names in safetensors.
BERT's name table is handed to the generic converter (`kbert.convert`), which reads
the formats and names every missing, unexpected or mis-shaped variable.
"""

from __future__ import annotations

import logging
import os
import re

import numpy as np

from kbert import convert
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


def rules(canonical_names, fmt: str) -> list[convert.Rule]:
    """BERT's name table for `fmt` ("kbert" and "google": canonical names; "hf":
    Hugging Face names, dense kernels transposed)."""
    if fmt != "hf":
        return [convert.Rule(name, (name,)) for name in canonical_names]
    table = []
    for name in canonical_names:
        hf_name, transposed = google_to_hf(name)
        table.append(convert.Rule(name, (hf_name,),
                                  convert.transpose if transposed else convert.identity))
    return table


# ---------------------------------------------------------------------------- reading
def _hf_tensors(folder: str) -> tuple[dict, dict, str]:
    """A Hugging Face BERT's weights by normalized name (no `bert.` prefix, LayerNorm
    `weight`/`bias`), the names as stored, and the file read."""
    raw, source = convert.read_hf_folder_weights(folder)
    tensors, display = {}, {}
    for key, value in raw.items():
        k = key.removeprefix("bert.")
        k = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", k)
        k = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", k)
        tensors[k], display[k] = value, key
    return tensors, display, source


def _google_tensors(folder_or_prefix: str) -> tuple[dict, str]:
    def keep(name):  # not the pretraining heads (cls/...), task heads, slots or step
        return name.startswith("bert/") and not name.endswith(("/adam_m", "/adam_v"))

    return convert.read_tf_checkpoint(folder_or_prefix, keep)


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


def read_checkpoint(folder) -> tuple[BertConfig, dict, dict, str, str]:
    """Returns (config, tensors by name, stored names, format, source file)."""
    from kbert.models import registry

    folder = os.fspath(folder)
    registry.expect_family(folder, "bert")
    fmt = detect_format(folder)
    if fmt == "google":
        config = BertConfig.from_json_file(os.path.join(folder, "bert_config.json"))
        tensors, source = _google_tensors(folder)
        return config, tensors, {}, fmt, source
    config = BertConfig.from_json_file(os.path.join(folder, CONFIG))
    if fmt == "kbert":
        source = os.path.join(folder, KBERT_WEIGHTS)
        return config, convert.read_safetensors(source), {}, fmt, source
    tensors, display, source = _hf_tensors(folder)
    return config, tensors, display, fmt, source


def _owned_by_encoder(fmt: str):
    if fmt != "hf":
        return lambda key: True
    return lambda key: (key.startswith(("embeddings.", "encoder.", "pooler."))
                        and key != "embeddings.position_ids")


def assign(encoder, tensors: dict, fmt: str, source: str, display: dict | None = None) -> None:
    """Copies `tensors` into `encoder`, checking names and shapes first.

    Raises ValueError naming every missing, unexpected or mis-shaped variable.
    """
    targets = variable_map(encoder)
    values = convert.convert(tensors, rules(targets, fmt),
                             {k: tuple(v.shape) for k, v in targets.items()}, source,
                             "BertEncoder", owned=_owned_by_encoder(fmt), display=display)
    convert.assign(targets, values)


def load_encoder(cls, path, dtype=None, **config_overrides):
    config, tensors, display, fmt, source = read_checkpoint(os.fspath(path))
    if config_overrides:
        config = BertConfig.from_dict({**config.to_dict(), **config_overrides})
    encoder = cls(config, dtype=dtype)
    assign(encoder, tensors, fmt, source, display)
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
