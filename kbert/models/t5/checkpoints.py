"""Reading and writing T5 weights: Hugging Face (`T5ForConditionalGeneration`) and kbert
folders. Every variable's canonical name is Hugging Face's
(`encoder.block.0.layer.0.SelfAttention.q.weight`, PyTorch `Linear` kernels [out, in],
stored transposed from Keras'); kbert folders store the same names.

The output layer: a `lm_head.weight` in the file that differs from `shared.weight`
is an untied output layer (T5 v1.1, FLAN-T5), whatever the config says; none, or an
equal one, is the tied token table (T5.1.0). `transformers` 5.x decides the same way
(it unties when both are present and differ).
"""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np

from kbert import convert
from kbert.convert import folders, initialization
from kbert.models.t5.config import T5Config

logger = logging.getLogger(__name__)

# Tensors Hugging Face files carry that kbert has no variable for: the stacks' copies
# of the shared table, and a cross-attention bias table older files hold (unused).
_IGNORED = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
            "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight")


def variable_map(model) -> dict:
    """Canonical name -> (Keras variable, stored transposed)."""
    names = {"shared.weight": (model.token_embedding.embeddings, False)}
    for stack_name, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        names[f"{stack_name}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = (
            stack.position_bias.embeddings, False)
        for i, block in enumerate(stack.blocks):
            p = f"{stack_name}.block.{i}.layer"
            parts = [("0", "SelfAttention", block.self_attention,
                      block.self_attention_output, block.self_attention_norm)]
            if stack.is_decoder:
                parts.append(("1", "EncDecAttention", block.cross_attention,
                              block.cross_attention_output, block.cross_attention_norm))
            for index, ref, attention, output, norm in parts:
                for short, layer in (("q", attention.query), ("k", attention.key),
                                     ("v", attention.value), ("o", output)):
                    names[f"{p}.{index}.{ref}.{short}.weight"] = (layer.kernel, True)
                names[f"{p}.{index}.layer_norm.weight"] = (norm.scale, False)
            ff = "2" if stack.is_decoder else "1"
            feed = block.feed_forward
            if feed.wi_1 is None:
                names[f"{p}.{ff}.DenseReluDense.wi.weight"] = (feed.wi_0.kernel, True)
            else:
                names[f"{p}.{ff}.DenseReluDense.wi_0.weight"] = (feed.wi_0.kernel, True)
                names[f"{p}.{ff}.DenseReluDense.wi_1.weight"] = (feed.wi_1.kernel, True)
            names[f"{p}.{ff}.DenseReluDense.wo.weight"] = (feed.wo.kernel, True)
            names[f"{p}.{ff}.layer_norm.weight"] = (block.feed_forward_norm.scale, False)
        names[f"{stack_name}.final_layer_norm.weight"] = (stack.final_norm.scale, False)
    if model.lm_head is not None:
        names["lm_head.weight"] = (model.lm_head.kernel, True)
    assert len(names) == len(model.weights), (len(names), len(model.weights))
    return names


SPEC = folders.FolderSpec(T5Config)


def read_folder(folder):
    """(config, tensors by canonical name, stored names, format, file read)."""
    from kbert.models import registry

    registry.expect_family(os.fspath(folder), "t5")
    return folders.read_folder(folder, SPEC)


def untied_head(tensors) -> bool:
    """Whether the file's `lm_head.weight` is an output layer of its own (see the
    module docstring)."""
    if "lm_head.weight" not in tensors:
        return False
    if "shared.weight" not in tensors:
        return True
    return not np.array_equal(tensors["lm_head.weight"], tensors["shared.weight"])


def load(cls, path, dtype=None, **config_overrides):
    config, tensors, display, fmt, source = read_folder(path)
    untied = untied_head(tensors)
    config = folders.with_overrides(
        dataclasses.replace(config, tie_word_embeddings=not untied), config_overrides)
    model = cls(config, dtype=dtype, name="t5_seq2seq_lm")
    initialization.built(model)
    targets = variable_map(model)
    rules = [convert.Rule(name, (name,), convert.transpose if transposed else convert.identity)
             for name, (_, transposed) in targets.items()]
    variables = {name: var for name, (var, _) in targets.items()}
    del targets  # load_into drops each variable once assigned (int8 loads)
    convert.load_into(variables, tensors, rules, source, cls.__name__,
                      owned=lambda key: key not in _IGNORED and key != "lm_head.weight",
                      display=display)
    logger.info("Loaded %s (%s format, %s output layer) from %s", cls.__name__, fmt,
                "untied" if untied else "tied", source)
    return model


def _tensors(model) -> convert.LazyTensors:
    readers, shapes = {}, {}
    for name, (var, transposed) in variable_map(model).items():
        readers[name] = (lambda var=var: var.numpy().T) if transposed else var.numpy
        shapes[name] = tuple(var.shape)[::-1] if transposed else tuple(var.shape)
    return convert.LazyTensors(readers, shapes)


def save(model, path, tokenizer=None) -> None:
    """A kbert folder (Hugging Face's names and layout, `kbert_model` in config.json),
    written atomically, tensor by tensor."""
    folders.write_folder(path, model.config, _tensors(model), tokenizer, layout="pt")


def save_hf(model, path, tokenizer=None) -> None:
    """A Hugging Face `T5ForConditionalGeneration` folder that `transformers` loads (an
    untied output layer as `lm_head.weight`)."""
    folders.write_hf_folder(path, model.config.to_reference_dict(), _tensors(model),
                            tokenizer)
