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


def convert(tensors: dict[str, np.ndarray], rules: Sequence[Rule],
            shapes: dict[str, tuple], source: str, model: str = "the model",
            owned: Callable[[str], bool] = lambda key: True,
            display: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """Applies `rules` to `tensors`; returns {target: value}.

    Args:
        tensors: the checkpoint's tensors by (normalized) name.
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
    display = display or {}
    name = lambda key: display.get(key, key)  # noqa: E731
    values, problems, used = {}, [], set()
    for rule in rules:
        missing = [s for s in rule.sources if s not in tensors]
        used.update(rule.sources)
        if missing:
            problems += [f"missing variable {name(s)}" + (
                f" (for {rule.target})" if s != rule.target else "") for s in missing]
            continue
        try:
            value = rule.hook([tensors[s] for s in rule.sources])
        except ValueError as e:
            problems.append(f"variable {', '.join(map(name, rule.sources))}: {e}")
            continue
        want = tuple(shapes[rule.target])
        if tuple(value.shape) != want:
            problems.append(f"variable {', '.join(map(name, rule.sources))} has shape "
                            f"{tuple(value.shape)}, expected {want}")
            continue
        values[rule.target] = value
    ignored = []
    for key in tensors:
        if key in used:
            continue
        if owned(key):
            problems.append(f"unexpected variable {name(key)}")
        else:
            ignored.append(name(key))
    if ignored:  # one line (a Hugging Face BERT load listed its 7 cls.* heads one a line)
        logger.info("%s: ignoring %d tensor(s) not part of %s: %s%s", source, len(ignored),
                    model, ", ".join(ignored[:4]), ", ..." if len(ignored) > 4 else "")
    if problems:
        raise ValueError(f"{source}: cannot load into {model}:\n  " + "\n  ".join(problems))
    return values


def assign(variables: dict, values: dict[str, np.ndarray]) -> None:
    """Copies each value into the variable of the same name, in its dtype."""
    for target, value in values.items():
        var = variables[target]
        var.assign(np.asarray(value, dtype=var.dtype))
