"""`make demo-pretrain`: pretraining, then fine-tuning, shown on generated data.

1. A corpus in the domain of the bundled SQuAD sample (`kbert.tasks.squad.sample`:
   biographies of invented musicians) is generated with other seeds: its paragraphs'
   sentences, one a line, a blank line between paragraphs; no question of the SQuAD
   files is in it.
2. A small BERT (2 layers, 128 wide) is pretrained on it with `python -m
   kbert.tasks.pretrain --model bert` (masked LM with masks drawn per batch, next
   sentence).
3. SQuAD is fine-tuned on a reduced sample (`--train_paragraphs` paragraphs, four
   questions each; 10 epochs, learning rate 1e-3, windows of 128 tokens) twice with the
   same budget: from the pretrained folder and from
   scratch (the same size, a vocabulary learned from the training texts); both are
   evaluated on the same held-out sample with the official metric, and both scores are
   printed.

    python -m kbert.tasks.pretrain.demo [--output_dir runs/demo-pretrain]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

logger = logging.getLogger(__name__)


def write_squad(path: str, paragraphs: int, seed: int) -> None:
    from kbert.io import atomic_file
    from kbert.tasks.squad.sample import make_sample

    with atomic_file(path) as f:
        json.dump(make_sample(paragraphs, seed=seed), f, ensure_ascii=False)


def run(output_dir: str = "runs/demo-pretrain", corpus_paragraphs: int = 3000,
        pretrain_steps: int = 1500, train_paragraphs: int = 50, dev_paragraphs: int = 150,
        epochs: float = 10.0, seed: int = 0) -> dict:
    from kbert.tasks.pretrain import __main__ as pretrain_cli
    from kbert.tasks.squad import __main__ as squad_cli

    from kbert.tasks.pretrain.corpus import write_corpus

    os.makedirs(output_dir, exist_ok=True)
    corpus = os.path.join(output_dir, "corpus.txt")
    write_corpus(corpus, corpus_paragraphs, seed=1000 + seed)
    train = os.path.join(output_dir, "train.json")
    dev = os.path.join(output_dir, "dev.json")
    write_squad(train, train_paragraphs, seed=2000 + seed)
    write_squad(dev, dev_paragraphs, seed=3000 + seed)
    pretrained = os.path.join(output_dir, "pretrain")
    pretrain_cli.main(["--model", "bert", "--text_file", corpus, "--preset", "demo",
                       "--vocab_size", "800", "--max_seq_length", "128",
                       "--num_train_steps", str(pretrain_steps),
                       "--num_warmup_steps", str(pretrain_steps // 10),
                       "--learning_rate", "1e-3", "--steps_per_loop", "500",
                       "--output_dir", pretrained, "--seed", str(seed)])
    scores = {}
    for name, init in (("pretrained", os.path.join(pretrained, "model")), ("scratch", None)):
        out = os.path.join(output_dir, f"squad-{name}")
        # The bundled sample's settings (a small model learns with a large rate, short
        # windows), the same for both starts.
        squad_cli.main(["--train_file", train, "--predict_file", dev, "--output_dir", out,
                        "--num_train_epochs", str(epochs), "--learning_rate", "1e-3",
                        "--max_seq_length", "128", "--doc_stride", "64",
                        "--train_batch_size", "16", "--seed", str(seed),
                        *(["--init_from", init] if init else [])])
        with open(os.path.join(out, "eval_results.json"), encoding="utf-8") as f:
            scores[name] = json.load(f)
    questions = 4 * train_paragraphs
    print(f"SQuAD after {epochs:g} epochs on {questions} questions, evaluated on "
          f"{4 * dev_paragraphs}:")
    for name in ("pretrained", "scratch"):
        r = scores[name]
        print(f"  from {'the pretrained BERT' if name == 'pretrained' else 'scratch':20s} "
              f"EM {r['eval_exact_match']:.2f}  F1 {r['eval_f1']:.2f}")
    return scores


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m kbert.tasks.pretrain.demo",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--output_dir", default="runs/demo-pretrain")
    p.add_argument("--pretrain_steps", type=int, default=1500)
    p.add_argument("--train_paragraphs", type=int, default=50)
    p.add_argument("--epochs", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from kbert import _startup

    _startup.quiet_import_tensorflow()  # TensorFlow's start-up lines off the terminal
    run(args.output_dir, pretrain_steps=args.pretrain_steps,
        train_paragraphs=args.train_paragraphs, epochs=args.epochs, seed=args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
