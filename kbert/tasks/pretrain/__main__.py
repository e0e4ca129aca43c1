"""`python -m kbert.tasks.pretrain`: pretrain BERT, RoBERTa, GPT, ELMo, T5 or BART (from
a model folder or from scratch), and make BERT's pretraining data.

    python -m kbert.tasks.pretrain create_data --input_file "corpus/*.txt" \\
        --output_file out/train-0.tfrecord,out/train-1.tfrecord \\
        --vocab_file uncased_L-12_H-768_A-12/vocab.txt --do_lower_case true
    python -m kbert.tasks.pretrain --model bert --input_file "out/train-*.tfrecord" \\
        --init_from uncased_L-12_H-768_A-12 --output_dir runs/pretrain
    python -m kbert.tasks.pretrain --model bert --text_file corpus.txt --preset mini
    python -m kbert.tasks.pretrain --model bert     # the bundled corpus, minutes on a CPU
    python -m kbert.tasks.pretrain --model elmo --text_file corpus.txt --preset small
    python -m kbert.tasks.pretrain --model gpt --text_file corpus.txt --init_from gpt2
    python -m kbert.tasks.pretrain --model roberta --text_file corpus.txt --init_from roberta-base
    python -m kbert.tasks.pretrain --model t5 --from_scratch --text_file corpus.txt \
        --vocab_size 8000 --preset t5-small   # a SentencePiece model learned from the text

`create_data` is Google's `create_pretraining_data.py` (its flags and defaults; the same
corpus, vocabulary and seed give the same records). Text corpora: one sentence a line,
a blank line between documents. The pretrained folder is OUTPUT_DIR/model.
"""

from __future__ import annotations

import argparse
import json
import sys

from kbert.cli import HelpFormatter, model_path


def _create_data_parser() -> argparse.ArgumentParser:
    from kbert.cli import parse_bool

    p = argparse.ArgumentParser(prog="python -m kbert.tasks.pretrain create_data",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--input_file", required=True,
                   help="input text files: globs, comma-separated")
    p.add_argument("--output_file", required=True,
                   help="output TFRecord files, comma-separated (written round-robin)")
    p.add_argument("--vocab_file", required=True, help="the BERT model's vocab.txt")
    p.add_argument("--do_lower_case", type=parse_bool, default=True, metavar="true|false",
                   help="lower-case the text (uncased models)")
    p.add_argument("--do_whole_word_mask", type=parse_bool, default=False,
                   metavar="true|false", help="mask all the pieces of a word together")
    p.add_argument("--max_seq_length", type=int, default=128, help="tokens an instance")
    p.add_argument("--max_predictions_per_seq", type=int, default=20,
                   help="masked-LM predictions an instance, at most")
    p.add_argument("--random_seed", type=int, default=12345)
    p.add_argument("--dupe_factor", type=int, default=10,
                   help="passes over the corpus (each with other masks)")
    p.add_argument("--masked_lm_prob", type=float, default=0.15)
    p.add_argument("--short_seq_prob", type=float, default=0.1,
                   help="probability of an instance shorter than max_seq_length")
    return p


def create_data_main(argv) -> int:
    from kbert.cli import UsageError, add_cli_flags, run_command

    def algorithm():
        """Google's create_pretraining_data.py, reached through the family that has it
        (BERT's hooks); looked up after parsing: the registry imports TensorFlow, and
        `--help` does not wait for it."""
        from kbert.models import registry

        return next(f.hook("create_data") for f in registry.all_families()
                    if f.hook("create_data") is not None)

    def options(args):
        return algorithm().Options(
            max_seq_length=args.max_seq_length,
            max_predictions_per_seq=args.max_predictions_per_seq,
            random_seed=args.random_seed, dupe_factor=args.dupe_factor,
            masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob,
            do_whole_word_mask=args.do_whole_word_mask)

    def validate(args):
        try:
            options(args).check()
        except ValueError as e:
            raise UsageError(str(e)) from None

    def run(args):
        return algorithm().create_pretraining_data(args.input_file, args.output_file,
                                                   args.vocab_file, args.do_lower_case,
                                                   options(args))

    parser = _create_data_parser()
    add_cli_flags(parser, training=False, export=False)
    count = run_command(parser, argv, run, validate)
    print(f"create_data: {count} instances")
    return 0


# run_pretraining.py's defaults, and those of the bundled corpus (minutes on a CPU).
BUNDLED_DEFAULTS = [("learning_rate", float, 1e-4, 1e-3),
                    ("num_train_steps", int, 100_000, 1500)]


def _train_parser() -> argparse.ArgumentParser:
    from kbert.cli import parse_bool
    from kbert.tasks.flags import add_training_flags
    from kbert.training.flags import add_runtime_flags

    p = argparse.ArgumentParser(prog="python -m kbert.tasks.pretrain",
                                usage="%(prog)s [create_data] --model FAMILY ...",
                                description=__doc__.split("\n\n")[0],
                                epilog="BERT's pretraining data (Google's "
                                       "create_pretraining_data.py): python -m "
                                       "kbert.tasks.pretrain create_data --help",
                                formatter_class=HelpFormatter)
    from kbert.models.registry import family_packages

    names = ", ".join(module.rsplit(".", 1)[1] for module in family_packages())
    p.add_argument("--model", required=True, metavar="FAMILY",
                   help=f"a family with a pretraining recipe ({names}): bert: masked LM + "
                        "next sentence (run_pretraining.py); roberta: masked LM only, "
                        "dynamic masking; gpt: causal LM; elmo: the two directions' LMs "
                        "(bilm-tf); t5: span corruption; bart: denoising (text infilling "
                        "and sentence permutation)")
    data = p.add_argument_group("data (none given: the bundled corpus)")
    data.add_argument("--input_file", help="bert: create_data TFRecords (globs, "
                                           "comma-separated); families whose recipe reads "
                                           "records")
    data.add_argument("--text_file", help="text (globs, comma-separated): one sentence a "
                                          "line, blank lines between documents")
    data.add_argument("--corpus_paragraphs", type=int, default=3000,
                      help="with no --input_file or --text_file: paragraphs of the bundled "
                           "generated corpus (the SQuAD sample's domain)")
    data.add_argument("--vocab_file", help="bert with --input_file and no --init_from: the "
                                           "vocab.txt create_data used")
    model = p.add_argument_group("model")
    model.add_argument("--init_from", type=model_path,
                       help="continue from this folder (Google, Hugging Face or kbert BERT; "
                            "a GPT folder; an ELMo folder) or Hugging Face Hub name")
    model.add_argument("--from_scratch", action="store_true",
                       help="gpt, roberta, t5, bart: new weights; with --init_from its "
                            "config and tokenizer, without it a vocabulary learned from the "
                            "text (byte-level BPE; t5: SentencePiece) and --preset's size "
                            "(bert and elmo without --init_from always start from scratch)")
    model.add_argument("--preset", default=None,
                       help="from scratch: the family's config preset (e.g. mini, "
                            "gpt2, base, t5-small, bart-base) or 'demo' (2 small layers; "
                            "bert's default mini, on the bundled corpus demo; elmo's "
                            "ELMoConfig preset, default small)")
    model.add_argument("--vocab_size", type=int, default=None,
                       help="from scratch: the vocabulary learned from the text: WordPiece "
                            "(bert), byte-level BPE (gpt, roberta, bart), SentencePiece "
                            "pieces (t5, plus its 100 sentinels) or words (elmo) (default "
                            "8000; bundled corpus 800)")
    model.add_argument("--do_lower_case", type=parse_bool, default=None, metavar="true|false",
                       help="bert: lower-case the text (default: --init_from's casing; "
                            "true from scratch)")
    model.add_argument("--max_predictions_per_seq", type=int, default=20,
                       help="bert, roberta: masked positions an example, at most")
    model.add_argument("--masked_lm_prob", type=float, default=0.15,
                       help="bert, roberta: share of tokens masked (80%% the mask token, "
                            "10%% random, 10%% kept)")
    model.add_argument("--do_whole_word_mask", type=parse_bool, default=False,
                       metavar="true|false",
                       help="bert: mask all the pieces of a word together")
    model.add_argument("--num_sampled", type=int, default=8192,
                       help="elmo: sampled-softmax negatives (bilm-tf's 8192)")
    train = p.add_argument_group("training (run_pretraining.py defaults)")
    add_training_flags(train, learning_rate=None, epochs=None, output_dir="runs/pretrain",
                       export_help=None, batch_size=32,
                       seq_help="tokens an example (bert with --input_file: the records')",
                       output_help="checkpoints, train_results.json, and OUTPUT_DIR/model "
                                   "(the pretrained model folder --init_from reads)")
    for flag, kind, real, bundled in BUNDLED_DEFAULTS:
        train.add_argument(f"--{flag}", type=kind, default=None,
                           help=f"default {real}; on the bundled corpus {bundled}")
    train.add_argument("--num_warmup_steps", type=int, default=None,
                       help="steps of linear learning-rate warmup (default: "
                            "--warmup_proportion of --num_train_steps; run_pretraining.py's "
                            "10000 of 100000)")
    train.add_argument("--optimizer", default="adamw", choices=["adamw", "lamb"],
                       help="BERT's AdamW (run_pretraining.py) or LAMB (large batches)")
    train.add_argument("--weight_decay", type=float, default=0.01,
                       help="decoupled weight decay (not on LayerNorm and biases)")
    train.add_argument("--gradient_accumulation_steps", type=int, default=1,
                       help="batches whose gradients are summed before one update (the "
                            "batch of an update: this times --train_batch_size)")
    add_runtime_flags(p)
    return p


def train_main(argv) -> int:
    from kbert.cli import UsageError, add_cli_flags, run_command

    def run(args):
        from kbert.tasks.pretrain.run import run

        return run(args)

    def validate(args):
        from kbert.models import registry
        from kbert.tasks.common import check_model_flag, check_training_flags
        from kbert.tasks.pretrain.run import recipe

        try:
            pretraining = recipe(args.model)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if args.input_file and args.text_file:
            raise UsageError("--input_file and --text_file: give one of them (or neither, "
                             "for the bundled corpus)")
        if args.corpus_paragraphs < 1:
            raise UsageError(f"--corpus_paragraphs {args.corpus_paragraphs}: must be at "
                             "least 1")
        if args.input_file and not pretraining.reads_records:
            readers = [f.name for f in registry.all_families()
                       if getattr(f.hook("pretrain"), "reads_records", False)]
            raise UsageError(f"--input_file: create_data records are read by "
                             f"{', '.join(readers)}; --model {args.model} reads --text_file")
        if pretraining.needs_folder and not args.init_from and not args.from_scratch:
            raise UsageError(f"--model {args.model} needs --init_from a {args.model} folder, "
                             "or --from_scratch (a vocabulary learned from the text)")
        bundled = not args.input_file and not args.text_file
        for flag, _, real, small in BUNDLED_DEFAULTS:
            if getattr(args, flag) is None:
                setattr(args, flag, small if bundled else real)
        if args.vocab_size is None:
            args.vocab_size = 800 if bundled else 8000
        args.preset = args.preset or pretraining.default_preset(bundled)
        for flag in ("num_train_steps", "gradient_accumulation_steps",
                     "max_predictions_per_seq"):
            if getattr(args, flag) < 1:
                raise UsageError(f"--{flag} {getattr(args, flag)}: must be at least 1")
        if args.num_warmup_steps is None:
            if not 0.0 <= args.warmup_proportion <= 1.0:
                raise UsageError(f"--warmup_proportion {args.warmup_proportion}: must be "
                                 "in [0, 1]")
            args.num_warmup_steps = int(args.warmup_proportion * args.num_train_steps)
        if not 0 <= args.num_warmup_steps <= args.num_train_steps:
            raise UsageError(f"--num_warmup_steps {args.num_warmup_steps}: must be between 0 "
                             f"and --num_train_steps {args.num_train_steps}")
        if not 0.0 < args.masked_lm_prob <= 1.0:
            raise UsageError(f"--masked_lm_prob {args.masked_lm_prob}: must be in (0, 1]")
        if args.init_from:
            check_model_flag(args)  # the folder holds a model of that family
        check_training_flags(args, specials=pretraining.specials, model_flag=False)

    parser = _train_parser()
    add_cli_flags(parser, export=False)
    results = run_command(parser, argv, run, validate)
    print(f"pretrain {argv[argv.index('--model') + 1] if '--model' in argv else ''}: "
          + json.dumps({k: round(v, 4) for k, v in results.items()}))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["create_data"]:
        return create_data_main(argv[1:])
    return train_main(argv)


if __name__ == "__main__":
    sys.exit(main())
