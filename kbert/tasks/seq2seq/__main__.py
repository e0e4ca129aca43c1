"""`python -m kbert.tasks.seq2seq`: fine-tune an encoder-decoder (T5, BART) or a
decoder-only GPT-2 on source -> target text (summarization, translation, dialogue),
generate the validation and test outputs, score them with rouge-score or sacrebleu,
and export the `generate` SavedModel.

    python -m kbert.tasks.seq2seq --init_from t5-small --source_prefix "summarize: " \\
        --train_file train.jsonl --validation_file dev.jsonl --output_dir out/sum
    python -m kbert.tasks.seq2seq --init_from t5-small --train_file train.json \\
        --validation_file dev.json --source_lang en --target_lang de \\
        --source_prefix "translate English to German: " --output_dir out/en-de

Flags follow transformers' run_summarization.py and run_translation.py (max source
length 1024, target 128, beams 1, label smoothing 0; batch 8, learning rate 5e-5, 3
epochs). See docs/tasks/seq2seq.md.
"""

from __future__ import annotations

import argparse
import sys

from kbert.cli import HelpFormatter


def _parser() -> argparse.ArgumentParser:
    from kbert.tasks.flags import add_training_flags
    from kbert.cli import model_path
    from kbert.training.flags import add_runtime_flags

    p = argparse.ArgumentParser(prog="python -m kbert.tasks.seq2seq",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    data = p.add_argument_group("data (run_summarization.py / run_translation.py's files)")
    data.add_argument("--train_file", help="CSV, TSV (header row) or JSON (Lines): a source "
                                           "and a target column, or run_translation's "
                                           "{\"translation\": {LANG: text, ...}} objects")
    data.add_argument("--validation_file", help="the same layout: generated, scored "
                                                "(OUTPUT_DIR/eval_results.json) and written "
                                                "(eval_predictions.jsonl)")
    data.add_argument("--test_file", help="the same layout (targets optional): "
                                          "test_predictions.jsonl, and test_results.json "
                                          "where every row has a target")
    data.add_argument("--text_column", default="source",
                      help="the source column (a list of turns in JSON: a dialogue, joined "
                           "one turn per line)")
    data.add_argument("--summary_column", default="target", help="the target column")
    data.add_argument("--source_lang", help="the translation layout's source language key "
                                            "(with --tfds: the source feature)")
    data.add_argument("--target_lang", help="the translation layout's target language key "
                                            "(with --tfds: the target feature)")
    data.add_argument("--source_prefix", default=None,
                      help="put before every source (T5: 'summarize: ', 'translate English "
                           "to German: '); the export puts it there too")
    data.add_argument("--source_suffix", default=None,
                      help="put after every source (GPT-2's zero-shot summaries: "
                           "$'\\nTL;DR:' in bash); the export puts it there too")
    data.add_argument("--tfds", default=None, metavar="NAME",
                      help="a TFDS dataset instead of the files (cnn_dailymail, xsum, "
                           "gigaword, samsum, billsum, reddit_tifu; a translation dataset, "
                           "e.g. wmt14_translate/de-en, with --source_lang/--target_lang): "
                           "its train, validation and test splits")
    data.add_argument("--tfds_data_dir", default=None,
                      help="with --tfds: TFDS's data folder (default: $TFDS_DATA_DIR or "
                           "~/tensorflow_datasets)")
    data.add_argument("--do_train", action="store_true",
                      help="with --tfds: train on its train split (files: --train_file "
                           "trains)")
    data.add_argument("--do_predict", action="store_true",
                      help="with --tfds: also predict its test split")
    model = p.add_argument_group("model and decoding")
    model.add_argument("--init_from", type=model_path,
                       help="a T5, BART or GPT-2 folder (kbert or Hugging Face) or a Hub "
                            "name (t5-small, facebook/bart-base, gpt2); without --train_file: "
                            "the model "
                            "OUTPUT_DIR/model of an earlier run is evaluated")
    model.add_argument("--model", default=None, metavar="FAMILY",
                       help="the family (default: that of --init_from)")
    model.add_argument("--max_source_length", type=int, default=1024,
                       help="source tokens kept (longer ones are cut, with a warning)")
    model.add_argument("--max_target_length", type=int, default=128,
                       help="target tokens trained on (the end token included; longer ones "
                            "are cut, with a warning)")
    model.add_argument("--val_max_target_length", type=int, default=None,
                       help="most tokens generated for the validation and test sets and by "
                            "the export (default: --max_target_length)")
    model.add_argument("--label_smoothing_factor", type=float, default=0.0,
                       help="label smoothing of the training loss (transformers' "
                            "LabelSmoother)")
    model.add_argument("--num_beams", type=int, default=1,
                       help="beam search width (1: greedy)")
    model.add_argument("--length_penalty", type=float, default=1.0,
                       help="beam search: scores divided by length**length_penalty")
    model.add_argument("--no_repeat_ngram_size", type=int, default=0,
                       help="no n-gram of this size twice in an output (0: off)")
    model.add_argument("--min_new_tokens", type=int, default=0,
                       help="no end token before this many tokens (0: off)")
    model.add_argument("--metric", default=None, choices=["rouge", "bleu"],
                       help="rouge (rouge-score: rouge1/2/L/Lsum) or bleu (sacrebleu: BLEU "
                            "and chrF); default: bleu for the translation layout, else "
                            "rouge")
    model.add_argument("--shots", type=int, default=None, metavar="K",
                       help="no training: prompt the --init_from model (GPT-2, T5) with K "
                            "solved --train_file pairs before each source (0: zero-shot), "
                            "as GPT-3; prompts in OUTPUT_DIR/prompts.json")
    model.add_argument("--bart_source_encoder", type=int, default=0, metavar="LAYERS",
                       help="BART's translation mode (its paper, section 3.4): a new "
                            "encoder of LAYERS layers, initialised at random, in front of "
                            "the --init_from BART; stage one (the epochs) trains only it, "
                            "BART's encoder positions and its first layer's self-attention "
                            "input projections, stage two all weights")
    model.add_argument("--bart_stage_two_steps", type=int, default=0, metavar="STEPS",
                       help="with --bart_source_encoder: the second stage's steps (all "
                            "weights trained; its own warmup and decay; 0: none)")
    train = p.add_argument_group("training (run_summarization.py defaults)")
    add_training_flags(train, learning_rate=5e-5, epochs=3.0, output_dir="runs/seq2seq",
                       export_help="also export the `generate` SavedModel (text in, text "
                                   "out, these decoding settings) for TF Serving here",
                       batch_size=8,
                       best_model="default: rouge1 for ROUGE, bleu for BLEU; each "
                                  "evaluation generates the validation outputs")
    add_runtime_flags(p)
    return p


def main(argv=None) -> int:
    from kbert.cli import UsageError, add_cli_flags, check_export_dir, run_command

    def validate(args):
        from kbert.tasks.common import (check_export_support, check_model_flag,
                                        check_quantize_flag, check_task_support)

        if not (args.train_file or args.validation_file or args.test_file or args.tfds):
            raise UsageError("give --train_file (and --validation_file/--test_file), or "
                             "--tfds NAME")
        if args.tfds and (args.train_file or args.validation_file or args.test_file):
            raise UsageError("--tfds: reads the dataset's splits; leave out the files")
        if bool(args.source_lang) != bool(args.target_lang):
            raise UsageError("--source_lang and --target_lang go together")
        if (args.train_file or args.tfds and args.do_train) and not args.init_from \
                and args.shots is None:
            raise UsageError("--init_from: the seq2seq command fine-tunes a pretrained "
                             "model; give a T5, BART or GPT-2 folder or Hub name")
        for flag in ("max_source_length", "max_target_length", "num_beams"):
            if getattr(args, flag) < 1:
                raise UsageError(f"--{flag} {getattr(args, flag)}: must be at least 1")
        if args.val_max_target_length is not None and args.val_max_target_length < 1:
            raise UsageError(f"--val_max_target_length {args.val_max_target_length}: must "
                             "be at least 1")
        for flag in ("no_repeat_ngram_size", "min_new_tokens"):
            if getattr(args, flag) < 0:
                raise UsageError(f"--{flag} {getattr(args, flag)}: must be 0 (off) or more")
        if not 0.0 <= args.label_smoothing_factor < 1.0:
            raise UsageError(f"--label_smoothing_factor {args.label_smoothing_factor}: must "
                             "be in [0, 1)")
        if args.shots is not None:
            if args.shots < 0:
                raise UsageError(f"--shots {args.shots}: must be 0 (zero-shot) or more")
            if not args.init_from:
                raise UsageError("--shots: prompts a pretrained model; give --init_from")
            if args.export_dir:
                raise UsageError("--shots: nothing is trained, nothing to export; leave out "
                                 "--export_dir")
        check_model_flag(args)
        if args.init_from:  # the family generates text (its tokenizer lists seq2seq)
            check_task_support(args, "seq2seq")
        _check_source_encoder(args)
        if args.metric is None:
            args.metric = _default_metric(args)
        check_quantize_flag(args)
        check_export_dir(args.export_dir, args.overwrite)
        if args.export_dir:
            check_export_support(args, "generate")

    def run(args):
        from kbert.tasks.seq2seq.run import run

        return run(args)

    parser = _parser()
    add_cli_flags(parser)
    results, args = run_command(parser, sys.argv[1:] if argv is None else argv,
                                lambda args: (run(args), args), validate)
    from kbert.tasks.common import results_line

    if results:
        split = "eval" if "eval_split" in results else "test"
        print(results_line("seq2seq", {k: v for k, v in results.items()
                                       if not k.endswith("_signature")}, split)
              + f" ({args.output_dir}/{split}_results.json)")
    else:
        print(f"seq2seq: trained, nothing to score (give --validation_file); the model is "
              f"in {args.output_dir}/model")
    return 0


def _check_source_encoder(args) -> None:
    """--bart_source_encoder and --bart_stage_two_steps: a BART folder, training."""
    from kbert.cli import UsageError
    from kbert.tasks.common import model_family

    if args.bart_stage_two_steps < 0:
        raise UsageError(f"--bart_stage_two_steps {args.bart_stage_two_steps}: must be 0 or "
                         "more")
    if args.bart_source_encoder < 0:
        raise UsageError(f"--bart_source_encoder {args.bart_source_encoder}: the new "
                         "encoder's layers, at least 1 (0: none)")
    if not args.bart_source_encoder:
        if args.bart_stage_two_steps:
            raise UsageError("--bart_stage_two_steps: the second stage of "
                             "--bart_source_encoder; give that too")
        return
    if args.shots is not None or not (args.train_file or args.tfds and args.do_train):
        raise UsageError("--bart_source_encoder: trains a new encoder; give --train_file "
                         "(or --tfds with --do_train), not --shots")
    from kbert.models import registry

    able = [f.name for f in registry.all_families() if _has_source_encoder(f)]
    family = registry.get_family(model_family(args))
    if not _has_source_encoder(family):
        raise UsageError(f"--bart_source_encoder: a mode of {', '.join(able)} folders; "
                         f"--init_from {args.init_from} holds a {family.name} model")
    if getattr(args, "eval_strategy", "no") != "no" and not args.bart_stage_two_steps:
        raise UsageError(f"--eval_strategy {args.eval_strategy}: evaluates during "
                         "--bart_source_encoder's second stage; give --bart_stage_two_steps")


def _has_source_encoder(family) -> bool:
    """The family's models take a new source encoder (their config has
    `source_encoder_layers`: BART's translation mode)."""
    return "source_encoder_layers" in family.config_class.field_names()


def _default_metric(args) -> str:
    """bleu for translation data (--source_lang, or the files' translation layout),
    else rouge."""
    from kbert.tasks.seq2seq.data import guess_columns

    if args.source_lang:
        return "bleu"
    first = args.train_file or args.validation_file or args.test_file
    if first and guess_columns(first, "--train_file") == "translation":
        return "bleu"
    return "rouge"


if __name__ == "__main__":
    sys.exit(main())
