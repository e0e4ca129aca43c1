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


from kbert import convert
from kbert.convert import folders, initialization
from kbert.models.bert.config import BertConfig

logger = logging.getLogger(__name__)

KBERT_WEIGHTS = folders.WEIGHTS
CONFIG = folders.CONFIG


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
def _normalize(name: str) -> str:
    """Older Hugging Face files name LayerNorm parameters `gamma`/`beta`."""
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    return re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)


def _google_tensors(folder_or_prefix: str) -> tuple[dict, dict, str]:
    def keep(name):  # not the pretraining heads (cls/...), task heads, slots or step
        return name.startswith("bert/") and not name.endswith(("/adam_m", "/adam_v"))

    tensors, source = convert.read_tf_checkpoint(folder_or_prefix, keep)
    return tensors, {}, source


SPEC = folders.FolderSpec(BertConfig, hf_prefix="bert.", normalize=_normalize,
                          foreign=(folders.Foreign("google", "bert_config.json",
                                                   _google_tensors),))


def detect_format(folder: str) -> str:
    """'kbert', 'hf' or 'google' for a checkpoint folder."""
    return folders.detect_format(folder, SPEC)


def read_checkpoint(folder) -> tuple[BertConfig, dict, dict, str, str]:
    """Returns (config, tensors by name, stored names, format, source file)."""
    from kbert.models import registry

    registry.expect_family(os.fspath(folder), "bert")
    return folders.read_folder(folder, SPEC)


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
    convert.load_into(targets, tensors, rules(targets, fmt), source, "BertEncoder",
                      owned=_owned_by_encoder(fmt), display=display)


def load(cls, path, dtype=None, **config_overrides):
    config, tensors, display, fmt, source = read_checkpoint(os.fspath(path))
    encoder = cls(folders.with_overrides(config, config_overrides), dtype=dtype)
    initialization.built(encoder)
    assign(encoder, tensors, fmt, source, display)
    logger.info("Loaded BertEncoder (%s format) from %s", fmt, source)
    return encoder


def save_hf(encoder, path, tokenizer=None) -> None:
    """A Hugging Face `BertModel` folder (`transformers` loads it): its names, dense
    kernels transposed to PyTorch's [out, in], its config.json."""
    readers, shapes = {}, {}
    for name, var in variable_map(encoder).items():
        hf, transpose = google_to_hf(name)
        readers[hf] = (lambda var=var: var.numpy().T) if transpose else var.numpy
        shapes[hf] = tuple(var.shape)[::-1] if transpose else tuple(var.shape)
    folders.write_hf_folder(path, encoder.config.to_reference_dict(),
                            convert.LazyTensors(readers, shapes), tokenizer)


def save(encoder, path, tokenizer=None) -> None:
    """Writes a kbert folder (Google's names), tensor by tensor; a crash leaves the old
    folder or the new."""
    targets = variable_map(encoder)
    tensors = convert.LazyTensors({name: var.numpy for name, var in targets.items()},
                                  {name: tuple(var.shape) for name, var in targets.items()})
    folders.write_folder(path, encoder.config, tensors, tokenizer)
