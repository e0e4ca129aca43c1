"""The runtime flags every kbert command line shares, and building under a strategy."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Callable

import keras
import tensorflow as tf

from kbert.training.distribute import resolve_strategy
from kbert.training.loop import compile_model
from kbert.training.precision import set_precision


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
