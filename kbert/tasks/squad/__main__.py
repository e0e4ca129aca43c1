"""`python -m kbert.tasks.squad`: fine-tune BERT on SQuAD v1.1/v2.0 and evaluate.

With no data flags it runs on the bundled sample (generated, deterministic): it
fine-tunes a small BERT from scratch, predicts on the held-out split and prints EM/F1.
With `--train_file`/`--predict_file` it does what the original run_squad.py does.

    python -m kbert.tasks.squad --train_file train-v1.1.json \\
        --predict_file dev-v1.1.json --init_from uncased_L-12_H-768_A-12 \\
        --output_dir out/squad

    python -m kbert.tasks.squad evaluate dev-v1.1.json out/squad/predictions.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

logger = logging.getLogger("kbert.tasks.squad")


# run_squad.py's defaults, and those of the bundled sample: a BERT trained from
# scratch on short contexts needs a larger learning rate, more epochs, and shorter
# windows (so that its contexts still need several).
REAL_DEFAULTS = {"max_seq_length": 384, "doc_stride": 128, "learning_rate": 5e-5,
                 "num_train_epochs": 3.0}
SAMPLE_DEFAULTS = {"max_seq_length": 128, "doc_stride": 64, "learning_rate": 1e-3,
                   "num_train_epochs": 8.0}
# The v2.0 sample has shorter contexts (fewer windows per epoch) and a harder decision.
SAMPLE_V2_EPOCHS = 16.0


def _parser() -> argparse.ArgumentParser:
    from kbert.tasks.common import add_model_flags, add_training_flags
    from kbert.training import add_runtime_flags

    p = argparse.ArgumentParser(
        prog="python -m kbert.tasks.squad", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    data = p.add_argument_group("data (none given: the bundled sample)")
    data.add_argument("--train_file", help="SQuAD JSON to train on")
    data.add_argument("--predict_file", help="SQuAD JSON to predict and evaluate on")
    data.add_argument("--tfds", action="store_true",
                      help="read squad/v1.1 or squad/v2.0 from TensorFlow Datasets")
    data.add_argument("--version_2_with_negative", action="store_true",
                      help="SQuAD v2.0: questions may have no answer")
    data.add_argument("--sample_paragraphs", type=int, default=900,
                      help="bundled sample size (paragraphs; 1/6 are held out)")
    add_model_flags(p, demo="2 layers, 128 wide, for the bundled sample", vocab_size=800,
                    position_init="sinusoidal")
    feats = p.add_argument_group("features and post-processing (run_squad.py defaults)")
    train = p.add_argument_group("training")
    for flag, real in REAL_DEFAULTS.items():  # defaults differ for the bundled sample
        group = feats if flag in ("max_seq_length", "doc_stride") else train
        group.add_argument(f"--{flag}", type=type(real), default=None,
                           help=f"default {real}; on the bundled sample {SAMPLE_DEFAULTS[flag]}"
                                + (f" ({SAMPLE_V2_EPOCHS} with --version_2_with_negative)"
                                   if flag == "num_train_epochs" else ""))
    feats.add_argument("--max_query_length", type=int, default=64,
                       help="question tokens kept (longer questions are cut, with a warning)")
    feats.add_argument("--n_best_size", type=int, default=20,
                       help="start and end candidates per window, and answers in nbest_predictions.json")
    feats.add_argument("--max_answer_length", type=int, default=30,
                       help="longest answer, in tokens")
    feats.add_argument("--null_score_diff_threshold", type=float, default=0.0,
                       help="v2.0: no answer when null score - best span score exceeds this")
    add_training_flags(train, learning_rate=None, epochs=None, output_dir="runs/squad",
                       export_help="SavedModel for TF Serving (default "
                                   "OUTPUT_DIR/serving/squad/1; 'none': no export)")
    add_runtime_flags(p)
    return p


def _evaluate_main(argv) -> int:
    p = argparse.ArgumentParser(prog="python -m kbert.tasks.squad evaluate",
                                description="Official SQuAD v1.1/v2.0 evaluation.")
    p.add_argument("data_file")
    p.add_argument("pred_file")
    p.add_argument("--na_prob_file", help="v2.0: question id -> no-answer probability")
    args = p.parse_args(argv)
    from kbert.tasks.squad.data import load_json
    from kbert.tasks.squad.evaluate import evaluate

    with open(args.pred_file, encoding="utf-8") as f:
        preds = json.load(f)
    na_probs = None
    if args.na_prob_file:
        with open(args.na_prob_file, encoding="utf-8") as f:
            na_probs = json.load(f)
    print(json.dumps(evaluate(load_json(args.data_file), preds, na_probs), indent=2))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["evaluate"]:
        return _evaluate_main(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from kbert.tasks.squad.run import run

    if args.export_dir is None:
        args.export_dir = os.path.join(args.output_dir, "serving", "squad", "1")
    elif args.export_dir.lower() == "none":
        args.export_dir = None
    defaults = REAL_DEFAULTS if (args.train_file or args.tfds) else dict(SAMPLE_DEFAULTS)
    if defaults is not REAL_DEFAULTS and args.version_2_with_negative:
        defaults["num_train_epochs"] = SAMPLE_V2_EPOCHS
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    results = run(args)
    key_em = "exact" if "exact" in results else "exact_match"
    print(f"SQuAD {'v2.0' if 'exact' in results else 'v1.1'}: EM {results[key_em]:.2f} "
          f"F1 {results['f1']:.2f} ({args.output_dir}/eval_results.json)")
    if args.export_dir:
        print(f"SavedModel for TF Serving: {args.export_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
