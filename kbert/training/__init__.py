"""Training runtime: strategies, precision, optimizers, resumable fit."""

from kbert._lazy import lazy_package

# Imported on first use (kbert._lazy): the command lines answer --help before
# TensorFlow is imported.
_EXPORTS = {
    "AdamW": "kbert.training.optimization",
    "BestModel": "kbert.training.evaluation",
    "ENCODER_INPUTS": "kbert.training.distribute",
    "Lamb": "kbert.training.optimization",
    "NO_DECAY_NAMES": "kbert.training.optimization",
    "Progress": "kbert.training.loop",
    "Runtime": "kbert.training.runtime",
    "STRATEGIES": "kbert.training.flags",
    "Throughput": "kbert.training.loop",
    "WarmupLinearDecay": "kbert.training.optimization",
    "add_runtime_flags": "kbert.training.flags",
    "compile_model": "kbert.training.loop",
    "create_optimizer": "kbert.training.optimization",
    "eval_interval": "kbert.training.evaluation",
    "finalize_dataset": "kbert.training.distribute",
    "fit": "kbert.training.loop",
    "latest_step": "kbert.training.loop",
    "prune_checkpoints": "kbert.training.loop",
    "real_tokens_per_batch": "kbert.training.distribute",
    "resolve_strategy": "kbert.training.distribute",
    "set_precision": "kbert.training.precision",
    "trim_padding": "kbert.training.distribute",
    "whole_loops": "kbert.training.loop",
    "train_steps": "kbert.training.loop",
}
lazy_package(__name__, _EXPORTS)
