"""The runtime flags every kbert command line shares. No TensorFlow here: the parsers
are built, and `--help` answered, before TensorFlow is imported."""

from __future__ import annotations

import argparse

STRATEGIES = ("auto", "cpu", "gpu", "mirrored", "multi_worker", "tpu")


def add_runtime_flags(parser: argparse.ArgumentParser) -> None:
    """Adds --strategy, --tpu, --mixed_precision, --jit_compile, --steps_per_execution."""
    group = parser.add_argument_group("runtime")
    group.add_argument("--strategy", default="auto", choices=STRATEGIES,
                       help="tf.distribute strategy: auto (TPU if --tpu, all GPUs if several, "
                            "else default), cpu, gpu, mirrored, multi_worker (TF_CONFIG), tpu")
    group.add_argument("--tpu", default=None, help="TPU name or grpc:// address")
    group.add_argument("--mixed_precision", nargs="?", const="auto", default=None,
                       choices=["auto", "mixed_float16", "mixed_bfloat16", "float32"],
                       help="mixed precision; bare flag: float16 on GPU, bfloat16 on TPU/CPU")
    group.add_argument("--jit_compile", action="store_true",
                       help="compile the training step with XLA (an error if Keras cannot)")
    group.add_argument("--steps_per_execution", type=int, default=1,
                       help="training steps per call of the compiled step (TPUs like 100+)")
