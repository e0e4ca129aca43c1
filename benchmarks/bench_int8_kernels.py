"""Which int8 matrix product could make an int8 export faster on a CPU (#51 item 4):
one `Dense` of GPT-2 124M's widths, in a `tf.function` graph (what a SavedModel runs),
three ways, in the same run:

- `float32`: `x @ w + b`;
- `keras int8`: a Keras `Dense` after `quantize("int8")` (per-channel int8 weights,
  activations quantized per row at each call): what kbert's `--quantize int8` exports
  hold today (its product becomes an int8 `BatchMatMulV3`);
- `oneDNN int8`: TensorFlow's `QuantizedMatMulWithBiasAndDequantize`, the oneDNN kernel
  that Intel Neural Compressor writes into graphs. The activations are quantized per
  call (`QuantizeV2`, MIN_FIRST: unsigned 8-bit from the batch's min and max), the
  weights once (SCALED, one scale); the kernel's zero int32 bias, then the MIN_FIRST
  offset's compensation (min(x) times the weights' column sums) and the float bias in
  float32 after it.

Prints, per weight shape and rows: microseconds per call (the median of rounds,
`_common.median_seconds`), each int8 way's ratio to float32 (above 1: slower), and its
largest error against float32 relative to the largest float32 output.

    python benchmarks/bench_int8_kernels.py [--rounds 7] [--rows 1,8,32,128]
"""

from __future__ import annotations

import argparse

import numpy as np

from _common import median_seconds

SHAPES = {"qkv 768x2304": (768, 2304), "fc 768x3072": (768, 3072), "proj 3072x768": (3072, 768)}


def ways(k: int, n: int, seed: int = 0, compensate: bool = True):
    """{name: tf.function(x) -> y} for a [k, n] layer with random weights
    (`compensate=False`: the oneDNN way without the MIN_FIRST offset's term)."""
    import keras
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.02, (k, n)).astype("float32")
    b = rng.normal(0, 0.02, n).astype("float32")
    dense = keras.layers.Dense(n)
    dense.build((None, k))
    dense.set_weights([w, b])
    dense.quantize("int8")
    top = float(np.abs(w).max())
    wq = tf.quantization.quantize(tf.constant(w), -top, top, tf.qint8, mode="SCALED")
    column_sums = tf.reduce_sum(tf.quantization.dequantize(
        wq.output, wq.output_min, wq.output_max, mode="SCALED"), axis=0)
    zero_bias = tf.zeros([n], tf.qint32)

    def onednn(x):
        low, high = tf.reduce_min(x), tf.reduce_max(x)
        xq = tf.quantization.quantize(x, low, high, tf.quint8, mode="MIN_FIRST")
        y = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
            a=xq.output, b=wq.output, bias=zero_bias, min_a=xq.output_min,
            max_a=xq.output_max, min_b=wq.output_min, max_b=wq.output_max,
            min_freezed_output=-1.0, max_freezed_output=1.0, Toutput=tf.float32,
            input_quant_mode="MIN_FIRST")
        return y + (xq.output_min * column_sums if compensate else 0.0) + b

    return {"float32": tf.function(lambda x: tf.matmul(x, w) + b, jit_compile=False),
            "keras int8": tf.function(lambda x: dense(x), jit_compile=False),
            "oneDNN int8": tf.function(onednn, jit_compile=False)}


def main(argv=None) -> int:
    import tensorflow as tf

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--rows", default="1,8,32,128")
    args = p.parse_args(argv)
    print(f"TensorFlow {tf.__version__}; microseconds per call (median of {args.rounds} "
          "rounds); ratio: int8 / float32 time; error: max |int8 - float32| / max |float32|")
    print("| layer | rows | float32 us | keras int8 us (ratio, error) | oneDNN int8 us "
          "(ratio, error) |")
    print("| --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(1)
    for label, (k, n) in SHAPES.items():
        fns = ways(k, n)
        for rows in (int(r) for r in args.rows.split(",")):
            x = tf.constant(rng.normal(0, 1, (rows, k)).astype("float32"))
            want = fns["float32"](x).numpy()
            error = {name: float(np.abs(fn(x).numpy() - want).max() / np.abs(want).max())
                     for name, fn in fns.items()}
            repeat = max(1, 200 // rows)
            seconds = median_seconds({name: (lambda fn=fn: fn(x)) for name, fn in fns.items()},
                                     args.rounds, warmup=3, repeat=repeat)
            base = seconds["float32"]
            cells = [f"{seconds[name] * 1e6:.0f} ({seconds[name] / base:.2f}x, "
                     f"{error[name]:.3f})" for name in ("keras int8", "oneDNN int8")]
            print(f"| {label} | {rows} | {base * 1e6:.0f} | {cells[0]} | {cells[1]} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
