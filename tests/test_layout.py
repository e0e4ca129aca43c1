"""The package's layout, kept by a test: no import cycle between kbert's modules and no
upward import (each level imports only from the levels below it, docs/architecture.md),
counting imports inside functions too; and no family dispatch above kbert/models. Also
the test suite's marks: on tests only, where `make test-fast` and `-m` read them."""

from __future__ import annotations

import ast
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kbert")
# Lowest first; a module may import from its own level and the levels below.
LEVELS = [("kbert.io", "kbert.hub", "kbert.internals", "kbert._lazy", "kbert.cli",
           "kbert._startup"),
          ("kbert.layers",), ("kbert.training", "kbert.tokenizers"), ("kbert.convert",),
          ("kbert.models",), ("kbert.export",), ("kbert.tasks",)]


def _modules() -> dict[str, str]:
    out = {}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                out[rel.removesuffix(".__init__")] = path
    return out


def _imports(modules: dict[str, str]) -> dict[str, set[str]]:
    edges = {}
    for module, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("kbert"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                if base.startswith("kbert"):
                    for alias in node.names:
                        full = f"{base}.{alias.name}"
                        found.add(full if full in modules else base)
        edges[module] = {m for m in found if m in modules and m != module}
    return edges


def _level(module: str) -> int:
    for level, prefixes in enumerate(LEVELS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    return len(LEVELS)  # kbert itself, kbert.demo, kbert.__main__: the top


def test_no_upward_import():
    edges = _imports(_modules())
    upward = sorted(f"{m} -> {t}" for m, targets in edges.items() for t in targets
                    if _level(t) > _level(m))
    assert upward == []


def test_no_import_cycle():
    edges = _imports(_modules())
    cycles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_walker_sees_lazy_and_relative_imports():
    """The checks above would pass on an empty graph: the walker finds an import made
    inside a function and resolves a relative one."""
    edges = _imports(_modules())
    assert "kbert.models.generation" in edges["kbert.models.generative"]  # in a method
    assert "kbert.models.registry" in edges["kbert.export.folder"]
    assert _level("kbert.export.folder") > _level("kbert.models.registry")


def test_tasks_and_exports_dispatch_on_no_family():
    """No `== "bert"`-style comparison, no family class or family module imported, in
    kbert/tasks and kbert/export (family names stay in docs and help text)."""
    family = r"(bert|gpt|elmo|roberta)"
    patterns = [re.compile(rf"""[=!]=\s*["']{family}["']""", re.I),
                re.compile(rf"""["']{family}["']\s*[=!]=""", re.I),
                re.compile(r"import .*\b(Bert|GPT|ELMo|Elmo|Roberta)\w*\b"),
                re.compile(rf"from kbert\.(models|tokenizers)\.{family}\b", re.I)]
    hits = []
    for module, path in _modules().items():
        if not module.startswith(("kbert.tasks", "kbert.export")):
            continue
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if any(p.search(line) for p in patterns):
                    hits.append(f"{module}:{number}: {line.strip()}")
    assert hits == []


def test_no_private_name_crosses_modules():
    """No `from kbert.x import _name`, and no `module._name` on an imported kbert module
    (a private name is its module's own; kbert._lazy and kbert._startup, private
    modules of the package itself, are imported by name)."""
    modules = _modules()
    hits = []
    for module, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        aliases = {}  # local name -> kbert module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kbert"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in modules:
                        aliases[alias.asname or alias.name] = full
                    elif alias.name.startswith("_"):
                        hits.append(f"{module}: from {node.module} import {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("kbert") and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                    and node.value.id in aliases):
                hits.append(f"{module}: {node.value.id}.{node.attr}")
    assert hits == []


def test_marks_are_on_tests():
    """A `pytest.mark` on a helper marks nothing: 820b0cd moved test_readme's `e2e` onto
    the helper it extracted, and the README's GPT example ran in `make test-fast`."""
    tests = os.path.dirname(os.path.abspath(__file__))
    misplaced = []
    for name in sorted(os.listdir(tests)):
        if not name.endswith(".py"):
            continue
        path = os.path.join(tests, name)
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if (ast.unparse(target).startswith("pytest.mark.")
                        and not node.name.startswith("test")):
                    misplaced.append(f"{name}:{node.lineno} {node.name}")
    assert not misplaced, misplaced
