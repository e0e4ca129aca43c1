"""A tiny BERT training run, executed in subprocesses by test_training.py.

usage: train_script.py OUT_DIR [--strategy S] [--total_steps N] [--steps_per_loop K]
                               [--checkpoint_dir D] [--step_sleep SECONDS]
Writes OUT_DIR/weights.npz (final weights) and OUT_DIR/losses.txt.
"""

import argparse
import logging
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from kbert import BertConfig, BertEncoder  # noqa: E402
from kbert import training  # noqa: E402


def examples(n=256, seq=12, vocab=50, seed=0):
    rng = np.random.default_rng(seed)
    x = {"token_ids": rng.integers(5, vocab, (n, seq)).astype("int32"),
         "segment_ids": np.zeros((n, seq), "int32"), "padding_mask": np.ones((n, seq), "int32")}
    y = (x["token_ids"][:, 1] > vocab // 2).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y))


def build(dropout, max_positions=16):
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_layers=2, num_heads=2,
                     intermediate_size=24, max_position_embeddings=max_positions,
                     dropout=dropout,
                     attention_dropout=dropout)
    encoder = BertEncoder(cfg)
    # As kbert's classifiers do: the last layer computes the [CLS] position only.
    pooled = encoder.with_output_range(1)(encoder.input)["pooled_output"]
    logits = keras.layers.Dense(2, dtype="float32")(pooled)
    return keras.Model(encoder.input, logits)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    training.add_runtime_flags(p)
    p.add_argument("--total_steps", type=int, default=6)
    p.add_argument("--steps_per_loop", type=int, default=3)
    p.add_argument("--checkpoint_dir")
    p.add_argument("--step_sleep", type=float, default=0.0)
    p.add_argument("--dropout", type=float, default=0.0)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(name)s: %(message)s")
    runtime = training.Runtime.from_flags(args)  # first: before any other TF work
    keras.utils.set_random_seed(0)
    model = runtime.build(lambda: build(args.dropout),
                          lambda: training.create_optimizer(1e-3, args.total_steps, 2),
                          keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = training.finalize_dataset(examples(), 16, training=True, seed=0)
    losses = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(float(logs["loss"]))
            time.sleep(args.step_sleep)

    training.fit(model, data, args.total_steps, args.steps_per_loop,
                 checkpoint_dir=args.checkpoint_dir, callbacks=[Record()], verbose=0)
    os.makedirs(args.out, exist_ok=True)
    np.savez(os.path.join(args.out, "weights.npz"),
             *[v.numpy() for v in model.trainable_variables])
    with open(os.path.join(args.out, "losses.txt"), "w") as f:
        f.write("\n".join(map(str, losses)))
    print("done", flush=True)


if __name__ == "__main__":
    main()
