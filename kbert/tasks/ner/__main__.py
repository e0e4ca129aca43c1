"""`python -m kbert.tasks.ner`: CoNLL-2003 NER, fine-tuned or feature-based.

    python -m kbert.tasks.ner --train_file eng.train --dev_file eng.testa \\
        --test_file eng.testb --init_from cased_L-12_H-768_A-12 --output_dir out/ner
    python -m kbert.tasks.ner ... --mode feature --layers concat_last4

Writes `dev_predictions.txt` / `test_predictions.txt` (`word gold predicted`, readable
by conlleval), `eval_results.json` (dev) and `test_results.json` (test): conlleval's
precision/recall/F1, overall and per type, under transformers' keys (`eval_f1`,
`eval_LOC_f1`, ...) with the `epoch` and `step` of the weights measured.
"""

from __future__ import annotations

import argparse
import os
import sys

from kbert.cli import HelpFormatter


def _parser() -> argparse.ArgumentParser:
    from kbert.tasks.flags import LAYER_CHOICES, add_model_flags, add_training_flags
    from kbert.training.flags import add_runtime_flags

    p = argparse.ArgumentParser(prog="python -m kbert.tasks.ner",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    data = p.add_argument_group("data")
    data.add_argument("--train_file", help="CoNLL-2003 training file (eng.train), or JSON "
                                           "Lines (.jsonl, .json) with 'tokens' and "
                                           "'ner_tags' per sentence (run_ner.py's)")
    data.add_argument("--dev_file", help="development file (eng.testa), the same formats")
    data.add_argument("--test_file", help="test file (eng.testb), the same formats")
    data.add_argument("--label_list", default=None, metavar="O,B-PER,...",
                      help="JSON Lines whose ner_tags are ids: the tag names, in id order")
    data.add_argument("--tfds", action="store_true", help="read conll2003 from TFDS")
    data.add_argument("--tfds_data_dir", default=None,
                      help="with --tfds: TFDS's data folder (default: $TFDS_DATA_DIR or "
                           "~/tensorflow_datasets)")
    model = add_model_flags(p, demo="4 layers, 128 wide", vocab_size=8000,
                            init_help=" (cased models suit NER)")
    model.add_argument("--mode", default=None, choices=["finetune", "feature"],
                       help="fine-tune the encoder, or freeze it and train a BiLSTM on its "
                            "layers (default: finetune; feature for feature-based families such as "
                            "ELMo, their only mode)")
    model.add_argument("--layers", default=None, choices=LAYER_CHOICES,
                       help="feature mode: which hidden states feed the BiLSTM (default: "
                            "concat_last4; scalar_mix for feature-based families)")
    model.add_argument("--lstm_units", type=int, default=768,
                       help="feature mode: BiLSTM units per direction (2 layers)")
    train = p.add_argument_group("training")
    add_training_flags(train, learning_rate=5e-5, epochs=4.0, output_dir="runs/ner",
                       export_help="also export the `ner` SavedModel for TF Serving here",
                       seq_help="pieces per window; longer sentences are split into windows",
                       trim_padding=True,
                       best_model="default: f1 (conlleval's); precision, recall, accuracy")
    add_runtime_flags(p)
    return p


def main(argv=None) -> int:
    from kbert.cli import add_cli_flags, check_export_dir, run_command
    from kbert.cli import UsageError
    def run(args):
        from kbert.tasks.ner.run import run

        return run(args)

    def validate(args):
        from kbert.models import registry
        from kbert.tasks.common import check_export_support, check_training_flags, model_family

        check_training_flags(args, task="ner")
        check_export_dir(args.export_dir, args.overwrite)
        if args.export_dir:
            check_export_support(args, "ner")
        family = registry.get_family(model_family(args))
        if family.feature_based:
            if args.mode == "finetune":
                raise UsageError(f"--mode finetune: {family.name} is used feature-based (a "
                                 "frozen encoder); leave --mode out or give feature")
            args.mode, args.layers = "feature", args.layers or "scalar_mix"
        if args.lora_rank and args.mode == "feature":
            raise UsageError(f"--lora_rank {args.lora_rank}: the feature mode trains no "
                             "encoder weight (a frozen encoder); use --mode finetune")
        if args.lstm_units < 1:
            raise UsageError(f"--lstm_units {args.lstm_units}: must be at least 1")
        for flag in ("train_file", "dev_file", "test_file"):
            path = getattr(args, flag)
            if path and not os.path.isfile(path):
                raise UsageError(f"--{flag} {path}: no such file")
        args.mode, args.layers = args.mode or "finetune", args.layers or "concat_last4"

    parser = _parser()
    add_cli_flags(parser)
    results, args = run_command(parser, sys.argv[1:] if argv is None else argv,
                                lambda args: (run(args), args), validate)
    from kbert.tasks.common import results_line

    for split in ("eval", "test"):
        if f"{split}_split" in results:
            record = {k: v for k, v in results.items()
                      if k in (f"{split}_split", "epoch", "step") or k in
                      {f"{split}_{m}" for m in ("precision", "recall", "f1", "accuracy")}}
            print(results_line("CoNLL NER", record, split)
                  + f" ({args.output_dir}/{split}_results.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
