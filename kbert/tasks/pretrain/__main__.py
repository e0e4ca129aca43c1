"""`python -m kbert.tasks.pretrain create_data`: BERT's masked-LM and next-sentence
pretraining TFRecords, exactly as Google's `create_pretraining_data.py` writes them (its
flags and defaults; the same corpus, vocabulary and seed give the same records).

    python -m kbert.tasks.pretrain create_data --input_file "corpus/*.txt" \\
        --output_file out/train-0.tfrecord,out/train-1.tfrecord \\
        --vocab_file uncased_L-12_H-768_A-12/vocab.txt --do_lower_case true

The corpus: one sentence a line, a blank line between documents.
"""

from __future__ import annotations

import argparse
import sys


def _create_data_parser() -> argparse.ArgumentParser:
    from kbert.cli import parse_bool

    p = argparse.ArgumentParser(prog="python -m kbert.tasks.pretrain create_data",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
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
    from kbert.tasks.pretrain.create_data import Options, create_pretraining_data

    def options(args) -> Options:
        return Options(max_seq_length=args.max_seq_length,
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
        return create_pretraining_data(args.input_file, args.output_file, args.vocab_file,
                                       args.do_lower_case, options(args))

    parser = _create_data_parser()
    add_cli_flags(parser, training=False)
    count = run_command(parser, argv, run, validate)
    print(f"create_data: {count} instances")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["create_data"]:
        return create_data_main(argv[1:])
    print("usage: python -m kbert.tasks.pretrain create_data --input_file ... "
          "--output_file ... --vocab_file ...\n"
          "error: give the subcommand create_data (pretraining itself, --model "
          "bert|gpt|elmo, is not in this version)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
