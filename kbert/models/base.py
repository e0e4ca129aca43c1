"""`from_pretrained` and `save_pretrained` once, for every family's model classes."""

from __future__ import annotations

import importlib
import os
from typing import ClassVar


class Pretrained:
    """Folder loading and saving through the family's checkpoint module (`checkpoints`,
    a module path), which offers `load(cls, path, dtype=None, **config_overrides)` and
    `save(model, path, tokenizer=None)` on `kbert.convert.folders`: the formats it
    reads are the family's (see its checkpoint module and docs)."""

    checkpoints: ClassVar[str] = ""

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype=None, **config_overrides):
        """Builds the model and loads its weights from a folder (a kbert folder, a
        Hugging Face folder, or the family's other reference formats). A missing, extra
        or mis-shaped variable raises a ValueError that names it; a folder of another
        family, one naming it. `config_overrides` replace config fields (`dropout=0.0`)."""
        module = importlib.import_module(cls.checkpoints)
        return module.load(cls, os.fspath(path), dtype=dtype, **config_overrides)

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None) -> None:
        """Writes a kbert folder atomically: `config.json`, `model.safetensors` and,
        given a tokenizer, its files."""
        importlib.import_module(self.checkpoints).save(self, path, tokenizer=tokenizer)
