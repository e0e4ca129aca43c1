"""Reading and writing BART weights: Hugging Face (`BartForConditionalGeneration`,
`BartModel`) and kbert folders. Canonical names are Hugging Face's without the `model.`
prefix (`encoder.layers.0.self_attn.q_proj.weight`, PyTorch `Linear` kernels [out, in]);
`final_logits_bias` is stored [1, V] as there (zeros where a `BartModel` folder has
none). kbert folders store the same names."""

from __future__ import annotations

import logging
import os

import numpy as np

from kbert import convert
from kbert.convert import folders, initialization
from kbert.models.bart.config import BartConfig

logger = logging.getLogger(__name__)

# Copies of the shared table Hugging Face files carry (tied), and the tied output layer.
_IGNORED = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")
# The task heads of Hugging Face's BartForQuestionAnswering and BartForSequenceClassification:
# not the language model's; the task commands read them (`read_head`).
HEADS = ("qa_outputs.", "classification_head.")
# The translation mode's new encoder (`BartSourceEncoder`): kbert folders only.
SOURCE = "source_encoder."


def _reshape(shape):
    def hook(arrays):
        return np.reshape(arrays[0], shape)
    return hook


def variable_map(model) -> dict:
    """Canonical name -> (Keras variable, stored transposed)."""
    names = {"shared.weight": (model.token_embedding.embeddings, False),
             "final_logits_bias": (model.final_logits_bias.bias, False)}
    stacks = [("encoder", model.encoder), ("decoder", model.decoder)]
    if model.source_encoder is not None:  # kbert's names, in BART's encoder's pattern
        names[f"{SOURCE}embed_tokens.weight"] = (
            model.source_encoder.token_embedding.embeddings, False)
        stacks.append((SOURCE.rstrip("."), model.source_encoder.stack))
    for stack_name, stack in stacks:
        names[f"{stack_name}.embed_positions.weight"] = (stack.position_embedding.embeddings,
                                                         False)
        names[f"{stack_name}.layernorm_embedding.weight"] = (stack.embedding_layer_norm.gamma,
                                                             False)
        names[f"{stack_name}.layernorm_embedding.bias"] = (stack.embedding_layer_norm.beta,
                                                           False)
        for i, block in enumerate(stack.blocks):
            p = f"{stack_name}.layers.{i}"
            attentions = [("self_attn", block.attention, block.attention_output,
                           block.attention_layer_norm)]
            if stack.is_decoder:
                attentions.append(("encoder_attn", block.cross_attention,
                                   block.cross_attention_output,
                                   block.cross_attention_layer_norm))
            for ref, attention, output, norm in attentions:
                for short, layer in (("q_proj", attention.query), ("k_proj", attention.key),
                                     ("v_proj", attention.value), ("out_proj", output)):
                    names[f"{p}.{ref}.{short}.weight"] = (layer.kernel, True)
                    names[f"{p}.{ref}.{short}.bias"] = (layer.bias, False)
                names[f"{p}.{ref}_layer_norm.weight"] = (norm.gamma, False)
                names[f"{p}.{ref}_layer_norm.bias"] = (norm.beta, False)
            for ref, layer in (("fc1", block.intermediate), ("fc2", block.output_dense)):
                names[f"{p}.{ref}.weight"] = (layer.kernel, True)
                names[f"{p}.{ref}.bias"] = (layer.bias, False)
            names[f"{p}.final_layer_norm.weight"] = (block.output_layer_norm.gamma, False)
            names[f"{p}.final_layer_norm.bias"] = (block.output_layer_norm.beta, False)
    assert len(names) == len(model.weights), (len(names), len(model.weights))
    return names


SPEC = folders.FolderSpec(BartConfig, hf_prefix="model.")


def read_folder(folder):
    from kbert.models import registry

    registry.expect_family(os.fspath(folder), "bart")
    return folders.read_folder(folder, SPEC)


GENERATION_CONFIG = "generation_config.json"


def with_generation_config(config: BartConfig, folder: str) -> BartConfig:
    """`transformers` 5.x writes the decoding ids (`forced_bos_token_id`,
    `forced_eos_token_id`, `decoder_start_token_id`) into `generation_config.json`
    (`config.json` may lack them): they are read from there where the file has them."""
    import dataclasses

    from kbert.io import read_json

    file = os.path.join(folder, GENERATION_CONFIG)
    if not os.path.exists(file):
        return config
    d = read_json(file)
    values = {}
    for key in ("forced_bos_token_id", "forced_eos_token_id"):
        if key in d:
            values[key] = None if d[key] is None else int(d[key])
    if d.get("decoder_start_token_id") is not None:
        values["decoder_start_token_id"] = int(d["decoder_start_token_id"])
    return dataclasses.replace(config, **values)


def load(cls, path, dtype=None, **config_overrides):
    config, tensors, display, fmt, source = read_folder(path)
    if fmt == "hf":
        config = with_generation_config(config, os.fspath(path))
    model = cls(folders.with_overrides(config, config_overrides), dtype=dtype,
                name="bart_seq2seq_lm")
    initialization.built(model)
    targets = variable_map(model)
    if "final_logits_bias" not in tensors:  # a BartModel folder: zeros, as Hugging Face
        del targets["final_logits_bias"]
    if config_overrides.get("source_encoder_layers") and not any(
            key.startswith(SOURCE) for key in tensors):
        for name in [n for n in targets if n.startswith(SOURCE)]:
            del targets[name]  # initialised at random (`initialization.deferred`)
        logger.info("%s: a new source encoder of %d layers in front of BART, initialised "
                    "at random", source, config_overrides["source_encoder_layers"])
    rules = []
    for name, (var, transposed) in targets.items():
        hook = convert.transpose if transposed else convert.identity
        if name == "final_logits_bias":
            hook = _reshape((config.vocab_size,))
        rules.append(convert.Rule(name, (name,), hook))
    variables = {name: var for name, (var, _) in targets.items()}
    del targets
    heads = sorted({h for key in tensors for h in HEADS if key.startswith(h)})
    convert.load_into(variables, tensors, rules, source, cls.__name__,
                      owned=lambda key: key not in _IGNORED and not key.startswith(HEADS),
                      display=display)
    if heads:
        logger.info("%s: its task head (%s) is not part of %s; the task commands read it",
                    source, ", ".join(h.rstrip(".") for h in heads), cls.__name__)
    logger.info("Loaded %s (%s format) from %s", cls.__name__, fmt, source)
    return model


def read_head(folder, prefix: str) -> dict | None:
    """The tensors of a Hugging Face task head in `folder` (`prefix`: one of `HEADS`,
    e.g. "qa_outputs."), by their names without it ({"weight", "bias"}: PyTorch's
    layout); None where the folder has none."""
    if not folder or not os.path.isdir(os.fspath(folder)):
        return None
    _, tensors, _, _, _ = read_folder(folder)
    found = {key[len(prefix):]: np.asarray(tensors[key]) for key in list(tensors)
             if key.startswith(prefix)}
    return found or None


def _tensors(model, prefix: str = "") -> convert.LazyTensors:
    readers, shapes = {}, {}
    for name, (var, transposed) in variable_map(model).items():
        key = name if name == "final_logits_bias" else prefix + name
        if name == "final_logits_bias":
            readers[key] = lambda var=var: var.numpy()[None, :]
            shapes[key] = (1, int(var.shape[0]))
        else:
            readers[key] = (lambda var=var: var.numpy().T) if transposed else var.numpy
            shapes[key] = tuple(var.shape)[::-1] if transposed else tuple(var.shape)
    return convert.LazyTensors(readers, shapes)


def save(model, path, tokenizer=None) -> None:
    """A kbert folder (Hugging Face's names without `model.`), written atomically."""
    folders.write_folder(path, model.config, _tensors(model), tokenizer, layout="pt")


def save_hf(model, path, tokenizer=None) -> None:
    """A Hugging Face `BartForConditionalGeneration` folder that `transformers` loads."""
    if model.source_encoder is not None:
        raise ValueError("BartSeq2SeqLM with a source encoder (source_encoder_layers="
                         f"{model.config.source_encoder_layers}): no Hugging Face model has "
                         "one; save it as a kbert folder (format='kbert')")
    folders.write_hf_folder(path, model.config.to_reference_dict(), _tensors(model, "model."),
                            tokenizer)
