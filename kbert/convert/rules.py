"""Name tables with per-tensor hooks, applied with errors that name the variable.

A family describes each of its variables by a `Rule`: the target (the family's own
canonical name), the source tensors it is made from, and a hook that turns them into
the target's value (identity, transpose, one part of a fused tensor, reordered LSTM
gates, ...). `convert` checks every rule and reports every missing, unexpected or
mis-shaped variable at once; `assign` copies the values into the model.

    rules = [Rule("bert/pooler/dense/kernel", ("pooler.dense.weight",), transpose)]
    values = convert(tensors, rules, shapes, source="model.safetensors")
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Callable, Sequence

import numpy as np

logger = logging.getLogger(__name__)

Hook = Callable[[Sequence[np.ndarray]], np.ndarray]


def identity(arrays: Sequence[np.ndarray]) -> np.ndarray:
    (a,) = arrays
    return a


def transpose(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """A PyTorch `Linear` weight [out, in] -> a Keras kernel [in, out]."""
    (a,) = arrays
    return a.T


def split(parts: int, index: int, axis: int = -1) -> Hook:
    """Part `index` of `parts` equal parts along `axis`: GPT-2's fused `c_attn`
    [H, 3H] -> query, key or value [H, H]."""
    def hook(arrays):
        (a,) = arrays
        if a.shape[axis] % parts:
            raise ValueError(f"axis {axis} of shape {a.shape} does not split in {parts}")
        return np.split(a, parts, axis=axis)[index]

    hook.__name__ = f"split({parts}, {index}, axis={axis})"
    return hook


def concat(axis: int = -1) -> Hook:
    """Several sources joined along `axis` (the inverse of `split`)."""
    def hook(arrays):
        return np.concatenate(list(arrays), axis=axis)

    return hook


def reorder_gates(order: Sequence[int], axis: int = -1) -> Hook:
    """The gate blocks of a fused LSTM kernel or bias, reordered: block k of the result
    is block `order[k]` of the source (e.g. TF1's i, j, f, o to another layout)."""
    def hook(arrays):
        (a,) = arrays
        blocks = np.split(a, len(order), axis=axis)
        return np.concatenate([blocks[i] for i in order], axis=axis)

    return hook


@dataclasses.dataclass(frozen=True)
class Rule:
    """One target variable: made by `hook` from the tensors named `sources`."""

    target: str
    sources: tuple[str, ...]
    hook: Hook = identity


def convert(tensors: Mapping[str, np.ndarray], rules: Sequence[Rule],
            shapes: dict[str, tuple], source: str, model: str = "the model",
            owned: Callable[[str], bool] = lambda key: True,
            display: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """Applies `rules` to `tensors`; returns {target: value} (every value at once: a
    loader uses `load_into`, which holds one at a time).

    Args:
        tensors: the checkpoint's tensors by (normalized) name (a dict, or a reader's
            `LazyTensors`).
        rules: one per target variable.
        shapes: target name -> expected shape.
        source: the file or prefix read, for messages.
        model: the model class, for messages.
        owned: which source names belong to the model: an owned name no rule reads is
            an error ("unexpected variable"); others (task heads, optimizer slots) are
            logged and ignored.
        display: normalized name -> the name as stored in the file, for messages.

    Raises:
        ValueError naming every missing, unexpected or mis-shaped variable.
    """
    values: dict[str, np.ndarray] = {}
    _apply(tensors, rules, shapes, source, model, owned, display,
           lambda target, value, exclusive: values.__setitem__(target, value))
    return values


def load_into(variables: dict, tensors: Mapping[str, np.ndarray], rules: Sequence[Rule],
              source: str, model: str = "the model",
              owned: Callable[[str], bool] = lambda key: True,
              display: dict[str, str] | None = None) -> None:
    """`convert` and `assign` tensor by tensor: each target is made, checked and copied
    into its variable (in the variable's dtype) before the next is read, so a lazy
    `tensors` (`kbert.convert.readers.LazyTensors`) is never all in memory. `variables`
    is consumed: each entry is removed once assigned, so that a layer quantized while
    loading (`initialization.deferred(quantize=...)`) drops its float kernel. Every
    missing, unexpected or mis-shaped variable is named, as `convert` names them (the
    variables assigned before a mis-shaped one keep their new values: the loaders
    discard a model that failed)."""
    from kbert.convert import initialization

    fresh = getattr(tensors, "fresh", False)
    shapes = {k: tuple(v.shape) for k, v in variables.items()}

    def sink(target, value, exclusive):
        var = variables.pop(target)
        var.assign(_tensor(value, fresh and exclusive))  # cast by TF where dtypes differ
        initialization.provided(var)

    _apply(tensors, rules, shapes, source, model, owned, display, sink)


def _tensor(value: np.ndarray, fresh: bool):
    """`value` as a TensorFlow tensor over 64-byte-aligned memory, with one copy at most:
    none where `value` is fresh memory (a reader's new buffer, or a view of it that no
    other target uses), contiguous and aligned (DLPack hands the buffer over; the
    variable assigned from it keeps it); else one aligned copy, handed over the same
    way (TensorFlow's own conversion of a NumPy array copies once more)."""
    import tensorflow as tf

    from kbert.convert.readers import aligned_bytes

    if value.dtype.kind not in "fiub" or value.dtype.name == "bfloat16" or value.ndim == 0:
        return value
    if not (fresh and value.flags["C_CONTIGUOUS"] and value.ctypes.data % 64 == 0):
        copy = aligned_bytes(value.nbytes).view(value.dtype).reshape(value.shape)
        copy[...] = value
        value = copy
    return tf.experimental.dlpack.from_dlpack(value.__dlpack__())


def _apply(tensors, rules, shapes, source, model, owned, display, sink) -> None:
    display = display or {}
    name = lambda key: display.get(key, key)  # noqa: E731
    used = {s for rule in rules for s in rule.sources}
    unexpected, ignored = [], []
    for key in tensors:
        if key in used:
            continue
        if owned(key):
            unexpected.append(f"unexpected variable {name(key)}")
        else:
            ignored.append(name(key))
    if ignored:  # one line (a Hugging Face BERT load listed its 7 cls.* heads one a line)
        logger.info("%s: ignoring %d tensor(s) not part of %s: %s%s", source, len(ignored),
                    model, ", ".join(ignored[:4]), ", ..." if len(ignored) > 4 else "")
    # Nothing is handed on once a name is wrong; the tensors are still read and checked
    # so that one error names every problem.
    broken = bool(unexpected) or any(s not in tensors for r in rules for s in r.sources)
    # A source read by several rules (GPT-2's fused c_attn: query, key, value) is kept
    # until its last rule has used it, then dropped.
    uses: dict[str, int] = {}
    for rule in rules:
        for s in rule.sources:
            uses[s] = uses.get(s, 0) + 1
    counts = dict(uses)
    held: dict[str, np.ndarray] = {}
    problems = []
    for rule in rules:
        missing = [s for s in rule.sources if s not in tensors]
        if missing:
            problems += [f"missing variable {name(s)}" + (
                f" (for {rule.target})" if s != rule.target else "") for s in missing]
            continue
        arrays = []
        for s in rule.sources:
            arrays.append(held[s] if s in held else tensors[s])
            uses[s] -= 1
            if uses[s]:
                held[s] = arrays[-1]
            else:
                held.pop(s, None)
        try:
            value = rule.hook(arrays)
        except ValueError as e:
            problems.append(f"variable {', '.join(map(name, rule.sources))}: {e}")
            continue
        del arrays
        want = tuple(shapes[rule.target])
        if tuple(value.shape) != want:
            problems.append(f"variable {', '.join(map(name, rule.sources))} has shape "
                            f"{tuple(value.shape)}, expected {want}")
            continue
        if not (broken or problems):
            # `exclusive`: no other target reads these sources (a variable may then take
            # the value's memory over without two variables sharing it)
            sink(rule.target, value, all(counts[s] == 1 for s in rule.sources))
    problems += unexpected
    if problems:
        raise ValueError(f"{source}: cannot load into {model}:\n  " + "\n  ".join(problems))


def assign(variables: dict, values: dict[str, np.ndarray]) -> None:
    """Copies each value into the variable of the same name, in its dtype."""
    from kbert.convert import initialization

    for target, value in values.items():
        var = variables[target]
        var.assign(np.asarray(value, dtype=var.dtype))
        initialization.provided(var)
