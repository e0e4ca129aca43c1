"""Package namespaces whose names are imported on first use.

`python -m kbert.tasks.squad --help` imports `kbert` and `kbert.tasks.squad` before it
parses a flag; with eager `__init__` imports that meant TensorFlow (5-10 s) for a help
text. A package lists its public names and the module each comes from; `from kbert
import BertEncoder`, `kbert.BertEncoder` and `kbert.export` import them when asked.
"""

from __future__ import annotations

import importlib
import sys
import types


class _LazyPackage(types.ModuleType):
    """A package module that imports its exported names on first access. A submodule
    named like an export (`kbert.tasks.squad.evaluate` and its `evaluate` function) does
    not replace the export when it is imported: the import system's `setattr` of a
    module over an exported name is ignored."""

    def __getattr__(self, name: str):
        exports = self.__dict__.get("_EXPORTS", {})
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            self.__dict__[name] = value
            return value
        if not name.startswith("__"):
            try:
                return importlib.import_module(f"{self.__name__}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{self.__name__}.{name}":
                    raise
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and name in self.__dict__.get("_EXPORTS", {}):
            return
        super().__setattr__(name, value)

    def __dir__(self):
        return sorted(set(self.__dict__) | set(self.__dict__.get("_EXPORTS", {})))


def lazy_package(name: str, exports: dict[str, str]) -> None:
    """Makes the package `name` (call it from its `__init__`) import the names of
    `exports` (name -> defining module) on first use; other names are tried as its
    submodules."""
    module = sys.modules[name]
    module._EXPORTS = dict(exports)
    module.__all__ = sorted(exports)
    module.__class__ = _LazyPackage
