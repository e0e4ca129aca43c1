"""Task folders: what a kbert task run leaves for `python -m kbert.export --model_dir`.

A task folder holds `model.keras` (the fine-tuned model), the tokenizer's files (its
`assets()`, e.g. `vocab.txt`, and `tokenizer_config.json`), and `kbert_task.json`: the
task name, the model family, and the settings its export needs (sequence length,
labels, SQuAD window settings, ...).
"""

from __future__ import annotations

import json
import os

from typing import TYPE_CHECKING

from kbert.io import atomic_file, read_json
from kbert.models.base import QUANTIZE_MODES  # one list: from_pretrained's too

if TYPE_CHECKING:  # imported where used: `--help` needs no Keras
    import keras

TASK_FILE = "kbert_task.json"
TASKS = ("classifier", "squad", "ner", "embeddings", "generate", "elmo", "fill_mask")
# Tasks exported from a model folder (no task run needed).
MODEL_TASKS = ("generate", "elmo", "fill_mask")


def weights_only(model: keras.Model) -> keras.Model:
    """`model` without its optimizer: an uncompiled clone with the same weights. A
    compiled model's `.keras` file also holds the optimizer's slots (twice the weights
    for Adam); the task folder keeps the weights, the checkpoints keep the optimizer."""
    if getattr(model, "optimizer", None) is None:
        return model
    # keras.models.clone_model keeps the compiled optimizer; a model rebuilt from its
    # config has none.
    clone = model.__class__.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    return clone


def save_task_folder(path: str, model: keras.Model, tokenizer, task: str,
                     encoder_folder: str | None = None, encoder=None, **settings) -> None:
    """Writes model, tokenizer and task settings into `path`, each file atomically;
    with `encoder_folder` (a name inside `path`), also the fine-tuned encoder alone, a
    model folder its family's `from_pretrained` reads (SQuAD's `encoder/`): `encoder`,
    or the model's `EncoderModel` layer (a model built on an encoder-decoder's layers,
    BART's, holds none: give it)."""
    if task not in TASKS:
        raise ValueError(f"task {task!r}: expected one of {TASKS}")
    from kbert.models.interface import find_encoder

    encoder = encoder if encoder is not None else find_encoder(model)
    if encoder_folder:
        encoder.save_pretrained(os.path.join(path, encoder_folder), tokenizer=tokenizer)
    family = encoder.family if encoder is not None else getattr(tokenizer, "family", "")
    os.makedirs(path, exist_ok=True)
    tokenizer.save_pretrained(path)
    target = os.path.join(path, "model.keras")
    tmp = os.path.join(path, ".tmp-model.keras")
    weights_only(model).save(tmp)
    os.replace(tmp, target)
    with atomic_file(os.path.join(path, TASK_FILE)) as f:
        json.dump({"task": task, "family": family, "settings": settings}, f, indent=2,
                  ensure_ascii=False)


def read_task_file(path: str) -> dict:
    """A task folder's `kbert_task.json` ({"task", "family", "settings"}), checked."""
    task_file = os.path.join(path, TASK_FILE)
    if not os.path.exists(task_file):
        raise FileNotFoundError(
            f"{path}: no {TASK_FILE}; --model_dir must be the --output_dir of a kbert task "
            "run (or, for --task embeddings, a model folder of any family)")
    info = read_json(task_file)
    for key in ("task", "settings"):
        if key not in info:
            raise ValueError(f"{task_file}: missing field {key!r}")
    return info


def load_task_folder(path: str, info: dict | None = None):
    """(task, model, tokenizer, settings) from a task folder (`info`: its task file,
    when the caller has read it)."""
    import kbert.layers.heads  # noqa: F401 (registers the task heads with Keras)
    from kbert.models import registry

    info = read_task_file(path) if info is None else info
    family = registry.get_family(info.get("family", registry.DEFAULT_FAMILY))  # older folders
    family.import_hooks()  # the family's own task layers, for Keras
    import keras

    model = keras.saving.load_model(os.path.join(path, "model.keras"), compile=False)
    after_load = family.hook("after_load")  # e.g. GPT's auxiliary LM loss, linked again
    if after_load is not None:
        model = after_load(model)
    tokenizer = family.tokenizer_class.from_pretrained(path)
    return info["task"], model, tokenizer, dict(info["settings"])


def check_exportable(model_dir: str, task: str) -> dict | None:
    """A task folder's model can be exported as `task` (its tokenizer lists it in
    `Tokenizer.exports`), read from `kbert_task.json` without loading the model; else
    ValueError in one line. Returns the task file (None for a model folder, which the
    exporters check)."""
    from kbert.models import registry

    if not os.path.exists(os.path.join(model_dir, TASK_FILE)):
        return None
    info = read_task_file(model_dir)
    saved = info.get("task")
    if task not in ("embeddings", saved) and task not in MODEL_TASKS:
        raise ValueError(f"{model_dir}: a {saved!r} model cannot be exported as --task {task} "
                         f"(use --task {saved} or embeddings)")
    family = registry.get_family(info.get("family", registry.DEFAULT_FAMILY))
    exports = family.tokenizer_class.exports
    if task not in exports:
        raise ValueError(f"--model_dir {model_dir}: the {family.name} model of this {saved} "
                         f"folder cannot be exported as --task {task}; {family.name} models export "
                         f"{', '.join(sorted(exports))} (`Tokenizer.exports`: the signatures "
                         "whose inputs its tokenizer prepares in the graph)")
    return info


# The one table an export is chosen from: task -> (module, function).
EXPORTERS = {"classifier": ("kbert.export.saved_model", "export_classifier"),
             "squad": ("kbert.export.saved_model", "export_squad"),
             "ner": ("kbert.export.ner_graph", "export_ner"),
             "embeddings": ("kbert.export.saved_model", "export_embeddings"),
             "generate": ("kbert.export.generate_graph", "export_generate"),
             "elmo": ("kbert.export.elmo_graph", "export_elmo"),
             "fill_mask": ("kbert.export.fill_mask_graph", "export_fill_mask")}


def exporter(task: str):
    """The export function of `task` (`EXPORTERS`)."""
    import importlib

    module, function = EXPORTERS[task]
    return getattr(importlib.import_module(module), function)


# What each model-folder export loads: the family's causal LM, its encoder with the
# masked-LM head, or its encoder.
_MODEL_TASK_CLASS = {"generate": ("language_model_class", "a causal language model"),
                     "fill_mask": ("masked_lm_class", "a masked-LM head"),
                     "elmo": ("encoder_class", "feature layers")}


def _model_folder(model_dir: str, task: str, dtype: str | None = None,
                  quantize: str | None = None):
    """(family, model, tokenizer) of a model folder for the export `task` (one of
    MODEL_TASKS), or one error line naming the families that export it; `dtype`
    ("bfloat16") loads the weights straight into variables of that dtype (what
    `cast_model` makes of the float32 model, without holding both), `quantize` quantizes
    while loading where the class loads so (`from_pretrained(quantize=...)`)."""
    from kbert.models import registry

    family = registry.family_of_folder(model_dir)
    attribute, what = _MODEL_TASK_CLASS[task]
    model_class = getattr(family, attribute)
    if task not in family.tokenizer_class.exports or model_class is None:
        able = [f.name for f in registry.all_families()
                if task in f.tokenizer_class.exports and getattr(f, attribute) is not None]
        raise ValueError(f"{model_dir}: --task {task} needs a {' or '.join(able)} folder "
                         f"({what}), this one holds a {family.name!r} model")
    model = model_class.from_pretrained(model_dir, **_load_options(model_class, dtype, quantize))
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        try:
            tokenizer = family.tokenizer_class.from_pretrained(model_dir)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"{model_dir}: no tokenizer files ({e})") from None
    return family, model, tokenizer


def _load_dtype(dtype: str | None) -> dict:
    """`from_pretrained`'s dtype argument for an export `--dtype` (checked first)."""
    if dtype in (None, "float32"):
        return {}
    if dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype}: use one of {', '.join(DTYPES)}")
    return {"dtype": dtype}


def _load_options(model_class, dtype: str | None, quantize: str | None) -> dict:
    """`from_pretrained`'s arguments for an export's `--dtype` / `--quantize`: the
    quantization happens while loading where the class offers it (the others are
    quantized after loading, by `export_variant`)."""
    import inspect

    options = _load_dtype(dtype)
    if quantize and "quantize" in inspect.signature(model_class.from_pretrained).parameters:
        if quantize not in QUANTIZE_MODES:
            raise ValueError(f"--quantize {quantize}: use one of {', '.join(QUANTIZE_MODES)}")
        options["quantize"] = quantize
    return options


DTYPES = ("float32", "bfloat16")


def _with_policy(config, dtype: str):
    """A serialized Keras object with every dtype policy set to `dtype` (layers that
    make an inner layer pinned to float32, as task heads' output layers are for mixed
    precision, keep it: that dtype is not in the config)."""
    if isinstance(config, dict):
        if config.get("class_name") == "DTypePolicy" and isinstance(config.get("config"), dict):
            return {**config, "config": {**config["config"], "name": dtype}}
        return {k: _with_policy(v, dtype) for k, v in config.items()}
    if isinstance(config, list):
        return [_with_policy(v, dtype) for v in config]
    return config


def cast_model(model, dtype: str | None):
    """`model` rebuilt with `dtype` variables and computation (its layers' policies
    `dtype`; output layers pinned to float32 stay so), the weights cast into it; None or
    "float32" returns `model` itself."""
    if dtype in (None, "float32"):
        return model
    if dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype}: use one of {', '.join(DTYPES)}")
    import keras

    if getattr(model, "quantization_mode_of_layers", lambda: None)() is not None:
        raise ValueError(f"--dtype {dtype}: the model is quantized; give --dtype or "
                         "--quantize, not both")
    new = keras.saving.deserialize_keras_object(
        _with_policy(keras.saving.serialize_keras_object(model), dtype))
    if [w.path for w in new.weights] != [w.path for w in model.weights]:
        raise ValueError(f"--dtype {dtype}: {type(model).__name__} rebuilt with other "
                         "variables; it cannot be cast")
    for old, cast in zip(model.weights, new.weights):
        cast.assign(keras.ops.cast(old.value, cast.dtype))
    if getattr(model, "tokenizer", None) is not None:
        new.tokenizer = model.tokenizer
    # What a loaded model needs again (GPT's auxiliary LM loss linked to its decoder).
    from kbert.models import registry

    after_load = registry.family_of(new).hook("after_load")
    return after_load(new) if after_load is not None else new


def check_variant(quantize: str | None, dtype: str | None) -> None:
    """One of `quantize` and a `dtype` other than float32 at most, else ValueError."""
    if quantize and dtype not in (None, "float32"):
        raise ValueError(f"--quantize {quantize} and --dtype {dtype}: give one of them")


def export_variant(model, quantize: str | None = None, dtype: str | None = None):
    """(the model to export, its variant name or None): quantized in place
    (`quantize_model`) or a `dtype` copy (`cast_model`); one of the two at most."""
    check_variant(quantize, dtype)
    if quantize:
        return quantize_model(model, quantize), quantize
    if dtype not in (None, "float32"):
        return cast_model(model, dtype), dtype
    return model, None


def quantize_model(model, mode: str | None):
    """`model.quantize(mode)` for any loaded model, a task model included (a functional
    Keras model around a kbert encoder): every kbert `Dense` and token table, and the
    task head, in `mode`, or one error naming what stayed float or what refuses
    (ELMo's LSTMs). None leaves the model as it is."""
    if mode is None:
        return model
    if mode not in QUANTIZE_MODES:
        raise ValueError(f"--quantize {mode}: use one of {', '.join(QUANTIZE_MODES)}")
    from kbert.models.base import Quantizable

    Quantizable.quantize(model, mode)
    return model


def export_from_folder(model_dir: str, task: str, export_dir: str, *,
                       serving_version: str | None = None, seq_length: int | None = None,
                       generation: dict | None = None, quantize: str | None = None,
                       dtype: str | None = None) -> str:
    """Exports the model of a task folder (or, for "embeddings", a model folder of any
    registered family; for MODEL_TASKS, a model folder of a family that exports the
    task: "generate" decodes with the `generation` settings of `export_generate`).
    `quantize="int8"`: the model's weights quantized first (`quantize_model`);
    `dtype="bfloat16"`: exported with bfloat16 variables and computation (a model
    folder loaded straight into them; a task folder's model cast by `cast_model`)."""
    from kbert.export import ops as ops_lib

    version = serving_version or ops_lib.DEFAULT_SERVING_VERSION
    check_variant(quantize, dtype)
    if task in MODEL_TASKS:  # a model folder: bfloat16 straight from the file
        _, model, tokenizer = _model_folder(model_dir, task, dtype, quantize)
        if model.quantization_mode_of_layers() is None:
            model, _ = export_variant(model, quantize)
        generation = generation or {}
        options = {"fill_mask": {"top_k": generation.get("top_k") or 5,
                                 "seq_length": seq_length or 128},
                   "generate": generation}.get(task, {})
        return exporter(task)(model, tokenizer, export_dir, serving_version=version,
                              **options)
    info = check_exportable(model_dir, task)
    if info is None and task == "embeddings":  # a model folder of any family
        from kbert.models.registry import family_of_folder

        family = family_of_folder(model_dir)
        encoder = family.encoder_class.from_pretrained(
            model_dir, **_load_options(family.encoder_class, dtype, quantize))
        tokenizer = family.tokenizer_class.from_pretrained(model_dir)
        if encoder.quantization_mode_of_layers() is None:
            encoder, _ = export_variant(encoder, quantize)
        return exporter(task)(encoder, tokenizer, export_dir, seq_length=seq_length or 128,
                              serving_version=version)
    saved_task, model, tokenizer, settings = load_task_folder(model_dir, info)
    if task == "embeddings":
        from kbert.models.interface import find_encoder

        encoder, _ = export_variant(find_encoder(model), quantize, dtype)
        return exporter(task)(
            encoder, tokenizer, export_dir, serving_version=version,
            seq_length=seq_length or settings.get("seq_length", settings.get(
                "max_seq_length", 128)))
    if task != saved_task:
        raise ValueError(f"{model_dir}: a {saved_task!r} model cannot be exported as "
                         f"--task {task} (use --task {saved_task} or embeddings)")
    if seq_length:
        settings["max_seq_length" if task == "squad" else "seq_length"] = seq_length
    model, _ = export_variant(model, quantize, dtype)
    return export_task(task, model, tokenizer, export_dir, version, settings)


def export_task(task: str, model, tokenizer, export_dir: str, serving_version: str,
                settings: dict) -> str:
    """The export of a task folder's model (`classifier`, `squad`, `ner`) with the
    settings its `kbert_task.json` records."""
    return exporter(task)(model, tokenizer, export_dir, serving_version=serving_version,
                          **settings)
