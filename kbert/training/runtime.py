"""The runtime flags every kbert command line shares, and building under a strategy."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Callable

import keras
import tensorflow as tf

from kbert.training.distribute import STRATEGIES, resolve_strategy
from kbert.training.loop import compile_model
from kbert.training.precision import set_precision


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


@dataclasses.dataclass
class Runtime:
    strategy: tf.distribute.Strategy
    precision: str
    jit_compile: bool
    steps_per_execution: int

    @classmethod
    def from_flags(cls, args: argparse.Namespace) -> "Runtime":
        """Resolves the flags; call it first in main(), before other TensorFlow work."""
        strategy = resolve_strategy(args.strategy, args.tpu)
        precision = set_precision(args.mixed_precision)
        return cls(strategy, precision, args.jit_compile, args.steps_per_execution)

    def build(self, build_model: Callable[[], keras.Model],
              build_optimizer: Callable[[], keras.optimizers.Optimizer], loss,
              metrics=None, loss_weights=None) -> keras.Model:
        """Builds and compiles the model and its optimizer under the strategy's scope."""
        with self.strategy.scope():
            model = build_model()
            compile_model(model, build_optimizer(), loss, metrics, self.jit_compile,
                          self.steps_per_execution, loss_weights)
        return model
