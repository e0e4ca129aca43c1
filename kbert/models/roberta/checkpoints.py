"""Reading and writing RoBERTa weights: Hugging Face (`RobertaModel`,
`RobertaForMaskedLM`) and kbert folders. The canonical name of every variable is
Hugging Face's without the `roberta.` prefix (`encoder.layer.0.attention.self.query.weight`,
dense kernels stored transposed, as PyTorch's `Linear`); kbert folders store the same
names (its config.json holds kbert's field names and `kbert_model`)."""

from __future__ import annotations

import logging
import os

import numpy as np

from kbert import convert
from kbert.convert import folders, initialization
from kbert.models.roberta.config import RobertaConfig

logger = logging.getLogger(__name__)


def _dense(names, prefix, layer):
    names[f"{prefix}.weight"] = (layer.kernel, True)
    names[f"{prefix}.bias"] = (layer.bias, False)


def _norm(names, prefix, layer):
    names[f"{prefix}.weight"] = (layer.gamma, False)
    names[f"{prefix}.bias"] = (layer.beta, False)


def variable_map(model) -> dict:
    """Canonical name -> (Keras variable, stored transposed) for an encoder or a masked LM."""
    encoder = getattr(model, "encoder", model)
    emb = encoder.embeddings
    names = {
        "embeddings.word_embeddings.weight": (emb.word_embeddings.embeddings, False),
        "embeddings.position_embeddings.weight": (emb.position_embeddings.embeddings, False),
        "embeddings.token_type_embeddings.weight": (emb.token_type_embeddings.embeddings,
                                                    False),
    }
    _norm(names, "embeddings.LayerNorm", emb.layer_norm)
    for i, block in enumerate(encoder.transformer_layers):
        p = f"encoder.layer.{i}"
        for sub, layer in (("attention.self.query", block.attention.query),
                           ("attention.self.key", block.attention.key),
                           ("attention.self.value", block.attention.value),
                           ("attention.output.dense", block.attention_output),
                           ("intermediate.dense", block.intermediate),
                           ("output.dense", block.output_dense)):
            _dense(names, f"{p}.{sub}", layer)
        _norm(names, f"{p}.attention.output.LayerNorm", block.attention_layer_norm)
        _norm(names, f"{p}.output.LayerNorm", block.output_layer_norm)
    if encoder.pooler is not None:
        _dense(names, "pooler.dense", encoder.pooler)
    if model is not encoder:
        _dense(names, "lm_head.dense", model.dense)
        _norm(names, "lm_head.layer_norm", model.layer_norm)
        names["lm_head.bias"] = (model.bias, False)
    assert len(names) == len(model.weights), (len(names), len(model.weights))
    return names


SPEC = folders.FolderSpec(RobertaConfig, hf_prefix="roberta.")


def read_folder(folder) -> tuple[RobertaConfig, dict, dict, str, str]:
    """(config, tensors by canonical name, stored names, format, file read)."""
    from kbert.models import registry

    registry.expect_family(os.fspath(folder), "roberta")
    return folders.read_folder(folder, SPEC)


def _assign(model, tensors, display, source, owned) -> None:
    targets = variable_map(model)
    rules = [convert.Rule(name, (name,), convert.transpose if transposed else convert.identity)
             for name, (_, transposed) in targets.items()]
    variables = {name: var for name, (var, _) in targets.items()}
    del targets  # load_into drops each variable once assigned (int8 loads)
    convert.load_into(variables, tensors, rules, source, type(model).__name__, owned=owned,
                      display=display)


def _encoder_owned(key: str) -> bool:
    return key.startswith(("embeddings.", "encoder.", "pooler.")) and \
        key != "embeddings.position_ids"


def load(cls, path, dtype=None, **config_overrides):
    config, tensors, display, fmt, source = read_folder(path)
    values = {**config.to_dict(), **config_overrides}
    values["pooler"] = "pooler.dense.weight" in tensors and values.get("pooler", True)
    encoder = cls(RobertaConfig.from_dict(values), dtype=dtype)
    initialization.built(encoder)
    _assign(encoder, tensors, display, source, _encoder_owned)
    logger.info("Loaded RobertaEncoder (%s format) from %s", fmt, source)
    return encoder


def load_masked_lm(cls, encoder_class, path, dtype=None):
    """`cls` (a masked LM) around an `encoder_class` encoder, from a folder."""
    config, tensors, display, fmt, source = read_folder(path)
    if "lm_head.dense.weight" not in tensors:
        raise ValueError(f"{source}: no masked-LM head (lm_head.*): a RobertaModel folder; "
                         "load it with RobertaEncoder.from_pretrained")
    values = config.to_dict()
    values["pooler"] = "pooler.dense.weight" in tensors
    model = cls(encoder_class(RobertaConfig.from_dict(values), dtype=dtype))
    model({"token_ids": np.zeros((1, 2), "int32"), "padding_mask": np.ones((1, 2), "int32")})
    _assign(model, tensors, display, source,
            lambda key: _encoder_owned(key) or (key.startswith("lm_head.")
                                                and not key.startswith("lm_head.decoder")))
    logger.info("Loaded RobertaMaskedLM (%s format) from %s", fmt, source)
    return model


def _tensors(model, prefix: str = "") -> convert.LazyTensors:
    readers, shapes = {}, {}
    for name, (var, transposed) in variable_map(model).items():
        if prefix and not name.startswith("lm_head."):
            name = prefix + name
        readers[name] = (lambda var=var: var.numpy().T) if transposed else var.numpy
        shapes[name] = tuple(var.shape)[::-1] if transposed else tuple(var.shape)
    return convert.LazyTensors(readers, shapes)


def save(model, path, tokenizer=None) -> None:
    """A kbert folder (Hugging Face's names and layout, `kbert_model` in config.json),
    written atomically, tensor by tensor."""
    encoder = getattr(model, "encoder", model)
    folders.write_folder(path, encoder.config, _tensors(model), tokenizer, layout="pt")


def save_hf(model, path, tokenizer=None) -> None:
    """A Hugging Face `RobertaModel` folder, or `RobertaForMaskedLM` (the encoder under
    `roberta.`, the head as `lm_head.*`, its decoder tied to the token table), that
    `transformers` loads."""
    encoder = getattr(model, "encoder", model)
    config = encoder.config.to_reference_dict()
    if model is not encoder:
        config["architectures"] = ["RobertaForMaskedLM"]
    folders.write_hf_folder(path, config, _tensors(model, "roberta." if model is not encoder
                                                   else ""), tokenizer)
