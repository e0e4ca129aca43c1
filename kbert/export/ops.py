"""Which op types a stock `tensorflow_model_server` can run, and the ops a SavedModel uses.

The stock server of release X links TensorFlow X's kernels plus the tensorflow-text
`ops_lib` that its workspace pins: tensorflow-text 2.12.1 for TF Serving 2.12 to 2.19,
the matching release for 2.20 and 2.21. tensorflow-text ops newer than 2.12.1
(`TFText>RoundRobinTrim` among them: tensorflow/serving#2267) are missing from those
servers, so a model that uses one fails to load there with "Op type not registered".

Both sets are read from the releases themselves: `op_tables/` holds, for every
TensorFlow release 2.12 ... 2.21 and every pinned tensorflow-text release, the op
registry that release's wheel registers (`TF_GetAllOpList`), each op with its attrs,
written by `tools/serving_op_tables.py`. A SavedModel passes for release X when each op
it uses is registered there and each attr a node sets is one that release's op has (a
newer attr set to a non-default value fails to load on an older server; TensorFlow
strips default-valued attrs when it saves). Ops whose kernels live in the Python
runtime (`tf.py_function`, `tf.numpy_function`) never pass: a server has no Python.
"""

from __future__ import annotations

import functools
import os

from kbert import internals

SERVING_VERSIONS = ("2.12", "2.13", "2.14", "2.15", "2.16", "2.17", "2.18", "2.19", "2.20",
                    "2.21")
DEFAULT_SERVING_VERSION = SERVING_VERSIONS[-1]
# TF Serving release -> the tensorflow-text release its workspace.bzl pins (2.21: the
# table of 2.21.1, as tools/serving_op_tables.py says why).
TEXT_PINS = {**{v: "2.12.1" for v in SERVING_VERSIONS if v < "2.20"},
             "2.20": "2.20.0", "2.21": "2.21.1"}
# Registered in TensorFlow's op registry, but run by the Python interpreter.
PYTHON_ONLY_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
_TABLES = os.path.join(os.path.dirname(__file__), "op_tables")


@functools.lru_cache(maxsize=None)
def read_table(name: str) -> dict[str, frozenset[str]]:
    """op_tables/<name>.txt: op type -> the names of its attrs."""
    path = os.path.join(_TABLES, f"{name}.txt")
    ops = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                op, *attrs = line.split()
                ops[op] = frozenset(attrs)
    return ops


def _known(serving_version: str) -> None:
    if serving_version not in SERVING_VERSIONS:
        raise ValueError(f"--serving_version {serving_version!r}: known versions are "
                         f"{', '.join(SERVING_VERSIONS)}")


def core_ops(serving_version: str) -> dict[str, frozenset[str]]:
    """The op registry of the TensorFlow that TF Serving `serving_version` is built on,
    less the Python-only ops."""
    _known(serving_version)
    table = read_table(f"tensorflow-{serving_version}")
    return {op: attrs for op, attrs in table.items() if op not in PYTHON_ONLY_OPS}


def text_ops(serving_version: str) -> dict[str, frozenset[str]]:
    """The tensorflow-text ops linked by the stock server of `serving_version`."""
    _known(serving_version)
    return read_table(f"tensorflow-text-{TEXT_PINS[serving_version]}")


def serving_op_defs(serving_version: str = DEFAULT_SERVING_VERSION) -> dict:
    """Op type -> attr names, for every op the stock server of `serving_version` runs."""
    return {**core_ops(serving_version), **text_ops(serving_version)}


def serving_ops(serving_version: str = DEFAULT_SERVING_VERSION) -> frozenset:
    """Op types the stock `tensorflow_model_server` of `serving_version` can run."""
    return frozenset(serving_op_defs(serving_version))


def _saved_model(export_dir: str):
    """saved_model.pb of `export_dir`, parsed once for the checks that read it in turn
    (kept while the file is unchanged: its path, size and modification time). Read
    only."""
    path = os.path.join(export_dir, "saved_model.pb")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{export_dir}: no saved_model.pb (not a SavedModel folder)")
    stat = os.stat(path)
    return _parsed(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=2)
def _parsed(path: str, size: int, mtime_ns: int):
    return internals.read_saved_model_proto(path)


def _nodes(export_dir: str):
    """(node, function name or "graph") for every node of saved_model.pb, and the names
    of the library functions (their calls appear as ops named after them)."""
    sm = _saved_model(export_dir)
    nodes = []
    for meta in sm.meta_graphs:
        nodes += [(node, "graph") for node in meta.graph_def.node]
        for fn in meta.graph_def.library.function:
            nodes += [(node, fn.signature.name) for node in fn.node_def]
    functions = {fn.signature.name for meta in sm.meta_graphs
                 for fn in meta.graph_def.library.function}
    return nodes, functions


def saved_model_ops(export_dir: str) -> dict[str, set[str]]:
    """Op type -> names of the functions (or "graph") using it, from saved_model.pb."""
    nodes, functions = _nodes(export_dir)
    used: dict[str, set[str]] = {}
    for node, where in nodes:
        if node.op not in functions:
            used.setdefault(node.op, set()).add(where)
    return used


def missing_ops(export_dir: str, serving_version: str = DEFAULT_SERVING_VERSION) -> dict:
    """What of the SavedModel the target server lacks: op type (or "Op.attr" for an attr
    that op has no such attr there) -> the functions using it."""
    defs = serving_op_defs(serving_version)
    nodes, functions = _nodes(export_dir)
    missing: dict[str, set[str]] = {}
    for node, where in nodes:
        if node.op in functions:
            continue
        if node.op not in defs:
            missing.setdefault(node.op, set()).add(where)
            continue
        for attr in node.attr:  # "_"-prefixed attrs are the runtime's own
            if not attr.startswith("_") and attr not in defs[node.op]:
                missing.setdefault(f"{node.op}.{attr}", set()).add(where)
    return dict(sorted(missing.items()))


# Attrs that only label a node for debugging. Newer TensorFlow writes them (TF 2.15
# added VarHandleOp's `debug_name`, the variable's path); an older server's op has no
# such attr and refuses the whole graph ("NodeDef mentions attr 'debug_name' not in
# Op"). An export for an older release leaves them out: the graph computes the same.
INFORMATIONAL_ATTRS = {"VarHandleOp": frozenset({"debug_name"})}


def strip_for_release(export_dir: str, serving_version: str) -> list[str]:
    """Removes from `export_dir`'s saved_model.pb the INFORMATIONAL_ATTRS that the ops of
    `serving_version` do not have; returns them ("Op.attr", sorted). Called on the
    export's temporary folder, before the op check."""
    defs = serving_op_defs(serving_version)
    path = os.path.join(export_dir, "saved_model.pb")
    sm = internals.read_saved_model_proto(path)
    removed = set()
    for meta in sm.meta_graphs:
        nodes = [*meta.graph_def.node, *(node for fn in meta.graph_def.library.function
                                         for node in fn.node_def)]
        for node in nodes:
            for attr in INFORMATIONAL_ATTRS.get(node.op, frozenset()):
                if attr in node.attr and attr not in defs.get(node.op, frozenset()):
                    del node.attr[attr]
                    removed.add(f"{node.op}.{attr}")
    if removed:
        with open(path, "wb") as f:
            f.write(sm.SerializeToString())
    return sorted(removed)


def reexport_hint(missing: dict, serving_version: str) -> str:
    """"; export again ..." when what `serving_version` lacks is only an attr the
    exporter leaves out for that release (INFORMATIONAL_ATTRS), else ""."""
    if any(op.split(".")[0] in INFORMATIONAL_ATTRS for op in missing):
        return (f"; export again with --serving_version {serving_version}, which leaves "
                "out the attrs that release lacks")
    return ""


class UnsupportedOpError(ValueError):
    pass


def _compiled_functions(export_dir: str) -> set[str]:
    """Names of the library functions XLA compiles: those marked `_XlaMustCompile` or
    called by a node so marked (`jit_compile=True`), and every function they reach (the
    loops' bodies and conditions, the branches, the calls within)."""
    sm = _saved_model(export_dir)
    library = {fn.signature.name: fn for meta in sm.meta_graphs
               for fn in meta.graph_def.library.function}

    def marked(attrs):
        return "_XlaMustCompile" in attrs and attrs["_XlaMustCompile"].b

    def called(node):
        names = [node.op] if node.op in library else []
        for value in node.attr.values():
            names += [value.func.name] if value.func.name else []
            names += [f.name for f in value.list.func]
        return [n for n in names if n in library]

    todo = [name for name, fn in library.items() if marked(fn.attr)]
    nodes = [node for meta in sm.meta_graphs for node in meta.graph_def.node]
    nodes += [node for fn in library.values() for node in fn.node_def]
    todo += [name for node in nodes if marked(node.attr) for name in called(node)]
    compiled: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in compiled:
            compiled.add(name)
            todo += [n for node in library[name].node_def for n in called(node)]
    return compiled


def needs_xla(export_dir: str) -> bool:
    """Whether the SavedModel holds functions XLA compiles (`export_generate(...,
    jit_compile=True)`), which TF Serving runs only when started with
    --xla_cpu_compilation_enabled=true. False where there is no saved_model.pb."""
    if not os.path.exists(os.path.join(export_dir, "saved_model.pb")):
        return False
    return bool(_compiled_functions(export_dir))


def xla_only_ops(export_dir: str) -> dict[str, set[str]]:
    """XLA's own ops (`Xla*`: `XlaDynamicUpdateSlice`, `XlaOptimizationBarrier`, ...)
    outside the functions XLA compiles: op type -> the functions using them. They have no
    kernel of their own; a plain graph runs them by compiling them with XLA on demand,
    which `tensorflow_model_server` disables unless started with
    `--xla_cpu_compilation_enabled=true`."""
    compiled = _compiled_functions(export_dir)
    return {op: where for op, where in saved_model_ops(export_dir).items()
            if op.startswith("Xla") and where - compiled}


def check_ops(export_dir: str, serving_version: str = DEFAULT_SERVING_VERSION) -> set[str]:
    """Raises UnsupportedOpError naming every op the target server lacks; returns the
    op types used."""
    missing = missing_ops(export_dir, serving_version)
    if missing:
        listed = "; ".join(f"{op} (in {', '.join(sorted(where))[:120]})"
                           for op, where in missing.items())
        raise UnsupportedOpError(
            f"{export_dir}: not in the stock tensorflow_model_server {serving_version} "
            f"(TensorFlow {serving_version}, tensorflow-text {TEXT_PINS[serving_version]}): "
            f"{listed}{reexport_hint(missing, serving_version)}")
    plain = xla_only_ops(export_dir)
    if plain:
        listed = "; ".join(f"{op} (in {', '.join(sorted(where))[:120]})"
                           for op, where in sorted(plain.items()))
        raise UnsupportedOpError(
            f"{export_dir}: XLA's own ops outside a function compiled with XLA, which a "
            f"tensorflow_model_server started without --xla_cpu_compilation_enabled "
            f"refuses to run: {listed}")
    return set(saved_model_ops(export_dir))
