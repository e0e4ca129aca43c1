"""Model families by name: their config, encoder and tokenizer classes.

    from kbert.models import registry
    family = registry.get_family("bert")
    encoder = family.encoder_class.from_pretrained(path)
    tokenizer = family.tokenizer_class.from_pretrained(path)

A new family registers itself once (`register_family`) in its package's
`__init__`; the task commands and `python -m kbert.export` then find it by name
(`--model NAME`) or from a saved folder (`family_of_folder`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from kbert.io import read_json


@dataclasses.dataclass(frozen=True)
class Family:
    """One model family.

    Attributes:
        name: the registry name (`--model NAME`, `kbert_model` in saved folders).
        config_class: a `kbert.models.config.ModelConfig` subclass.
        encoder_class: an `EncoderModel` Keras model class with `from_pretrained`.
        tokenizer_class: a `kbert.tokenizers.Tokenizer` subclass with `from_pretrained`.
        recognizes: folder -> bool, for the reference implementations' folders
            (Hugging Face, Google, OpenAI, bilm-tf) that carry no `kbert_model` key.
        aliases: older `kbert_model` values that mean this family.
    """

    name: str
    config_class: type
    encoder_class: type
    tokenizer_class: type
    recognizes: Callable[[str], bool] | None = None
    aliases: tuple[str, ...] = ()


_FAMILIES: dict[str, Family] = {}
# The families kbert ships; each registers itself when its package is imported, which
# the look-ups below make sure of (`import kbert` no longer imports them up front).
BUILTIN = ("kbert.models.bert", "kbert.models.gpt", "kbert.models.elmo")


def _load_builtin() -> None:
    import importlib

    for module in BUILTIN:
        importlib.import_module(module)


def register_family(family: Family, replace: bool = False) -> Family:
    if family.name in _FAMILIES and not replace:
        raise ValueError(f"model family {family.name!r} is registered already")
    _FAMILIES[family.name] = family
    return family


def unregister_family(name: str) -> None:
    _FAMILIES.pop(name, None)


def families() -> list[str]:
    _load_builtin()
    return sorted(_FAMILIES)


def get_family(name: str) -> Family:
    _load_builtin()
    for family in _FAMILIES.values():
        if name == family.name or name in family.aliases:
            return family
    raise ValueError(f"unknown model family {name!r}; known: {', '.join(families())}")


def expect_family(path: str | os.PathLike, name: str) -> None:
    """Raises one ValueError line when `path` holds a model of another registered family
    than `name` (loading it as this one failed with a list of unknown config fields).
    A folder no family recognizes is left to the loader's own checks."""
    try:
        family = family_of_folder(path)
    except (FileNotFoundError, ValueError):
        return
    if family.name != name and name not in family.aliases:
        article = "an" if name[0] in "aeiou" else "a"
        raise ValueError(f"{os.fspath(path)}: holds a {family.name} model, not {article} "
                         f"{name} one; load it with {family.encoder_class.__name__}.from_pretrained")


def family_of_folder(path: str | os.PathLike) -> Family:
    """The family of a saved folder: its `config.json`'s `kbert_model`, else the first
    family that recognizes the folder."""
    _load_builtin()
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: not a folder")
    config = os.path.join(path, "config.json")
    if os.path.exists(config):
        d = read_json(config)
        if isinstance(d, dict) and "kbert_model" in d:
            return get_family(str(d["kbert_model"]))
    for family in _FAMILIES.values():
        if family.recognizes is not None and family.recognizes(path):
            return family
    raise FileNotFoundError(f"{path}: not a model folder of a known family "
                            f"({', '.join(families())})")
