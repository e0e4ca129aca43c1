"""Training runtime: strategies, precision, optimizers, resumable fit."""

from kbert.training.distribute import (ENCODER_INPUTS, STRATEGIES, finalize_dataset,
                                      real_tokens_per_batch, resolve_strategy, trim_padding)
from kbert.training.loop import (Progress, Throughput, compile_model, fit, latest_step,
                                 prune_checkpoints, whole_loops)
from kbert.training.optimization import (NO_DECAY_NAMES, AdamW, Lamb, WarmupLinearDecay,
                                        create_optimizer)
from kbert.training.precision import set_precision
from kbert.training.runtime import Runtime, add_runtime_flags

__all__ = ["ENCODER_INPUTS", "NO_DECAY_NAMES", "AdamW", "Lamb", "Progress", "STRATEGIES",
           "Throughput", "WarmupLinearDecay", "compile_model", "create_optimizer",
           "finalize_dataset", "fit", "latest_step", "real_tokens_per_batch",
           "resolve_strategy", "Runtime", "add_runtime_flags", "prune_checkpoints",
           "set_precision", "trim_padding", "whole_loops"]
