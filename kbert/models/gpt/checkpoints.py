"""Reading and writing GPT weights: kbert, Hugging Face (`gpt2`, `openai-gpt`) and
OpenAI GPT-2 TF checkpoint folders.

Every format is first normalized to Hugging Face's GPT-2 tensor names without the
`transformer.` prefix (`h.0.attn.c_attn.weight`, Conv1D kernels [in, out], the query,
key and value fused in `c_attn`); GPT-1's names differ only in its embeddings
(`tokens_embed`, `positions_embed`). OpenAI's TF names map one to one
(`model/h0/attn/c_attn/w` [1, in, out] -> `h.0.attn.c_attn.weight`). One table then
maps those names to the decoder's variables, splitting `c_attn` into the query, key
and value kernels. kbert folders store the same GPT-2 layout in safetensors.
"""

from __future__ import annotations

import logging
import os
import re

import numpy as np

from kbert import convert
from kbert.convert import folders, initialization
from kbert.models.gpt.config import GPTConfig

logger = logging.getLogger(__name__)

KBERT_WEIGHTS = folders.WEIGHTS
CONFIG = folders.CONFIG
OPENAI_HPARAMS = "hparams.json"

_BLOCK_DENSE = {"attn.c_proj": "attention_output", "mlp.c_fc": "intermediate",
                "mlp.c_proj": "output_dense"}
_BLOCK_NORMS = {"ln_1": "attention_layer_norm", "ln_2": "output_layer_norm"}


def variable_map(decoder) -> dict:
    """Normalized Hugging Face name (with `.q`, `.k`, `.v` parts of `c_attn`) ->
    Keras variable, for every weight of `decoder`."""
    gpt1 = not decoder.config.norm_first
    names = {("tokens_embed.weight" if gpt1 else "wte.weight"):
             decoder.token_embedding.embeddings,
             ("positions_embed.weight" if gpt1 else "wpe.weight"):
             decoder.position_embedding.embeddings}
    for i, block in enumerate(decoder.transformer_layers):
        p = f"h.{i}"
        for part in ("query", "key", "value"):
            layer = getattr(block.attention, part)
            names[f"{p}.attn.c_attn.weight.{part}"] = layer.kernel
            names[f"{p}.attn.c_attn.bias.{part}"] = layer.bias
        for ref, attr in _BLOCK_DENSE.items():
            layer = getattr(block, attr)
            names[f"{p}.{ref}.weight"] = layer.kernel
            names[f"{p}.{ref}.bias"] = layer.bias
        for ref, attr in _BLOCK_NORMS.items():
            layer = getattr(block, attr)
            names[f"{p}.{ref}.weight"] = layer.gamma
            names[f"{p}.{ref}.bias"] = layer.beta
    if decoder.final_layer_norm is not None:
        names["ln_f.weight"] = decoder.final_layer_norm.gamma
        names["ln_f.bias"] = decoder.final_layer_norm.beta
    assert len(names) == len(decoder.weights), (len(names), len(decoder.weights))
    return names


def rules(targets) -> list[convert.Rule]:
    """The name table: `c_attn` split in three along its output axis, the rest as is
    (Conv1D kernels are already [in, out], as Keras')."""
    table = []
    for target in targets:
        fused = re.fullmatch(r"(.*\.c_attn\.(weight|bias))\.(query|key|value)", target)
        if fused:
            index = ("query", "key", "value").index(fused.group(3))
            table.append(convert.Rule(target, (fused.group(1),),
                                      convert.split(3, index, axis=-1)))
        else:
            table.append(convert.Rule(target, (target,)))
    return table


# ---------------------------------------------------------------------------- reading
_OPENAI_NAME = re.compile(r"model/(?:h(\d+)/)?(.+)/(w|b|g)$|model/(wte|wpe)$")


def _openai_tensors(folder: str) -> tuple[dict, dict, str]:
    """OpenAI's GPT-2 TF checkpoint, renamed to the normalized names: `model/h3/mlp/
    c_fc/w` [1, in, out] -> `h.3.mlp.c_fc.weight` [in, out]; `g`/`b` of a LayerNorm ->
    `weight`/`bias`."""
    raw, source = convert.read_tf_checkpoint(folder)
    readers, display = {}, {}

    def kernel(name):
        def read():
            value = raw[name]
            # conv1d kernels carry a leading axis of 1
            return value[0] if value.ndim == 3 and value.shape[0] == 1 else value
        return read

    for name in raw:
        m = _OPENAI_NAME.fullmatch(name)
        read = lambda name=name: raw[name]  # noqa: E731
        if m is None:
            key = name  # unexpected: reported by the converter under its own name
        elif m.group(4):
            key = f"{m.group(4)}.weight"
        else:
            layer, sub, kind = m.groups()[:3]
            key = ((f"h.{layer}." if layer is not None else "") + sub.replace("/", ".")
                   + (".bias" if kind == "b" else ".weight"))
            if kind == "w":
                read = kernel(name)
        readers[key], display[key] = read, name
    return convert.LazyTensors(readers, fresh=raw.fresh), display, source


SPEC = folders.FolderSpec(GPTConfig, hf_prefix="transformer.",
                          foreign=(folders.Foreign("openai", OPENAI_HPARAMS, _openai_tensors),))


def detect_format(folder: str) -> str:
    """'kbert', 'hf' or 'openai' for a checkpoint folder."""
    return folders.detect_format(folder, SPEC)


def read_checkpoint(folder) -> tuple[GPTConfig, dict, dict, str, str]:
    """(config, tensors by normalized name, names as stored, format, source file)."""
    from kbert.models import registry

    registry.expect_family(os.fspath(folder), "gpt")
    return folders.read_folder(folder, SPEC)


def _owned(key: str) -> bool:
    """Decoder variables; not the LM head (tied: `lm_head.weight` repeats the token
    embeddings), task heads, or the attention-mask buffers older files carry."""
    if re.fullmatch(r"h\.\d+\.attn\.(bias|masked_bias)", key) or key in (
            "lm_head.weight", "position_ids"):
        return False
    return key.startswith(("h.", "wte.", "wpe.", "ln_f.", "tokens_embed.",
                           "positions_embed."))


def assign(decoder, tensors: dict, source: str, display: dict | None = None) -> None:
    """Copies `tensors` (normalized names) into `decoder`; a ValueError names every
    missing, unexpected or mis-shaped variable."""
    targets = variable_map(decoder)
    table = rules(targets)
    display = dict(display or {})
    if any(v.startswith("transformer.") for v in display.values()):
        for rule in table:  # a missing variable is named as the file would store it
            for name in rule.sources:
                display.setdefault(name, "transformer." + name)
    convert.load_into(targets, tensors, table, source, "GPTDecoder", owned=_owned,
                      display=display)


def load(cls, path, dtype=None, **config_overrides):
    config, tensors, display, fmt, source = read_checkpoint(os.fspath(path))
    decoder = cls(folders.with_overrides(config, config_overrides), dtype=dtype,
                  name="gpt_decoder")
    initialization.built(decoder)
    assign(decoder, tensors, source, display)
    logger.info("Loaded GPTDecoder (%s format) from %s", fmt, source)
    return decoder


def save_hf(decoder, path, tokenizer=None) -> None:
    """A Hugging Face `GPT2LMHeadModel` (or `OpenAIGPTLMHeadModel`) folder that
    `transformers` loads: the weights under `transformer.`, the output layer tied to the
    token table, its config.json."""
    tensors = _hf_tensors(decoder)
    prefixed = convert.LazyTensors({"transformer." + k: (lambda k=k: tensors[k])
                                    for k in tensors},
                                   {"transformer." + k: tensors.shape(k) for k in tensors})
    folders.write_hf_folder(path, decoder.config.to_reference_dict(), prefixed, tokenizer)


def save(decoder, path, tokenizer=None) -> None:
    """A kbert folder: config.json and model.safetensors in Hugging Face's layout
    (`c_attn` fused again), written tensor by tensor; a crash leaves the old folder or
    the new one."""
    folders.write_folder(path, decoder.config, _hf_tensors(decoder), tokenizer)


def _hf_tensors(decoder) -> convert.LazyTensors:
    """The decoder's weights by Hugging Face name (no prefix), `c_attn` fused."""
    readers, shapes, parts = {}, {}, {}
    for name, var in variable_map(decoder).items():
        fused = re.fullmatch(r"(.*\.c_attn\.(?:weight|bias))\.(query|key|value)", name)
        if fused:
            parts.setdefault(fused.group(1), []).append(var)
        else:
            readers[name] = lambda var=var: var.numpy()
            shapes[name] = tuple(var.shape)
    for name, qkv in parts.items():
        readers[name] = lambda qkv=qkv: np.concatenate([v.numpy() for v in qkv], axis=-1)
        shapes[name] = (*qkv[0].shape[:-1], sum(v.shape[-1] for v in qkv))
    return convert.LazyTensors(readers, shapes)
