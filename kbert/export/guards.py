"""What every signature of an export checks before it runs: the request as TF Serving
hands it over, which checks nothing against the SignatureDef.

- Ranks: TF Serving feeds a tensor of whatever shape the client sent (a `[1, 2]` batch
  of strings into a `[batch]` input); each input's rank is checked in the graph, and a
  wrong one answered with one line naming the input.
- Size: the request's text, counted as a batch is padded (rows x (the longest text's
  bytes + 1), summed over the string inputs), is at most the export's
  `max_request_bytes`, checked before anything is tokenized, so that no request can
  exhaust the server's memory; over it, one line names the inputs and the limit.
  Below it every export's memory grows linearly with that size (outputs are padded to
  the batch's longest text, so the padded size is what memory follows).
- Empty batches: a request of zero rows gets zero rows of every output, of the declared
  dtypes, without running the model.

`guard` wraps a signature's `tf.function` into one with the same inputs (names, dtypes,
shapes) and outputs; `kbert.export.base.write_export` guards every signature it saves.
The checks are graph ops that TensorFlow's optimizer cannot fold away (the rank is read
from the fed tensor, not from the placeholder's declared shape).
"""

from __future__ import annotations

import functools

import tensorflow as tf

# The default limit on a request's text: about 130,000 English words, past SQuAD's and
# CoNLL's longest documents; an export may declare another (`max_request_bytes`).
MAX_REQUEST_BYTES = 1 << 20
LIMITS_FILE = "kbert_limits.json"


def _rank_check(value, spec: tf.TensorSpec, name: str):
    rank = tf.raw_ops.Size(input=tf.raw_ops.Shape(input=value))
    want = spec.shape.rank
    shape = "[batch]" if want == 1 else "[batch, " + ", ".join(
        "n" if d is None else str(d) for d in spec.shape.as_list()[1:]) + "]"
    return tf.debugging.Assert(tf.equal(rank, want), [tf.constant(
        f"{name}: must have rank {want} ({shape}); got rank"), rank],
        name=f"check_rank_{name}")


def _empty_outputs(structured):
    """Zero rows of every output, with its dtype and its other dimensions (0 where
    unknown)."""
    def empty(t):
        if t.shape.rank is None:
            return tf.zeros([0], t.dtype)
        dims = [0] + [0 if d is None else d for d in t.shape.as_list()[1:]]
        return tf.zeros(dims, t.dtype)
    return tf.nest.map_structure(empty, structured)


def guard(function, max_request_bytes: int = MAX_REQUEST_BYTES):
    """`function` (a `tf.function` with an input signature) behind the checks of the
    module docstring."""
    concrete = function.get_concrete_function()
    args, kwargs = concrete.structured_input_signature
    flat_specs = tf.nest.flatten((args, kwargs))
    names = _input_names(function, args, kwargs)
    strings = [n for n, s in zip(names, flat_specs) if s.dtype == tf.string]
    outputs = concrete.structured_outputs

    @functools.wraps(function.python_function)
    def guarded(*call_args, **call_kwargs):
        flat = tf.nest.flatten((call_args, call_kwargs))
        checks = [_rank_check(v, s, n) for v, s, n in zip(flat, flat_specs, names)
                  if s.shape.rank is not None]
        with tf.control_dependencies(checks):
            total = tf.constant(0, tf.int64)
            for v, s in zip(flat, flat_specs):
                if s.dtype == tf.string:
                    lengths = tf.reshape(tf.cast(tf.strings.length(v), tf.int64), [-1])
                    total += tf.size(lengths, out_type=tf.int64) * (
                        tf.reduce_max(tf.concat([lengths, [0]], 0)) + 1)
            checks = [tf.debugging.Assert(total <= max_request_bytes, [tf.constant(
                f"{', '.join(strings)}: the request text (rows x longest text) must be at "
                f"most {max_request_bytes} bytes (max_request_bytes of the export); got"),
                total], name="check_request_bytes")] if strings else []
        with tf.control_dependencies(checks):
            rows = tf.shape(flat[0])[0] if flat_specs[0].shape.rank else tf.constant(1)
        # The function traced above, not `function`: tf.saved_model.save traces the
        # guarded signature again in its own context, where calling `function` would
        # trace the whole signature (tokenizer, model, decoding loop) a second time.
        return tf.cond(rows > 0, lambda: concrete(*call_args, **call_kwargs),
                       lambda: _empty_outputs(outputs))

    # autograph off: the checks need none, and converting the signatures it calls
    # recursively breaks code they trace with autograph off.
    return tf.function(guarded, input_signature=function.input_signature, autograph=False)


def _input_names(function, args, kwargs) -> list[str]:
    """The SignatureDef's name of each flat input: the TensorSpec's name, else the
    argument's (as `tf.saved_model.save` names them)."""
    import inspect

    params = list(inspect.signature(function.python_function).parameters)
    names = []
    for i, arg in enumerate(args):
        for spec in tf.nest.flatten(arg):
            names.append(spec.name or (params[i] if i < len(params) else f"input_{i}"))
    for key, arg in kwargs.items():
        for spec in tf.nest.flatten(arg):
            names.append(spec.name or key)
    return names
