"""What writing an export costs: seconds to export a small BERT classifier (tracing,
saving, the op check and the warmup replay through TF Serving's C++ loader), the size
of its graph (functions, nodes, `saved_model.pb` bytes), and TF Serving's C++ loader's
load plus first answer (a fresh process, as `run_c_loader` starts one).

The model: random weights, 2 layers, hidden 24, a vocabulary of a few words, one text
per request (`pair=False`), seq_length 48: small, so that the figures are the
exporter's and the graph's own cost, not the model's.

`--repo PATH` imports kbert from another checkout (a `git worktree` of an older commit)
to compare; the figures of both come from this script:

    git worktree add /tmp/old COMMIT
    python benchmarks/export_build.py --repo /tmp/old
    python benchmarks/export_build.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", help="a kbert checkout to import instead of this one")
    parser.add_argument("--loads", type=int, default=3,
                        help="C++ loader runs to time (the median is reported)")
    args = parser.parse_args(argv)
    if args.repo:
        sys.path.insert(0, os.path.abspath(args.repo))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    import statistics

    import keras
    from tensorflow.core.protobuf import saved_model_pb2

    import kbert
    from kbert import BertConfig, BertEncoder, BertTokenizer, build_vocab
    from kbert.export import export_classifier
    from kbert.export.check import run_c_loader
    from kbert.tasks.glue import build_classifier

    texts = ["hello world this is a test", "another text here"] * 20
    tokenizer = BertTokenizer(build_vocab(texts, vocab_size=200, min_count=1), seq_length=48)
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=24,
                                     num_layers=2, num_heads=2, intermediate_size=40,
                                     max_position_embeddings=64))
    model = build_classifier(encoder, 3)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "clf", "1")
        start = time.perf_counter()
        export_classifier(model, tokenizer, out, ["a", "b", "c"], seq_length=48)
        seconds = time.perf_counter() - start
        pb = os.path.join(out, "saved_model.pb")
        proto = saved_model_pb2.SavedModel()
        with open(pb, "rb") as f:
            proto.ParseFromString(f.read())
        graph = proto.meta_graphs[0].graph_def
        nodes = len(graph.node) + sum(len(f.node_def) for f in graph.library.function)
        loads = []
        for _ in range(args.loads):
            start = time.perf_counter()
            run_c_loader(out, [{"text": ["hello world"]}])
            loads.append(time.perf_counter() - start)
        print(f"kbert from {os.path.dirname(os.path.dirname(kbert.__file__))}")
        print(f"export: {seconds:.1f} s; {len(graph.library.function)} functions, {nodes} "
              f"nodes, saved_model.pb {os.path.getsize(pb):,} bytes; C++ loader load + "
              f"first answer: {statistics.median(loads):.2f} s (median of {len(loads)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
