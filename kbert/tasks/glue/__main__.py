"""`python -m kbert.tasks.glue`: fine-tune BERT on a GLUE task, evaluate on dev,
write test predictions for the GLUE server; or the same on your own CSV/JSON Lines.

    python -m kbert.tasks.glue --task mrpc --data_dir glue_data/MRPC \\
        --init_from uncased_L-12_H-768_A-12 --output_dir out/mrpc --do_predict
    python -m kbert.tasks.glue --train_file train.csv --validation_file dev.jsonl \\
        --test_file test.csv --init_from bert-base-uncased --output_dir out/mine
    python -m kbert.tasks.glue --task rte --data_dir glue_data/RTE --init_from gpt2 \\
        --shots 4 --output_dir out/rte-4shot        # GPT-3's few-shot prompting

Flags follow the original run_classifier.py (max_seq_length 128, batch 32,
learning rate 2e-5, 3 epochs). MNLI evaluates on dev matched and mismatched and, with
--do_predict, also predicts the diagnostic set (AX.tsv) when it finds it.
"""

from __future__ import annotations

import argparse
import sys

from kbert.cli import HelpFormatter


def _parser() -> argparse.ArgumentParser:
    from kbert.tasks.glue.tasks import TASKS
    from kbert.tasks.flags import add_model_flags, add_training_flags
    from kbert.training.flags import add_runtime_flags

    p = argparse.ArgumentParser(prog="python -m kbert.tasks.glue",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--task", default=None, choices=list(TASKS),
                   help="GLUE task (ax: the diagnostic set, predicted with an MNLI run); "
                        "none with --train_file (your own data)")
    own = p.add_argument_group(
        "your own data (instead of --task; Hugging Face run_glue.py's files and columns)")
    own.add_argument("--train_file", help="CSV, TSV (header row) or JSON Lines: a 'label' "
                                          "column and one or two text columns")
    own.add_argument("--validation_file", help="the same columns: dev metrics (accuracy and "
                                               "macro F1, or Pearson/Spearman for numbers)")
    own.add_argument("--test_file", help="the text column(s), labels not needed: "
                                         "OUTPUT_DIR/test_predictions.tsv with your label names")
    own.add_argument("--text_column", help="default: sentence1 if there is one, else the "
                                           "first column besides the label")
    own.add_argument("--text_pair_column", help="default: sentence2 with sentence1, else the "
                                                "second column besides the label, if any")
    own.add_argument("--label_column", help="default: label")
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
    model.add_argument("--shots", type=int, default=None, metavar="K",
                       help="no training: prompt the --init_from causal LM (GPT) with K "
                            "solved training examples (0: zero-shot) and score each label's "
                            "words, as GPT-3 (kbert.tasks.glue.prompting); prompts in "
                            "OUTPUT_DIR/prompts.json")
    train = p.add_argument_group("training (run_classifier.py defaults)")
    add_training_flags(train, learning_rate=2e-5, epochs=3.0, output_dir="runs/glue",
                       export_help="also export a classifier SavedModel for TF Serving here",
                       seq_help="tokens per example; longer ones are cut, with a warning",
                       trim_padding=True,
                       best_model="default: the task's main one, e.g. mrpc's f1; your own "
                                  "data's accuracy or pearson")
    add_runtime_flags(p)
    return p


OWN_FLAGS = ("train_file", "validation_file", "test_file", "text_column", "text_pair_column",
             "label_column")


def main(argv=None) -> int:
    from kbert.cli import add_cli_flags, check_export_dir, run_command
    from kbert.cli import UsageError
    from kbert.tasks.glue.tasks import get_task

    def run(args):
        from kbert.tasks.glue.run import run

        return run(args)

    def validate(args):
        from kbert.tasks.common import check_export_support, check_training_flags

        own = [f for f in OWN_FLAGS if getattr(args, f)]
        if args.task is None and not args.train_file:
            raise UsageError("give --task (a GLUE task) or --train_file (your own data)")
        if args.task is not None and own:
            raise UsageError(f"--{own[0]}: your own data replaces --task {args.task}; give "
                             "one of them")
        if own and not args.train_file:
            raise UsageError(f"--{own[0]}: needs --train_file (the labels come from it)")
        if own and (args.data_dir or args.tfds):
            raise UsageError(f"--{'data_dir' if args.data_dir else 'tfds'}: reads a GLUE "
                             "task; with --train_file give --validation_file/--test_file")
        if args.train_file and args.text_pair_column and not args.text_column:
            raise UsageError("--text_pair_column: give --text_column too")
        pair = get_task(args.task).is_pair if args.task else bool(args.text_pair_column)
        check_training_flags(args, pair=pair, task="glue")
        check_export_dir(args.export_dir, args.overwrite)
        from kbert.tasks.text_to_text import is_text_to_text

        text_to_text = is_text_to_text(args.init_from)
        if args.export_dir:
            check_export_support(args, "generate" if text_to_text else "classifier")
        if text_to_text:
            for flag, on in (("freeze_encoder", args.freeze_encoder),
                             ("lora_rank", args.lora_rank),
                             ("eval_strategy", args.eval_strategy != "no")):
                if on:
                    raise UsageError(f"--{flag}: not for text-to-text fine-tuning (--init_from "
                                     f"{args.init_from}: the whole encoder-decoder trains, "
                                     "evaluated once at the end)")
        if args.freeze_encoder and not args.init_from:
            raise UsageError("--freeze_encoder: keeps the --init_from encoder as it is; give "
                             "--init_from")
        if args.lstm_units < 1:
            raise UsageError(f"--lstm_units {args.lstm_units}: must be at least 1")
        if not args.lm_coef >= 0:
            raise UsageError(f"--lm_coef {args.lm_coef}: must be 0 or more")
        if args.shots is not None:
            if args.shots < 0:
                raise UsageError(f"--shots {args.shots}: must be 0 (zero-shot) or more")
            if not args.init_from:
                raise UsageError("--shots: prompts a pretrained causal LM; give --init_from "
                                 "(a GPT folder)")
            if args.export_dir:
                raise UsageError("--shots: nothing is trained, nothing to export; leave out "
                                 "--export_dir")

    parser = _parser()
    add_cli_flags(parser)
    results, args = run_command(parser, sys.argv[1:] if argv is None else argv,
                                lambda args: (run(args), args), validate)
    from kbert.tasks.common import results_line

    title = f"GLUE {args.task}" if args.task else f"GLUE (--train_file {args.train_file})"
    if "ax_rows" in results:
        print(f"{title}: {results['ax_rows']} rows predicted ({args.output_dir}/AX.tsv)")
    elif results:
        print(results_line(title, results) + f" ({args.output_dir}/eval_results.json)")
    else:
        print(f"{title}: trained, no dev set to evaluate (give --validation_file); the "
              f"model is in {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
