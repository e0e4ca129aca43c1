"""The private TensorFlow and Keras APIs kbert relies on, reached in one place.

kbert's fused AdamW overrides hooks of Keras' optimizer, the training loop reads
Keras' layer walk, the op check reads TensorFlow's registered ops and SavedModel
protos, and GPT decoding places XLA optimization barriers (`kbert.layers.dense`).
None of these is a public API, so each is reached through this module, which checks, once, that the running TensorFlow and Keras are the versions it was written
for and that every API it names exists; on others it fails with one clear message
instead of an AttributeError deep in a training step.
"""

from __future__ import annotations

import contextlib
import functools
import threading

# The versions these APIs were written and tested for (setup.cfg pins the same).
TENSORFLOW_VERSIONS = ("2.21.",)
KERAS_MAJOR = 3
KERAS_MIN_MINOR = 10

# Hooks of keras.optimizers.Optimizer that kbert's AdamW overrides or calls.
OPTIMIZER_HOOKS = ("_clip_gradients", "_apply_weight_decay", "_use_weight_decay",
                   "_get_variable_index", "update_step")
# Attributes of a built keras.optimizers.Adam that the fused update reads.
ADAM_STATE = ("_momentums", "_velocities", "_distribution_strategy")


class UnsupportedVersionError(RuntimeError):
    pass


@functools.lru_cache(maxsize=None)
def check() -> None:
    """Raises UnsupportedVersionError naming what is missing, else returns."""
    import keras
    import tensorflow as tf

    problems = []
    if not tf.__version__.startswith(TENSORFLOW_VERSIONS):
        problems.append(f"TensorFlow {tf.__version__} (kbert is written for "
                        f"{', '.join(v + 'x' for v in TENSORFLOW_VERSIONS)})")
    major, minor = (int(x) for x in keras.__version__.split(".")[:2])
    if major != KERAS_MAJOR or minor < KERAS_MIN_MINOR:
        problems.append(f"Keras {keras.__version__} (kbert is written for "
                        f"{KERAS_MAJOR}.{KERAS_MIN_MINOR}+ in the 3.x line)")
    missing = [f"keras.optimizers.Optimizer.{h}" for h in OPTIMIZER_HOOKS
               if not hasattr(keras.optimizers.Optimizer, h)]
    if not hasattr(keras.Model, "_flatten_layers"):
        missing.append("keras.Model._flatten_layers")
    if not hasattr(keras.layers.Layer, "_untrack_variable"):
        missing.append("keras.layers.Layer._untrack_variable")
    adam = keras.optimizers.Adam()
    adam.build([keras.Variable(0.0)])
    missing += [f"keras.optimizers.Adam.{a} (built)" for a in ADAM_STATE
                if not hasattr(adam, a)]
    try:
        tf.__internal__.distribute.interim.maybe_merge_call  # noqa: B018
    except AttributeError:
        missing.append("tf.__internal__.distribute.interim.maybe_merge_call")
    try:
        from tensorflow.compiler.tf2xla.python import xla

        xla.optimization_barrier  # noqa: B018
    except (ImportError, AttributeError):
        missing.append("tensorflow.compiler.tf2xla.python.xla.optimization_barrier")
    try:
        from tensorflow.python.client import pywrap_tf_session

        pywrap_tf_session.TF_GetAllOpList  # noqa: B018
    except (ImportError, AttributeError):
        missing.append("tensorflow.python.client.pywrap_tf_session.TF_GetAllOpList")
    if missing:
        problems.append("missing private APIs: " + ", ".join(missing))
    if problems:
        raise UnsupportedVersionError(
            "kbert's optimizer, training loop and op check use private TensorFlow/Keras "
            "APIs that this installation does not match: " + "; ".join(problems)
            + ". Install the versions in kbert's setup.cfg (tensorflow 2.21, keras 3).")


def flatten_layers(model):
    """Every layer of `model`, nested ones included (Keras' own walk)."""
    check()
    return list(model._flatten_layers())


_collecting = {"depth": 0, "collect": None, "lock": threading.Lock()}


@contextlib.contextmanager
def one_gc_collect():
    """One `gc.collect()` when the outermost of these contexts ends, instead of one for
    every variable Keras drops inside it.

    Keras' `Layer.__delattr__` runs a full `gc.collect()` each time a layer drops a
    variable (quantizing drops each float kernel; merging LoRA drops two adapters). A
    full collection walks every Python object of the process, so its cost grows with
    the process: `quantize("int8")` of MiniLM spent 6.7 of its 7.3 s in 39 of them in a
    fresh process, and three times that after a few dozen tests had run in the same
    process. The dropped variables are freed by reference counting anyway (no cycle
    holds them); the one collection at the end keeps what Keras asked it for. While
    any such context is open, `gc.collect` is a no-op for every thread of the process."""
    import gc

    with _collecting["lock"]:
        if _collecting["depth"] == 0:
            _collecting["collect"] = gc.collect
            gc.collect = _no_collection
        _collecting["depth"] += 1
    try:
        yield
    finally:
        with _collecting["lock"]:
            _collecting["depth"] -= 1
            last = _collecting["depth"] == 0
            if last:
                gc.collect = _collecting["collect"]
        if last:
            gc.collect()


def _no_collection(generation: int = 2) -> int:
    return 0


def merge_lora_into_kernel(layer) -> None:
    """A float Keras `Dense` with LoRA: its kernel becomes W + (alpha / r) A B (what
    Keras' `kernel` property returns while LoRA is on), then the adapters are removed
    (untracked, `lora_rank` cleared, so a saved config does not recreate them)."""
    check()
    import keras

    merged = layer.kernel
    layer._kernel.assign(keras.ops.cast(merged, layer._kernel.dtype))
    adapters = (layer.lora_kernel_a, layer.lora_kernel_b)
    layer.lora_enabled = False
    layer.lora_rank = None
    for variable in adapters:
        layer._untrack_variable(variable)
    with one_gc_collect():
        del layer.lora_kernel_a, layer.lora_kernel_b


def adam_slots(optimizer, index: int):
    """(first moment, second moment) variables of the `index`-th variable of a built
    Keras Adam (or a subclass)."""
    check()
    return optimizer._momentums[index], optimizer._velocities[index]


def optimizer_strategy(optimizer):
    """The `tf.distribute` strategy a Keras optimizer (TensorFlow backend) updates in."""
    check()
    return optimizer._distribution_strategy


def maybe_merge_call(fn, strategy, *args):
    """Runs `fn(strategy, *args)` in a cross-replica context (merge call) when called
    inside a replica, as Keras' optimizers do for their variable updates."""
    import tensorflow as tf

    check()
    return tf.__internal__.distribute.interim.maybe_merge_call(fn, strategy, *args)


def optimization_barrier(x):
    """`x` through an XLA optimization barrier: XLA neither fuses nor moves work across
    it. Only inside a function compiled with XLA (the op has no other kernel)."""
    from tensorflow.compiler.tf2xla.python import xla

    check()
    return xla.optimization_barrier(x)[0]


def registered_op_defs() -> dict:
    """Op type -> OpDef, for every op registered in this TensorFlow process (core and
    loaded libraries)."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api

    check()
    buf = c_api.TF_GetAllOpList()
    try:
        ops = op_def_pb2.OpList()
        ops.ParseFromString(c_api.TF_GetBuffer(buf))
    finally:
        c_api.TF_DeleteBuffer(buf)
    return {op.name: op for op in ops.op}


def registered_op_names() -> set[str]:
    """The op types registered in this TensorFlow process (core and loaded libraries)."""
    return set(registered_op_defs())


def read_saved_model_proto(path: str):
    """`saved_model.pb` parsed into TensorFlow's SavedModel protocol buffer."""
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        sm.ParseFromString(f.read())
    return sm


def dtype_name(enum_value: int) -> str:
    """A DataType enum of a proto (e.g. 7) -> its name without DT_ ("string")."""
    from tensorflow.core.framework import types_pb2

    return types_pb2.DataType.Name(enum_value).removeprefix("DT_").lower()
