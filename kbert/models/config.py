"""The base of every family's config: dict and JSON round trips, presets, and the
`kbert_model` key that tells which family a saved folder holds."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, ClassVar

from kbert.io import atomic_file, read_json

# Keys kbert writes into a config.json besides the fields.
FOLDER_KEYS = ("kbert_model", "kbert_version")


@dataclasses.dataclass
class ModelConfig:
    """Hyper-parameters of one model family, as a dataclass.

    A family subclasses it with its fields (each default with its reason), sets
    `family` (the registry name, written as `kbert_model` in saved folders) and
    `PRESETS`, and overrides `from_reference_dict` to read the reference
    implementations' own config files.
    """

    family: ClassVar[str] = ""
    PRESETS: ClassVar[dict[str, dict]] = {}
    # A reference implementation's config file: one holding any of these keys, or this
    # Hugging Face `model_type`.
    reference_keys: ClassVar[tuple[str, ...]] = ()
    reference_model_type: ClassVar[str | None] = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        """kbert's own keys (unknown keys are an error naming them), or the reference
        implementation's keys where `is_reference_dict` recognizes them."""
        if cls.is_reference_dict(d):
            return cls.from_reference_dict(d)
        unknown = sorted(set(d) - cls.field_names() - set(FOLDER_KEYS))
        if unknown:
            raise ValueError(f"Unknown {cls.__name__} field(s): {unknown}")
        return cls(**{k: v for k, v in d.items() if k in cls.field_names()})

    @classmethod
    def is_reference_dict(cls, d: dict[str, Any]) -> bool:
        """Whether `d` is a reference implementation's config rather than kbert's
        (`reference_keys`, `reference_model_type`)."""
        return any(k in d for k in cls.reference_keys) or (
            cls.reference_model_type is not None
            and d.get("model_type") == cls.reference_model_type)

    @classmethod
    def from_reference_dict(cls, d: dict[str, Any]):
        raise NotImplementedError(f"{cls.__name__} reads no reference config")

    @classmethod
    def preset(cls, name: str, **overrides):
        """A named size (`tiny` for tests, and the published sizes)."""
        if name not in cls.PRESETS:
            raise ValueError(f"Unknown {cls.__name__} preset {name!r}; choose from "
                             f"{sorted(cls.PRESETS)}")
        return cls(**{**cls.PRESETS[name], **overrides})

    @classmethod
    def adjust_file_dict(cls, path: str, d: dict[str, Any]) -> dict[str, Any]:
        """Hook for file-specific meanings (e.g. Google's `bert_config.json`)."""
        return d

    @classmethod
    def from_json_file(cls, path: str | os.PathLike):
        """Reads a kbert `config.json` or a reference implementation's config file;
        errors name the file."""
        path = os.fspath(path)
        d = read_json(path)
        if not isinstance(d, dict):
            raise ValueError(f"{path}: expected a JSON object")
        try:
            return cls.from_dict(cls.adjust_file_dict(path, d))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from None

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes kbert's `config.json` (atomically), with `kbert_model` = the family."""
        with atomic_file(path) as f:
            json.dump({"kbert_model": self.family, **self.to_dict()}, f, indent=2,
                      sort_keys=True)
            f.write("\n")
