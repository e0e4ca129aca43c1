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

from kbert.cli import HelpFormatter


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
    from kbert.cli import parse_bool
    from kbert.tasks.flags import add_model_flags, add_training_flags
    from kbert.training.flags import add_runtime_flags

    p = argparse.ArgumentParser(
        prog="python -m kbert.tasks.squad", description=__doc__.split("\n\n")[0],
        formatter_class=HelpFormatter)
    data = p.add_argument_group("data (none given: the bundled sample)")
    data.add_argument("--train_file", help="SQuAD JSON to train on, or JSON Lines (.jsonl) "
                                           "of run_qa.py's flat records (id, title, "
                                           "context, question, answers)")
    data.add_argument("--predict_file", help="SQuAD JSON or JSON Lines to predict and "
                                             "evaluate on")
    data.add_argument("--tfds", action="store_true",
                      help="read squad/v1.1 or squad/v2.0 from TensorFlow Datasets")
    data.add_argument("--tfds_data_dir", default=None,
                      help="with --tfds: TFDS's data folder (default: $TFDS_DATA_DIR or "
                           "~/tensorflow_datasets)")
    data.add_argument("--version_2_with_negative", action="store_true",
                      help="SQuAD v2.0: questions may have no answer")
    data.add_argument("--sample_paragraphs", type=int, default=900,
                      help="bundled sample size (paragraphs; 1/6 are held out)")
    rs = p.add_argument_group("run_squad.py's flags, with its meanings")
    rs.add_argument("--do_train", nargs="?", const=True, default=None, type=parse_bool,
                    help="train (with --do_predict false: train only; default: train and "
                         "predict)")
    rs.add_argument("--do_predict", nargs="?", const=True, default=None, type=parse_bool,
                    help="predict and evaluate --predict_file (alone: with the model a "
                         "--do_train run left in --output_dir)")
    rs.add_argument("--vocab_file", help="Google's vocab.txt (with --bert_config_file and "
                                         "--init_checkpoint, instead of --init_from)")
    rs.add_argument("--bert_config_file", help="Google's bert_config.json")
    rs.add_argument("--init_checkpoint", help="Google's checkpoint prefix "
                                              "(.../bert_model.ckpt)")
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
                                   "OUTPUT_DIR/serving/squad/1; 'none': no export)",
                       best_model="default: f1; exact_match (v2.0: exact, best_f1, "
                                  "best_exact)")
    add_runtime_flags(p)
    return p


def _google_flags_to_folder(args) -> None:
    """run_squad.py's --vocab_file/--bert_config_file/--init_checkpoint -> a Google
    folder of links for --init_from (the three may live in different places)."""
    given = [f for f in ("vocab_file", "bert_config_file", "init_checkpoint")
             if getattr(args, f)]
    if not given:
        return
    from kbert.cli import UsageError

    if args.init_from:
        raise UsageError("give --init_from or run_squad.py's --vocab_file, "
                         "--bert_config_file and --init_checkpoint, not both")
    if len(given) < 3:
        missing = sorted({"vocab_file", "bert_config_file", "init_checkpoint"} - set(given))
        raise UsageError(f"--{given[0]} needs {', '.join('--' + m for m in missing)} too")
    import atexit
    import glob
    import shutil
    import tempfile

    pieces = sorted(glob.glob(args.init_checkpoint + ".*"))
    for path, flag in ((args.vocab_file, "--vocab_file"),
                       (args.bert_config_file, "--bert_config_file")):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{flag} {path}: no such file")
    if not any(p.endswith(".index") for p in pieces):
        raise FileNotFoundError(f"--init_checkpoint {args.init_checkpoint}: no "
                                f"{args.init_checkpoint}.index")
    folder = tempfile.mkdtemp(prefix="kbert-google-")
    atexit.register(shutil.rmtree, folder, True)
    os.symlink(os.path.abspath(args.vocab_file), os.path.join(folder, "vocab.txt"))
    os.symlink(os.path.abspath(args.bert_config_file), os.path.join(folder, "bert_config.json"))
    for piece in pieces:
        suffix = piece[len(args.init_checkpoint):]
        os.symlink(os.path.abspath(piece), os.path.join(folder, "bert_model.ckpt" + suffix))
    args.init_from = folder
    if args.do_lower_case is None:  # run_squad.py's default
        args.do_lower_case = True


def _prepare(args) -> None:
    """Defaults that depend on other flags, then the checks, before any work."""
    from kbert.cli import UsageError, check_export_dir
    from kbert.tasks.common import check_training_flags

    if args.do_train is None and args.do_predict is None:
        args.do_train = args.do_predict = True
    args.do_train, args.do_predict = bool(args.do_train), bool(args.do_predict)
    if not (args.do_train or args.do_predict):
        raise UsageError("at least one of --do_train and --do_predict must be true")
    _google_flags_to_folder(args)
    explicit_export = args.export_dir is not None and args.export_dir.lower() != "none"
    if args.export_dir is None:
        args.export_dir = os.path.join(args.output_dir, "serving", "squad", "1")
    elif args.export_dir.lower() == "none":
        args.export_dir = None
    defaults = REAL_DEFAULTS if (args.train_file or args.predict_file or args.tfds) \
        else dict(SAMPLE_DEFAULTS)
    if defaults is not REAL_DEFAULTS and args.version_2_with_negative:
        defaults["num_train_epochs"] = SAMPLE_V2_EPOCHS
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    check_training_flags(args, task="squad", pair=True)
    from kbert.tasks.text_to_text import is_text_to_text

    if is_text_to_text(args.init_from, "squad_text"):
        for flag, on in (("lora_rank", args.lora_rank),
                         ("eval_strategy", args.eval_strategy != "no")):
            if on:
                raise UsageError(f"--{flag}: not for text-to-text fine-tuning (--init_from "
                                 f"{args.init_from}: the whole encoder-decoder trains, "
                                 "evaluated once at the end)")
    for flag, needed in (("train_file", args.do_train), ("predict_file", args.do_predict)):
        path = getattr(args, flag)
        if needed and path and not os.path.isfile(path):
            raise UsageError(f"--{flag} {path}: no such file")
    if args.max_query_length < 1:
        raise UsageError(f"--max_query_length {args.max_query_length}: must be at least 1")
    if args.doc_stride < 1:
        raise UsageError(f"--doc_stride {args.doc_stride}: must be at least 1")
    # The default export inside --output_dir belongs to the run and is replaced.
    check_export_dir(args.export_dir if explicit_export else None, args.overwrite)


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
    from kbert.cli import add_cli_flags, run_command

    def run(args):
        from kbert.tasks.squad.run import run

        return run(args), args

    parser = _parser()
    add_cli_flags(parser)
    results, args = run_command(parser, argv, run, _prepare)
    if not results:
        print(f"trained; the model is in {args.output_dir} (predict with --do_predict)")
        return 0
    v2 = "eval_exact" in results  # the v2.0 script's name; v1.1's is exact_match
    when = f", after step {results['step']} (epoch {results['epoch']:g})" \
        if "step" in results else ""
    print(f"SQuAD {'v2.0' if v2 else 'v1.1'}: EM "
          f"{results['eval_exact' if v2 else 'eval_exact_match']:.2f} "
          f"F1 {results['eval_f1']:.2f} on {results['eval_split']}{when} "
          f"({args.output_dir}/eval_results.json)")
    if args.export_dir:
        print(f"SavedModel for TF Serving: {args.export_dir}")
        for line in serving_lines(args.export_dir):
            print(line)
    return 0


def serving_lines(export_dir: str) -> list[str]:
    """How to serve the export (EXPORT_BASE/NAME/VERSION) and ask it a question."""
    base = os.path.dirname(os.path.abspath(export_dir))
    name = os.path.basename(base)
    request = ('{"instances": [{"question": "Who wrote it?", '
               '"context": "The book was written by Ann Lee in 1990."}]}')
    return [f"serve it:  docker run -p 8501:8501 -v \"{base}:/models/{name}\" "
            f"-e MODEL_NAME={name} tensorflow/serving:2.21.0",
            f"query it:  curl -s -X POST localhost:8501/v1/models/{name}:predict "
            f"-d '{request}'"]


if __name__ == "__main__":
    sys.exit(main())
