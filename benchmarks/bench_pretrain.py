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

Run: `python benchmarks/bench_pretrain.py [--preset mini --batch 16 --seq 128 --rounds 3]`.
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


def _optimizer():
    optimizer = keras.optimizers.AdamW(training.WarmupLinearDecay(1e-4, 10**6, 0),
                                       weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=training.NO_DECAY_NAMES)
    return optimizer


def build(config: kbert.BertConfig):
    import keras_hub

    ours = kbert.BertPretrainer(kbert.BertEncoder(config))
    ours.compile(optimizer=_optimizer())
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.dropout,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)
    theirs = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    theirs.compile(optimizer=_optimizer(),
                   loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   weighted_metrics=[])
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


def bench(config, batch, seq, predictions, steps, rounds):
    ours, theirs = build(config)
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
    args = p.parse_args(argv)
    config = kbert.BertConfig.preset(args.preset, vocab_size=args.vocab, dropout=0.1)
    rates = bench(config, args.batch, args.seq, args.predictions, args.steps, args.rounds)
    print(json.dumps({
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or None,
                    "tensorflow": tf.__version__},
        "settings": vars(args), "tokens_per_s": rates,
        "kbert_over_keras_hub": rates["kbert"] / rates["keras-hub"]}, indent=2))


if __name__ == "__main__":
    main()
