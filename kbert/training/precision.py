"""Mixed precision: float16 on GPU (with loss scaling), bfloat16 on TPU and CPU."""

from __future__ import annotations

import keras
import tensorflow as tf

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


def set_precision(mixed_precision: str | bool | None) -> str:
    """Sets Keras' global dtype policy and returns its name.

    Args:
        mixed_precision: None/False/"float32" (off), True/"auto" (float16 on GPU,
            bfloat16 elsewhere), "mixed_float16" or "mixed_bfloat16".

    Variables stay float32 in every policy. kbert's layers compute attention softmax
    and LayerNorm in float32; task heads should emit float32 logits (`dtype="float32"`).
    Under mixed_float16, `model.compile` wraps the optimizer in a LossScaleOptimizer.
    """
    if mixed_precision in (None, False, "float32", "none", "off"):
        name = "float32"
    elif mixed_precision in (True, "auto", "on"):
        name = "mixed_float16" if tf.config.list_logical_devices("GPU") else "mixed_bfloat16"
    elif mixed_precision in POLICIES:
        name = mixed_precision
    else:
        raise ValueError(f"--mixed_precision={mixed_precision!r}: use one of "
                         f"{', '.join(POLICIES)}, auto")
    keras.mixed_precision.set_global_policy(name)
    return name
