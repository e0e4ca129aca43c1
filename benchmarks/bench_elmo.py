"""ELMo benchmarks: the biLM's forward and training throughput (words/s) at a published
size, and how close its arithmetic comes to the matrix-multiply rate of this machine.

1. The matrix-multiply rate, measured here: a large square float32 `tf.matmul` (the
   machine's peak) and the matmul of one LSTM step at the benchmark's batch
   ([B, in + P] x [in + P, 4D]), which bounds a sequential LSTM: each time step is one
   such product, and the steps cannot run at once.
2. The biLM forward pass (`ELMo`, stateless, compiled with `tf.function`), words/s and
   GFLOP/s (model FLOPs counted from the config: character CNN, highways, projection,
   both LSTMs; the boundary words included).
3. A training step of `ELMoLanguageModel` (sampled softmax, `--vocab` words,
   `--samples` negatives as bilm-tf's 8,192), words/s and GFLOP/s (3x the forward
   FLOPs, plus the sampled softmax).
4. One LSTM layer over the sequence, kbert's `LSTMLayer` (TF1's `LSTMCell` with a
   projection) against the `keras.layers.LSTM`-based alternative of the same sizes:
   `keras.layers.LSTM(D)` (it has no projection, so its recurrence reads the D-wide
   output, 8x the recurrent work at the `original` size) followed by a `Dense(P)`
   projection; each at its own FLOPs, in GFLOP/s.
Rounds alternate between the measured functions; the median round is reported.

Run: `python benchmarks/bench_elmo.py [--config original --batch 32 --words 20 --rounds 3]`.
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
from kbert.models.elmo.bilm import LSTMLayer  # noqa: E402
from kbert.models.elmo.lm import ELMoLanguageModel  # noqa: E402


def forward_flops_per_position(c: kbert.ELMoConfig) -> dict:
    """Multiply-adds x 2 per sequence position (word or boundary mark)."""
    chars = c.max_characters_per_token
    cnn = sum(2 * (chars - width + 1) * width * c.char_embedding_dim * count
              for width, count in c.filters)
    f = c.num_filters
    highway = c.num_highway * 2 * (2 * f * f)
    projection = 2 * f * c.projection_dim if f != c.projection_dim else 0
    out = min(c.projection_dim, c.lstm_dim)
    lstm = 0
    for i in range(c.num_layers):
        width = (c.projection_dim if i == 0 else out) + out
        lstm += 2 * width * 4 * c.lstm_dim  # gates
        lstm += 2 * c.lstm_dim * out if c.projection_dim < c.lstm_dim else 0  # projection
    return {"char_cnn": cnn + highway + projection, "lstms": 2 * lstm}  # both directions


def matmul_rates(batch: int, c: kbert.ELMoConfig, rounds: int) -> dict:
    out = min(c.projection_dim, c.lstm_dim)
    big = tf.random.normal([2048, 2048])
    x = tf.random.normal([batch, c.projection_dim + out])
    w = tf.random.normal([c.projection_dim + out, 4 * c.lstm_dim])
    reps = 50

    @tf.function
    def square():
        return tf.reduce_sum(tf.matmul(big, big))

    @tf.function
    def step():
        total = tf.constant(0.0)
        for _ in range(reps):  # as many products as LSTM steps, one after another
            total += tf.reduce_sum(tf.matmul(x + total * 0.0, w))
        return total

    seconds = median_seconds({"square": square, "lstm_step": step}, rounds)
    return {"square_2048_gflops": 2 * 2048 ** 3 / seconds["square"] / 1e9,
            "lstm_step_gflops": reps * 2 * x.shape[0] * x.shape[1] * w.shape[1]
            / seconds["lstm_step"] / 1e9}


def bench_bilm(c: kbert.ELMoConfig, batch: int, words: int, vocab: int, samples: int,
               rounds: int) -> dict:
    keras.utils.set_random_seed(0)
    elmo = kbert.ELMo(c)
    rng = np.random.default_rng(0)
    char_ids = rng.integers(1, 261, (batch, words, c.max_characters_per_token)).astype("int32")
    inputs = {"char_ids": tf.constant(char_ids), "padding_mask": tf.ones([batch, words],
                                                                          tf.int32)}
    forward = tf.function(lambda: elmo(inputs)["hidden_states"][-1])
    lm = ELMoLanguageModel(elmo, vocab, 1, 0, num_sampled=samples)
    lm.compile(optimizer=keras.optimizers.Adagrad(0.2, initial_accumulator_value=1.0))
    targets = {"word_ids": tf.constant(rng.integers(3, vocab, (batch, words)).astype("int32"))}
    data = tf.data.Dataset.from_tensors((inputs, targets)).repeat()
    iterator = iter(data)
    lm.fit(data, steps_per_epoch=1, epochs=1, verbose=0)  # builds and compiles the step
    step = lm.make_train_function()

    seconds = median_seconds({"forward": lambda: forward().numpy(),
                               "train": lambda: float(step(iterator)["loss"])}, rounds)
    per = forward_flops_per_position(c)
    positions = batch * (words + 2)
    forward_flops = positions * (per["char_cnn"] + per["lstms"])
    dim = min(c.projection_dim, c.lstm_dim)
    # Sampled softmax: each direction scores every position against its target and the
    # shared samples (forward and backward products).
    softmax = 2 * positions * 2 * dim * (samples + 1) * 3
    return {"forward_words_per_s": batch * words / seconds["forward"],
            "forward_gflops": forward_flops / seconds["forward"] / 1e9,
            "train_words_per_s": batch * words / seconds["train"],
            "train_gflops": (3 * forward_flops + softmax) / seconds["train"] / 1e9,
            "forward_mflop_per_word": (per["char_cnn"] + per["lstms"]) / 1e6}


def bench_lstm_layer(c: kbert.ELMoConfig, batch: int, words: int, rounds: int) -> dict:
    keras.utils.set_random_seed(0)
    steps = words + 2
    x = tf.random.normal([batch, steps, c.projection_dim])
    mask = tf.ones([batch, steps], bool)
    out = min(c.projection_dim, c.lstm_dim)
    ours = LSTMLayer(c, c.projection_dim)
    init = (tf.zeros([batch, c.lstm_dim]), tf.zeros([batch, out]))
    ours(x, mask, init)
    keras_lstm = keras.Sequential([keras.layers.LSTM(c.lstm_dim, return_sequences=True),
                                   keras.layers.Dense(out)])
    keras_lstm(x)
    run_ours = tf.function(lambda: ours(x, mask, init)[0])
    run_keras = tf.function(lambda: keras_lstm(x))
    seconds = median_seconds({"kbert": lambda: run_ours().numpy(),
                               "keras": lambda: run_keras().numpy()}, rounds)
    ours_flops = batch * steps * 2 * ((c.projection_dim + out) * 4 * c.lstm_dim
                                      + c.lstm_dim * out)
    keras_flops = batch * steps * 2 * ((c.projection_dim + c.lstm_dim) * 4 * c.lstm_dim
                                       + c.lstm_dim * out)
    return {"kbert_LSTMLayer_ms": 1e3 * seconds["kbert"],
            "kbert_LSTMLayer_gflops": ours_flops / seconds["kbert"] / 1e9,
            "keras_LSTM_plus_Dense_ms": 1e3 * seconds["keras"],
            "keras_LSTM_plus_Dense_gflops": keras_flops / seconds["keras"] / 1e9}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="original", help="ELMoConfig preset")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--words", type=int, default=20, help="words a sentence (bilm-tf "
                                                          "trained on 20-word windows)")
    p.add_argument("--vocab", type=int, default=100_000)
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    c = kbert.ELMoConfig.preset(args.config)
    rates = matmul_rates(args.batch, c, args.rounds)
    bilm = bench_bilm(c, args.batch, args.words, args.vocab, args.samples, args.rounds)
    layer = bench_lstm_layer(c, args.batch, args.words, args.rounds)
    report = {
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or None,
                    "tensorflow": tf.__version__},
        "settings": vars(args), "matmul": rates, "bilm": bilm, "lstm_layer": layer,
        "fraction_of_lstm_step_matmul_rate": {
            "forward": bilm["forward_gflops"] / rates["lstm_step_gflops"],
            "train": bilm["train_gflops"] / rates["lstm_step_gflops"],
            "kbert_LSTMLayer": layer["kbert_LSTMLayer_gflops"] / rates["lstm_step_gflops"],
            "keras_LSTM_plus_Dense": layer["keras_LSTM_plus_Dense_gflops"]
            / rates["lstm_step_gflops"]}}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
