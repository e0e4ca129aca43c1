"""Model families by name: their config, encoder and tokenizer classes.

    from kbert.models import registry
    family = registry.get_family("bert")
    encoder = family.encoder_class.from_pretrained(path)
    tokenizer = family.tokenizer_class.from_pretrained(path)

A family is one package under `kbert/models/` with a hooks module (`hooks.py`) that
declares it (`FAMILY = Family(...)`) and its hooks (`HOOKS`); the package's `__init__`
lists its public names (`__all__`, which `kbert.NAME` serves). The registry finds the
package on disk (`BUILTIN`, nothing imported) and registers its `FAMILY` on the first
look-up. A family kbert does not ship is one such
package in a folder of `KBERT_FAMILY_PATH` (os.pathsep-separated; each folder joins
`kbert.models.__path__`, so its packages are `kbert.models.NAME`): nothing else to
register, edit or install (`family_packages`). The task commands and
`python -m kbert.export` then find it by name
(`--model NAME`), from a saved folder (`family_of_folder`) or from a model or tokenizer
(`family_of`), and ask it, never a family name, what to do:
- `family.hook(name)`: the family's own step for a task, from its hooks module
  (`Family.hooks`, imported when the family is registered), or None where the generic step applies.
  The hooks a family may define are `HOOK_NAMES`; a hooks module declares the ones it
  defines in its `HOOKS` tuple. Importing the hooks module also registers the family's
  task layers for Keras' deserialization.
- `family.language_model_class`, `family.masked_lm_class`: the causal LM and the
  encoder with its masked-LM head, where the family has them.
- `family.feature_based`: the encoder is used frozen (ELMo), never fine-tuned.
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
        description: one line for the command lines' `--model` help.
        language_model_class: the causal LM class (`from_pretrained`), or None.
        masked_lm_class: the encoder with its masked-LM head (`from_pretrained`), or None.
        hooks: the module of the family's task hooks (see the module docstring); by
            default the `hooks` module beside `config_class`'s, where there is one.
        folder_hint: where a folder of this family comes from, for the error a command
            gives when the family has no `scratch_encoder` hook and no folder was given.
        feature_based: the encoder is used frozen (its tasks train a head on features).
    """

    name: str
    config_class: type
    encoder_class: type
    tokenizer_class: type
    recognizes: Callable[[str], bool] | None = None
    aliases: tuple[str, ...] = ()
    description: str = ""
    language_model_class: type | None = None
    masked_lm_class: type | None = None
    hooks: str | None = None
    folder_hint: str = ""
    feature_based: bool = False

    def hook(self, name: str):
        """The family's hook `name` (a function), or None where it has none."""
        if name not in HOOK_NAMES:
            raise ValueError(f"hook {name!r}: not a hook kbert calls ({', '.join(HOOK_NAMES)})")
        if self.hooks is None:
            return None
        import importlib

        module = importlib.import_module(self.hooks)
        return getattr(module, name) if name in getattr(module, "HOOKS", ()) else None

    def import_hooks(self) -> None:
        """Imports the hooks module (registering the family's task layers with Keras)."""
        if self.hooks is not None:
            import importlib

            importlib.import_module(self.hooks)


def recognizes_model_type(*model_types: str, files: tuple[str, ...] = (),
                          untyped: Callable[[dict], bool] | None = None
                          ) -> Callable[[str], bool]:
    """`Family.recognizes` for the reference implementations' folders: one holding any
    of `files` (Google's `bert_config.json`, OpenAI's `hparams.json`), or a Hugging Face
    folder whose `config.json`'s `model_type` is one of `model_types` (one without a
    `model_type`, older transformers', where `untyped(config)` says so)."""
    def recognizes(folder: str) -> bool:
        if any(os.path.exists(os.path.join(folder, name)) for name in files):
            return True
        config = os.path.join(folder, "config.json")
        if not os.path.exists(config):
            return False
        d = read_json(config)
        if not isinstance(d, dict):
            return False
        if "model_type" not in d:
            return untyped is not None and bool(untyped(d))
        return d["model_type"] in model_types

    return recognizes


# The hooks kbert calls (`Family.hook`), and what for.
HOOK_NAMES = {
    "scratch_tokenizer": "the tokenizer learned from the training text (no --init_from)",
    "scratch_encoder": "a new encoder of --preset's size (no --init_from)",
    "glue_tokenizer": "the GLUE tokenizer (GPT's task tokens)",
    "glue_model": "the GLUE model (GPT's head and auxiliary LM loss; ELMo's biLSTM)",
    "glue_encode": "GLUE's inputs (ELMo's words)",
    "glue_examples": "GLUE's tf.data examples (ELMo's character ids)",
    "glue_text": "a GLUE example as input text (text to text)",
    "glue_target": "a GLUE label as target text (text to text)",
    "glue_label": "an output text read back as a GLUE label (text to text)",
    "squad_text": "a SQuAD question and context as input text (text to text)",
    "squad_target": "a SQuAD answer as target text (text to text)",
    "squad_model": "the SQuAD span model (BART's BartForQuestionAnswering head)",
    "ner_features": "NER's inputs (ELMo's character ids)",
    "ner_model": "the NER token model (BART's: a dense layer on the decoder's states)",
    "after_load": "a task folder's model after loading (GPT's auxiliary loss linked)",
    "pretrain": "the pretraining recipe (`kbert.models.pretraining.PretrainRecipe`)",
    "create_data": "`pretrain create_data` (Google's create_pretraining_data.py)",
}

_FAMILIES: dict[str, Family] = {}
# The family a task command trains from scratch when neither --model nor --init_from
# names one.
DEFAULT_FAMILY = "bert"
_MODELS_DIR = os.path.dirname(os.path.abspath(__file__))


def _packages_in(folder: str) -> list[str]:
    if not os.path.isdir(folder):
        return []
    return [f"kbert.models.{name}" for name in sorted(os.listdir(folder))
            if name.isidentifier()
            and os.path.isfile(os.path.join(folder, name, "__init__.py"))
            and os.path.isfile(os.path.join(folder, name, "hooks.py"))]


def builtin_packages() -> tuple[str, ...]:
    """The families kbert ships: the packages under kbert/models with a hooks module,
    found on disk (nothing imported)."""
    return tuple(_packages_in(_MODELS_DIR))


def family_packages() -> tuple[str, ...]:
    """Every family's package: kbert's own (`BUILTIN`) and those of the other folders
    on `kbert.models.__path__` (the folders of the `KBERT_FAMILY_PATH` variable, or
    one a program appends): a family package there is registered by its folder alone."""
    import kbert.models

    out = []
    for folder in kbert.models.__path__:
        out += [p for p in _packages_in(os.fspath(folder)) if p not in out]
    return tuple(out)


# The families kbert ships; the look-ups below register them (`_load_builtin`;
# `import kbert` imports none of them).
BUILTIN = builtin_packages()


def public_names() -> dict[str, str]:
    """Each built-in family's public names (its package's `__all__`) -> the module that
    defines each (where the package imports it from), read from the packages' source
    without importing them: the top-level `kbert.NAME`s."""
    import ast

    out = {}
    for package in BUILTIN:
        path = os.path.join(_MODELS_DIR, package.rsplit(".", 1)[1], "__init__.py")
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        source, names = {}, []
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                source.update({a.asname or a.name: node.module for a in node.names})
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                names = [ast.literal_eval(e) for e in node.value.elts]
        out.update({name: source.get(name, package) for name in names})
    return out


def _load_builtin() -> None:
    """Registers each family package's `FAMILY` (declared in its hooks module), once."""
    import importlib

    for package in family_packages():
        if package in _LOADED:
            continue
        family = getattr(importlib.import_module(f"{package}.hooks"), "FAMILY", None)
        if family is not None and family.name not in _FAMILIES:
            register_family(family)
        _LOADED[package] = getattr(family, "name", None)


_LOADED: dict[str, str | None] = {}  # family package -> the name its FAMILY registered


def register_family(family: Family, replace: bool = False) -> Family:
    """Registers `family` (a family package's hooks module declares its `FAMILY`, which
    the registry registers; a program may register one itself). By default its hooks
    module is the `hooks` module beside its config's, and a Hugging Face folder whose
    `model_type` is its config's `reference_model_type` is recognized as one of it."""
    if family.recognizes is None and getattr(family.config_class, "reference_model_type",
                                             None):
        family = dataclasses.replace(family, recognizes=recognizes_model_type(
            family.config_class.reference_model_type))
    if family.hooks is None:  # the hooks module beside the config's, where there is one
        import importlib.util

        package = family.config_class.__module__.rsplit(".", 1)[0]
        try:
            found = importlib.util.find_spec(f"{package}.hooks") is not None
        except (ImportError, ValueError):  # a config defined outside a package
            found = False
        if found:
            family = dataclasses.replace(family, hooks=f"{package}.hooks")
    if family.name in _FAMILIES and not replace:
        raise ValueError(f"model family {family.name!r} is registered already")
    _FAMILIES[family.name] = family
    return family


def unregister_family(name: str) -> None:
    _FAMILIES.pop(name, None)
    for package in [p for p, n in _LOADED.items() if n == name]:
        del _LOADED[package]


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


def family_of(obj) -> Family:
    """The family of a model, encoder or tokenizer: its `family` attribute (an
    `EncoderModel` or `Tokenizer` sets it), else that of the encoder inside a model,
    else the family whose encoder or tokenizer class it is an instance of."""
    name = getattr(obj, "family", None)
    if not name:
        from kbert.models.interface import find_encoder

        name = getattr(find_encoder(obj), "family", None)
    if not name:
        _load_builtin()
        for family in _FAMILIES.values():
            if isinstance(obj, (family.tokenizer_class, family.encoder_class)):
                return family
    if not name:
        raise ValueError(f"{type(obj).__name__}: not a model or tokenizer of a registered "
                         f"family (no `family` attribute)")
    return get_family(name)


def all_families() -> list[Family]:
    _load_builtin()
    return [_FAMILIES[name] for name in sorted(_FAMILIES)]
