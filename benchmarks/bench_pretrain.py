"""BERT pretraining step, kbert against keras-hub in one process, equal work.

`kbert.BertPretrainer` (masked LM and next sentence, `run_pretraining.py`'s losses)
against keras-hub's `BertMaskedLM` (masked LM only; the next-sentence head is a
[hidden, 2] product on the pooled vector, a negligible share of the step), the same
config, batch, sequence length and `--predictions` masked positions a row, with
keras-hub's `BertBackbone` and `MaskedLMHead` (tied output, its own bias) and the
masked-LM loss weighted as `masked_lm_weights`. Both train with the same AdamW
(warmup-linear schedule, weight decay, clipping); full-length rows (create_data's
records are padded to the sequence length). Tokens/s counts every position of every row.
Rounds alternate between the libraries; the median round is reported.

Model FLOPs (`model_flops_per_step`): a training step costs 6 FLOPs per parameter per
position it is applied to (2 forward, 4 backward), and attention's two products
12 * layers * hidden * seq per token (PaLM's MFU accounting, Chowdhery et al. 2022,
appendix B): the encoder's layers at every position, the masked-LM transform and tied
output layer at the masked positions only, the pooler and next-sentence head once per
row. Embedding lookups count no FLOPs. MFU is that rate over `--peak_tflops`, the
device's dense peak for the step's precision (e.g. 989 for an H100/H200 SXM in bfloat16).

Run: `python benchmarks/bench_pretrain.py [--preset mini --batch 16 --seq 128 --rounds 3]`;
the GPU measurement of the pretraining issue: `--preset base --batch 64 --seq 128
--mixed_precision mixed_bfloat16 --jit_compile --peak_tflops 989`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kbert  # noqa: E402
from _common import median_seconds  # noqa: E402
from kbert import training  # noqa: E402
from kbert.training.precision import POLICIES  # noqa: E402


def _optimizer():
    optimizer = keras.optimizers.AdamW(training.WarmupLinearDecay(1e-4, 10**6, 0),
                                       weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=training.NO_DECAY_NAMES)
    return optimizer


def model_flops_per_step(config: kbert.BertConfig, batch: int, seq: int,
                         predictions: int) -> float:
    """Training FLOPs of one `BertPretrainer` step (see the module docstring)."""
    h, f, layers = config.hidden_size, config.intermediate_size, config.num_layers
    per_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h  # attention, FFN, 2 LNs
    encoder = 6 * layers * per_layer * seq + 12 * layers * h * seq * seq
    masked_lm = 6 * predictions * (h * h + h + 2 * h + h * config.vocab_size
                                   + config.vocab_size)  # transform, LN, output
    heads = 6 * (h * h + h + 2 * h + 2)  # pooler, next sentence
    return float(batch * (encoder + masked_lm + heads))


def build(config: kbert.BertConfig, jit_compile: bool = False):
    import keras_hub

    ours = kbert.BertPretrainer(kbert.BertEncoder(config))
    ours.compile(optimizer=_optimizer(), jit_compile=jit_compile)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.dropout,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)
    theirs = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    theirs.compile(optimizer=_optimizer(),
                   loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   weighted_metrics=[], jit_compile=jit_compile)
    return ours, theirs


def batch_of(config, batch, seq, predictions, seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, config.vocab_size, (batch, seq)).astype("int32")
    segment_ids = (np.arange(seq)[None] >= seq // 2).astype("int32").repeat(batch, 0)
    mask = np.ones((batch, seq), "int32")
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq), predictions, replace=False)
                                  for _ in range(batch)]), axis=1).astype("int32")
    ids = rng.integers(5, config.vocab_size, (batch, predictions)).astype("int32")
    weights = np.ones((batch, predictions), "float32")
    nsp = rng.integers(0, 2, (batch, 1)).astype("int32")
    ours = ({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": mask,
             "masked_lm_positions": positions},
            {"masked_lm_ids": ids, "masked_lm_weights": weights, "next_sentence_labels": nsp})
    theirs = ({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": mask,
               "mask_positions": positions}, ids, weights)
    return ours, theirs


def bench(config, batch, seq, predictions, steps, rounds, jit_compile=False):
    ours, theirs = build(config, jit_compile)
    (x, y), (hx, hy, hw) = batch_of(config, batch, seq, predictions)
    runs = {"kbert": lambda: ours.train_on_batch(x, y),
            "keras-hub": lambda: theirs.train_on_batch(hx, hy, sample_weight=hw)}
    seconds = median_seconds(runs, rounds, warmup=3, repeat=steps)
    return {name: batch * seq / t for name, t in seconds.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="mini", help="BertConfig preset")
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--predictions", type=int, default=20)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--mixed_precision", default="float32", choices=POLICIES)
    p.add_argument("--jit_compile", action="store_true", help="XLA for both models' steps")
    p.add_argument("--peak_tflops", type=float, default=None,
                   help="the device's dense peak in this precision, for MFU")
    args = p.parse_args(argv)
    training.set_precision(args.mixed_precision)
    config = kbert.BertConfig.preset(args.preset, vocab_size=args.vocab, dropout=0.1)
    rates = bench(config, args.batch, args.seq, args.predictions, args.steps, args.rounds,
                  args.jit_compile)
    flops = model_flops_per_step(config, args.batch, args.seq, args.predictions)
    tflops = {name: flops * rate / (args.batch * args.seq) / 1e12
              for name, rate in rates.items()}
    devices = [d.device_type for d in tf.config.list_logical_devices()]
    print(json.dumps({
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or None,
                    "devices": devices, "tensorflow": tf.__version__},
        "settings": vars(args), "tokens_per_s": rates,
        "examples_per_s": {name: rate / args.seq for name, rate in rates.items()},
        "model_tflop_per_step": flops / 1e12, "model_tflops_per_s": tflops,
        "mfu": ({name: t / args.peak_tflops for name, t in tflops.items()}
                if args.peak_tflops else None),
        "kbert_over_keras_hub": rates["kbert"] / rates["keras-hub"]}, indent=2))


if __name__ == "__main__":
    main()
