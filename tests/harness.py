"""The checks every public layer and model goes through (as keras-hub's test case):

- `get_config` names every `__init__` parameter and round-trips through `from_config`;
- eager and symbolic calls give the expected output shapes and dtypes;
- a functional model around it saves to `.keras` and loads with identical outputs;
- under `mixed_bfloat16` (and `mixed_float16`) its variables stay float32, its outputs
  take the policy's compute dtype (float32 where the layer says so) and stay close
  to the float32 outputs with the same weights;
- a golden number: with every weight set by a fixed formula, the outputs' sum and
  first values equal those recorded in the case.

A new layer or model class gets all of this by adding one `Case` to
`tests/test_harness.py`.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

import keras
import numpy as np


@dataclasses.dataclass
class Case:
    """One class under test.

    Attributes:
        cls: the layer or model class.
        kwargs: constructor arguments.
        inputs: name -> numpy array (batch first); `call(layer, inputs)` calls the layer.
        call: how to call the layer on a dict of inputs (numpy or symbolic).
        shapes: the expected output shape (or a dict/list of them, as the outputs).
        golden: (sum of all outputs, first three values of the first output), with
            weights set by `deterministic_weights`.
        mixed_dtype: the outputs' dtype under `mixed_bfloat16` ("bfloat16", or
            "float32" for layers that compute their outputs in float32).
        mixed_tolerance: max abs difference to the float32 outputs under bfloat16.
    """

    cls: type
    kwargs: dict
    inputs: dict[str, np.ndarray]
    call: Callable[[Any, dict], Any]
    shapes: Any
    golden: tuple[float, tuple[float, ...]] | None = None
    mixed_dtype: str = "bfloat16"
    mixed_tolerance: float = 0.1

    @property
    def id(self) -> str:
        return self.cls.__name__


def flat(outputs) -> list[np.ndarray]:
    """Every output tensor, in a fixed order, as numpy."""
    if isinstance(outputs, dict):
        return [a for k in sorted(outputs) for a in flat(outputs[k])]
    if isinstance(outputs, (list, tuple)):
        return [a for o in outputs for a in flat(o)]
    return [np.asarray(outputs)]


def shapes_of(outputs):
    if isinstance(outputs, dict):
        return {k: shapes_of(v) for k, v in outputs.items()}
    if isinstance(outputs, (list, tuple)):
        return [shapes_of(o) for o in outputs]
    return tuple(outputs.shape)


def deterministic_weights(layer) -> None:
    """Sets every weight by a fixed formula, so a golden number does not depend on any
    random initializer: w_i = 0.5 sin(0.37 i + k) (+ 1 for LayerNorm scales)."""
    for k, w in enumerate(sorted(layer.weights, key=lambda v: v.path)):
        n = int(np.prod(w.shape))
        values = 0.5 * np.sin(0.37 * np.arange(n) + k).reshape(w.shape)
        if w.path.endswith("gamma"):
            values = values + 1.0
        w.assign(values.astype(w.dtype))


def build(case: Case, dtype=None):
    return case.cls(**case.kwargs, **({} if dtype is None else {"dtype": dtype}))


def symbolic_inputs(case: Case) -> dict:
    return {name: keras.Input(shape=a.shape[1:], dtype=str(a.dtype), name=name)
            for name, a in case.inputs.items()}


def check_config(case: Case) -> None:
    layer = build(case)
    # The class's own constructor (an inherited Keras one, as TokenEmbedding's, is
    # Keras' business); private parameters (`_layers_from`, weight sharing) excluded.
    own = "__init__" in case.cls.__dict__
    params = [p for p in inspect.signature(case.cls.__init__).parameters
              if own and p not in ("self", "kwargs", "args") and not p.startswith("_")]
    config = layer.get_config()
    missing = [p for p in params if p not in config]
    assert not missing, f"{case.id}.get_config() lacks {missing}"
    clone = case.cls.from_config(config)
    assert clone.get_config() == config


def check_calls(case: Case) -> list[np.ndarray]:
    layer = build(case)
    out = case.call(layer, case.inputs)
    assert shapes_of(out) == case.shapes, (case.id, shapes_of(out))
    for a in flat(out):
        assert a.dtype == np.float32 or a.dtype.kind in "iub", (case.id, a.dtype)
    # Symbolic call: the same shapes, with unknown (None) dimensions where the
    # batch (or a length) is not fixed by the inputs.
    symbolic = shapes_of(case.call(build(case), symbolic_inputs(case)))
    for got, want in zip(_leaves(symbolic), _leaves(case.shapes), strict=True):
        assert len(got) == len(want) and all(g is None or g == w for g, w in zip(got, want)), \
            (case.id, got, want)
    return flat(out)


def _leaves(shapes):
    if isinstance(shapes, dict):
        return [x for k in sorted(shapes) for x in _leaves(shapes[k])]
    if isinstance(shapes, list):
        return [x for s in shapes for x in _leaves(s)]
    return [shapes]


def check_keras_save_load(case: Case, tmp_path) -> None:
    layer = build(case)
    inputs = symbolic_inputs(case)
    model = keras.Model(inputs, case.call(layer, inputs))
    want = flat(model(case.inputs))
    path = tmp_path / f"{case.id}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    for a, b in zip(want, flat(loaded(case.inputs))):
        np.testing.assert_array_equal(a, b, err_msg=case.id)


def check_mixed_precision(case: Case) -> None:
    reference = build(case)
    want = flat(case.call(reference, case.inputs))
    for policy, compute in (("mixed_bfloat16", "bfloat16"), ("mixed_float16", "float16")):
        layer = build(case, dtype=policy)
        case.call(layer, case.inputs)  # builds the variables
        assert all(w.dtype == "float32" for w in layer.weights), (case.id, policy)
        for w, r in zip(sorted(layer.weights, key=lambda v: v.path),
                        sorted(reference.weights, key=lambda v: v.path)):
            w.assign(r.numpy())
        got = flat(case.call(layer, case.inputs))
        expected = compute if case.mixed_dtype == "bfloat16" else "float32"
        for a, b in zip(got, want):
            if b.dtype.kind == "f":
                assert a.dtype == np.dtype(expected) or str(a.dtype) == expected, \
                    (case.id, policy, a.dtype)
                np.testing.assert_allclose(a.astype("float32"), b, atol=case.mixed_tolerance,
                                           rtol=0.05, err_msg=f"{case.id} {policy}")


def check_golden(case: Case) -> None:
    layer = build(case)
    case.call(layer, case.inputs)
    deterministic_weights(layer)
    out = flat(case.call(layer, case.inputs))
    total = float(sum(np.sum(a.astype("float64")) for a in out))
    first = tuple(float(x) for x in out[0].reshape(-1)[:3])
    want_total, want_first = case.golden
    np.testing.assert_allclose(total, want_total, rtol=1e-4, atol=1e-4, err_msg=case.id)
    np.testing.assert_allclose(first, want_first, rtol=1e-4, atol=1e-5, err_msg=case.id)
