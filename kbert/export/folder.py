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


def save_task_folder(path: str, model: keras.Model, tokenizer, task: str, **settings) -> None:
    """Writes model, tokenizer and task settings into `path`, each file atomically."""
    if task not in TASKS:
        raise ValueError(f"task {task!r}: expected one of {TASKS}")
    from kbert.models.interface import find_encoder

    encoder = find_encoder(model)
    family = encoder.family if encoder is not None else "bert"
    os.makedirs(path, exist_ok=True)
    tokenizer.save_pretrained(path)
    target = os.path.join(path, "model.keras")
    tmp = os.path.join(path, ".tmp-model.keras")
    weights_only(model).save(tmp)
    os.replace(tmp, target)
    with atomic_file(os.path.join(path, TASK_FILE)) as f:
        json.dump({"task": task, "family": family, "settings": settings}, f, indent=2,
                  ensure_ascii=False)


def load_task_folder(path: str):
    """(task, model, tokenizer, settings) from a task folder."""
    import importlib

    from kbert.models import registry

    for module in ("kbert.tasks.squad", "kbert.tasks.glue", "kbert.tasks.ner",
                   "kbert.tasks.glue.elmo", "kbert.tasks.ner.elmo"):
        try:  # registers the task heads for deserialization
            importlib.import_module(module)
        except ModuleNotFoundError:
            pass

    task_file = os.path.join(path, TASK_FILE)
    if not os.path.exists(task_file):
        raise FileNotFoundError(
            f"{path}: no {TASK_FILE}; --model_dir must be the --output_dir of a kbert task "
            "run (or, for --task embeddings, a BERT folder)")
    info = read_json(task_file)
    for key in ("task", "settings"):
        if key not in info:
            raise ValueError(f"{task_file}: missing field {key!r}")
    family = registry.get_family(info.get("family", "bert"))  # older folders: BERT
    import keras

    model = keras.saving.load_model(os.path.join(path, "model.keras"), compile=False)
    if info.get("family") == "gpt":  # GPT classifiers' auxiliary LM loss, linked again
        from kbert.tasks.glue.gpt import link_auxiliary_losses

        link_auxiliary_losses(model)
    tokenizer = family.tokenizer_class.from_pretrained(path)
    return info["task"], model, tokenizer, dict(info["settings"])


def check_exportable(model_dir: str, task: str) -> None:
    """A task folder's model can be exported as `task` (its tokenizer lists it in
    `Tokenizer.exports`), read from `kbert_task.json` without loading the model; else
    ValueError in one line. Model folders (no task file) are checked by the exporters."""
    from kbert.models import registry

    task_file = os.path.join(model_dir, TASK_FILE)
    if not os.path.exists(task_file):
        return
    info = read_json(task_file)
    saved = info.get("task")
    if task not in ("embeddings", saved) and task not in MODEL_TASKS:
        raise ValueError(f"{model_dir}: a {saved!r} model cannot be exported as --task {task} "
                         f"(use --task {saved} or embeddings)")
    family = registry.get_family(info.get("family", "bert"))
    exports = family.tokenizer_class.exports
    if task not in exports:
        raise ValueError(f"--model_dir {model_dir}: the {family.name} model of this {saved} "
                         f"folder cannot be exported as --task {task}; {family.name} models export "
                         f"{', '.join(sorted(exports))} (the classifier and ner signatures "
                         "pack subword pieces in the graph; ELMo's heads read characters)")


def export_from_folder(model_dir: str, task: str, export_dir: str, *,
                       serving_version: str | None = None, seq_length: int | None = None,
                       generation: dict | None = None) -> str:
    """Exports the model of a task folder (or, for "embeddings", a model folder of any
    registered family; for "generate", a GPT folder with its tokenizer, decoding with
    the `generation` settings of `export_generate`)."""
    from kbert.export import ops as ops_lib
    from kbert.export import saved_model

    version = serving_version or ops_lib.DEFAULT_SERVING_VERSION
    if task == "elmo":
        from kbert.export.elmo_graph import export_elmo
        from kbert.models.registry import family_of_folder

        family = family_of_folder(model_dir)
        if family.name != "elmo":
            raise ValueError(f"{model_dir}: --task elmo needs an ELMo folder (options.json "
                             f"and the weight .hdf5), this one holds a {family.name!r} model")
        model = family.encoder_class.from_pretrained(model_dir)
        return export_elmo(model, family.tokenizer_class.from_pretrained(model_dir),
                           export_dir, serving_version=version)
    if task == "fill_mask":
        from kbert.export.fill_mask_graph import export_fill_mask
        from kbert.models.bert.pretrainer import BertPretrainer
        from kbert.tokenizers.bert import BertTokenizer

        model = BertPretrainer.from_pretrained(model_dir)
        return export_fill_mask(model, BertTokenizer.from_pretrained(model_dir), export_dir,
                                top_k=(generation or {}).get("top_k") or 5,
                                seq_length=seq_length or 128, serving_version=version)
    if task == "generate":
        from kbert.export.generate_graph import export_generate
        from kbert.models.gpt import GPTLanguageModel
        from kbert.models.registry import family_of_folder

        family = family_of_folder(model_dir)
        if family.name != "gpt":
            raise ValueError(f"{model_dir}: --task generate needs a GPT folder, this one "
                             f"holds a {family.name!r} model")
        lm = GPTLanguageModel.from_pretrained(model_dir)
        if lm.tokenizer is None:
            raise FileNotFoundError(f"{model_dir}: no tokenizer files (vocab.json + "
                                    "merges.txt, or encoder.json + vocab.bpe)")
        return export_generate(lm, lm.tokenizer, export_dir, serving_version=version,
                               **(generation or {}))
    if task == "embeddings" and not os.path.exists(os.path.join(model_dir, TASK_FILE)):
        from kbert.models.registry import family_of_folder

        family = family_of_folder(model_dir)
        encoder = family.encoder_class.from_pretrained(model_dir)
        tokenizer = family.tokenizer_class.from_pretrained(model_dir)
        return saved_model.export_embeddings(encoder, tokenizer, export_dir,
                                             seq_length=seq_length or 128,
                                             serving_version=version)
    check_exportable(model_dir, task)
    saved_task, model, tokenizer, settings = load_task_folder(model_dir)
    if task == "embeddings":
        from kbert.models.interface import find_encoder

        encoder = find_encoder(model)
        return saved_model.export_embeddings(
            encoder, tokenizer, export_dir, serving_version=version,
            seq_length=seq_length or settings.get("seq_length", settings.get(
                "max_seq_length", 128)))
    if task != saved_task:
        raise ValueError(f"{model_dir}: a {saved_task!r} model cannot be exported as "
                         f"--task {task} (use --task {saved_task} or embeddings)")
    exporter = {"classifier": saved_model.export_classifier,
                "squad": saved_model.export_squad}.get(task)
    if task == "ner":
        from kbert.export.ner_graph import export_ner as exporter
    if seq_length:
        settings["max_seq_length" if task == "squad" else "seq_length"] = seq_length
    return exporter(model, tokenizer, export_dir, serving_version=version, **settings)
