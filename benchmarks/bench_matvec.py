"""One-row products at GPT-2 124M's widths: how fast each engine's kernel reads the
weights (#51: batch-1 decoding).

A batch-1 decoding step multiplies one row by every weight matrix once, so its time is
bounded by how fast the product kernels stream the weights from memory. This script
times the product of one row with each of GPT-2 124M's matrices (the 12 blocks' query /
key / value, attention output, MLP in and out, and the tied token table as the output
projection), each matrix a distinct array as the layers' are, so that no cache holds
it between calls:

- XLA: the products in one `tf.function(jit_compile=True)` (what kbert's XLA export
  and `generate(jit_compile=True)` run);
- TensorFlow graph: the same function without XLA (oneDNN's `MatMul`: the plain
  export's kernels);
- NumPy: `x @ w` (the BLAS NumPy is built with);
- PyTorch: `x @ w` on CPU (its own BLAS).
Each engine sums its products, the way the timed call runs them (the sums agree:
tests/test_benchmarks.py).

The token table is multiplied transposed, [1, 768] x [50257, 768]^T, as a tied output
projection is. Reported: microseconds per product (the median of `--rounds` calls over
all 12 matrices, divided by 12; 3 for the 154 MB token table), effective GB/s (the
matrix's bytes / time), and their sum over one step's products: 12 blocks' four
products plus the token table (no attention, norms or sampling; isolated calls, which
overstate what the products take inside a decoding loop).

    python benchmarks/bench_matvec.py [--rounds 7] [--transposed]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SHAPES = [("query/key/value", 768, 2304, 12, False), ("attention output", 768, 768, 12, False),
          ("MLP in", 768, 3072, 12, False), ("MLP out", 3072, 768, 12, False),
          ("token table (tied)", 768, 50257, 3, True)]


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def time_calls(fn, rounds: int) -> float:
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return median(times)


def engines(k: int, n: int, count: int, transposed: bool) -> dict:
    """{engine: fn() -> the sum of x_i @ w_i over `count` distinct random rows x_i [1, k]
    and [k, n] matrices w_i (stored [n, k] and multiplied transposed where `transposed`), as float32
    NumPy [1, n]}."""
    import numpy as np
    import tensorflow as tf
    import torch

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((n, k) if transposed else (k, n), dtype=np.float32)
              for _ in range(count)]
    rows = [rng.standard_normal((1, k), dtype=np.float32) for _ in range(count)]
    variables = [tf.Variable(a) for a in arrays]
    tf_rows = [tf.constant(r) for r in rows]

    def products(*rows):  # the rows are inputs: no op before a product to fuse with it
        return tf.add_n([tf.matmul(r, w, transpose_b=transposed)
                         for r, w in zip(rows, variables)])

    compiled = tf.function(products, jit_compile=True)
    graph = tf.function(products)
    numpy_weights = [a.T if transposed else a for a in arrays]
    torch_weights = [torch.from_numpy(a).T if transposed else torch.from_numpy(a)
                     for a in arrays]
    torch_rows = [torch.from_numpy(r) for r in rows]

    def torch_products():
        with torch.no_grad():
            return sum(r @ w for r, w in zip(torch_rows, torch_weights)).numpy()

    return {"XLA": lambda: compiled(*tf_rows).numpy(),
            "TensorFlow graph": lambda: graph(*tf_rows).numpy(),
            "NumPy": lambda: sum(r @ w for r, w in zip(rows, numpy_weights)),
            "PyTorch": torch_products}


def bench_shape(k: int, n: int, count: int, transposed: bool, rounds: int) -> dict:
    """{engine: seconds per product}."""
    return {name: time_calls(fn, rounds) / count
            for name, fn in engines(k, n, count, transposed).items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--transposed", action="store_true",
                        help="every matrix stored [out, in] and multiplied transposed")
    args = parser.parse_args(argv)
    import numpy as np
    import tensorflow as tf
    import torch

    print(f"# {platform.machine()}, {os.cpu_count()} CPUs; TensorFlow {tf.__version__}, "
          f"NumPy {np.__version__}, PyTorch {torch.__version__} "
          f"({torch.get_num_threads()} threads); median of {args.rounds} calls")
    shapes = [(label, k, n, count, transposed or args.transposed)
              for label, k, n, count, transposed in SHAPES]
    results = {}
    for label, k, n, count, transposed in shapes:
        results[label] = bench_shape(k, n, count, transposed, args.rounds)
    engines = list(next(iter(results.values())))
    print("| matrix | shape | " + " | ".join(f"{e} us (GB/s)" for e in engines) + " |")
    print("|---|---|" + "---|" * len(engines))
    for label, k, n, _, transposed in shapes:
        shape = f"{n}x{k}, transposed" if transposed else f"{k}x{n}"
        cells = [f"{results[label][e] * 1e6:.0f} ({k * n * 4 / results[label][e] / 1e9:.1f})"
                 for e in engines]
        print(f"| {label} | {shape} | " + " | ".join(cells) + " |")
    # A step: 12 blocks' four products and the token table once.
    step = {e: sum(results[label][e] * (12 if label != "token table (tied)" else 1)
                   for label, *_ in SHAPES) for e in engines}
    print("| one step's products, summed (ms) | | " + " | ".join(
        f"{step[e] * 1e3:.1f}" for e in engines) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
