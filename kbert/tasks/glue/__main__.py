"""`python -m kbert.tasks.glue`: fine-tune BERT on a GLUE task, evaluate on dev,
write test predictions for the GLUE server.

    python -m kbert.tasks.glue --task mrpc --data_dir glue_data/MRPC \\
        --init_from uncased_L-12_H-768_A-12 --output_dir out/mrpc --do_predict

Flags follow the original run_classifier.py (max_seq_length 128, batch 32,
learning rate 2e-5, 3 epochs). MNLI evaluates on dev matched and mismatched and, with
--do_predict, also predicts the diagnostic set (AX.tsv) when it finds it.
"""

from __future__ import annotations

import argparse
import json
import sys

from kbert.cli import HelpFormatter


def _parser() -> argparse.ArgumentParser:
    from kbert.tasks.glue.tasks import TASKS
    from kbert.tasks.flags import add_model_flags, add_training_flags
    from kbert.training.flags import add_runtime_flags

    p = argparse.ArgumentParser(prog="python -m kbert.tasks.glue",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--task", required=True, choices=list(TASKS),
                   help="GLUE task (ax: the diagnostic set, predicted with an MNLI run)")
    data = p.add_argument_group("data")
    data.add_argument("--data_dir", help="the task's folder of the GLUE download "
                                         "(train.tsv, dev.tsv, test.tsv, ...)")
    data.add_argument("--tfds", action="store_true", help="read glue/<task> from TFDS")
    data.add_argument("--tfds_data_dir", default=None,
                      help="with --tfds: TFDS's data folder (default: $TFDS_DATA_DIR or "
                           "~/tensorflow_datasets)")
    data.add_argument("--ax_file", help="diagnostic.tsv (default: "
                                        "DATA_DIR/../diagnostic/diagnostic.tsv)")
    data.add_argument("--do_predict", action="store_true",
                      help="write test predictions in the GLUE submission format")
    model = add_model_flags(p, demo="2 layers, 128 wide", vocab_size=8000)
    model.add_argument("--lstm_units", type=int, default=256,
                       help="feature-based families (ELMo): BiLSTM units per direction over "
                            "the mixed layers")
    model.add_argument("--lm_coef", type=float, default=0.5,
                       help="families fine-tuned with an auxiliary language-model loss "
                            "(GPT): its weight (the GPT paper's lambda; "
                            "finetune-transformer-lm's --lm_coef); 0 leaves it out")
    model.add_argument("--freeze_encoder", action="store_true",
                       help="train the head alone over the --init_from encoder (its weights "
                            "unchanged: runs from one folder can share it in one SavedModel, "
                            "`python -m kbert.export --heads`)")
    model.add_argument("--model_dir", help="--task ax: the --output_dir of an MNLI run")
    train = p.add_argument_group("training (run_classifier.py defaults)")
    add_training_flags(train, learning_rate=2e-5, epochs=3.0, output_dir="runs/glue",
                       export_help="also export a classifier SavedModel for TF Serving here",
                       seq_help="tokens per example; longer ones are cut, with a warning",
                       trim_padding=True)
    add_runtime_flags(p)
    return p


def main(argv=None) -> int:
    from kbert.cli import add_cli_flags, check_export_dir, run_command
    from kbert.cli import UsageError
    from kbert.tasks.glue.tasks import get_task

    def run(args):
        from kbert.tasks.glue.run import run

        return run(args)

    def validate(args):
        from kbert.tasks.common import check_export_support, check_training_flags

        check_training_flags(args, pair=get_task(args.task).is_pair)
        check_export_dir(args.export_dir, args.overwrite)
        if args.export_dir:
            check_export_support(args, "classifier")
        if args.freeze_encoder and not args.init_from:
            raise UsageError("--freeze_encoder: keeps the --init_from encoder as it is; give "
                             "--init_from")
        if args.lstm_units < 1:
            raise UsageError(f"--lstm_units {args.lstm_units}: must be at least 1")
        if not args.lm_coef >= 0:
            raise UsageError(f"--lm_coef {args.lm_coef}: must be 0 or more")

    parser = _parser()
    add_cli_flags(parser)
    results, task = run_command(parser, sys.argv[1:] if argv is None else argv,
                                lambda args: (run(args), args.task), validate)
    print(f"GLUE {task}: " + json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
