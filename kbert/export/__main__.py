"""`python -m kbert.export`: SavedModels for TF Serving, and a check of them.

    python -m kbert.export --model_dir runs/squad --task squad \\
        --export_dir serving/squad/1
    python -m kbert.export --model_dir uncased_L-12_H-768_A-12 --task embeddings \\
        --export_dir serving/bert/1 --seq_length 128
    python -m kbert.export --model_dir gpt2 --task generate --export_dir serving/gpt2/1 \\
        --max_new_tokens 64 --sampler top_p --top_p 0.9
    python -m kbert.export --heads sentiment=runs/sst2 entities=runs/conll \\
        --export_dir serving/text/1
    python -m kbert.export check serving/squad/1 --serving_version 2.19

--model_dir is the --output_dir of a kbert task run (`kbert_task.json`, `model.keras`,
`vocab.txt`); for `--task embeddings` any model folder (kbert, Hugging Face, Google);
for `--task generate` a GPT folder with its tokenizer (kbert, Hugging Face `gpt2`, or
OpenAI's GPT-2 release), or a T5 or BART folder (text in, output text out).
"""

from __future__ import annotations

import argparse
import os
import sys

from kbert.cli import HelpFormatter, model_path


def _check_main(argv) -> int:
    from kbert.export.ops import DEFAULT_SERVING_VERSION, SERVING_VERSIONS

    p = argparse.ArgumentParser(
        prog="python -m kbert.export check",
        description="List signatures and ops, check the ops against the stock "
                    "tensorflow_model_server, replay the warmup requests in a fresh process.")
    p.add_argument("export_dir", help="a SavedModel folder (BASE/NAME/VERSION)")
    p.add_argument("--serving_version", default=DEFAULT_SERVING_VERSION,
                   choices=SERVING_VERSIONS, help="TF Serving release to check against")
    p.add_argument("--batching_file", nargs="?", const="", default=None, metavar="PATH",
                   help="also write TF Serving's --batching_parameters_file, tuned by "
                        "timing the export at batch 1, 2, 4, ... on this machine (PATH, "
                        "or BASE/NAME/batching_parameters.txt when the flag has no "
                        "value); without the flag, the check writes nothing")
    from kbert.cli import UsageError, add_cli_flags, run_command
    from kbert.export.check import check

    add_cli_flags(p, training=False, export=False)

    def run(args):
        if not os.path.isfile(os.path.join(args.export_dir, "saved_model.pb")):
            raise UsageError(f"{args.export_dir}: no saved_model.pb; give a SavedModel "
                             "version folder (BASE/NAME/VERSION)")
        ok = check(args.export_dir, args.serving_version, verbose=args.verbose)
        if ok and args.batching_file is not None and args.batching_file.lower() != "none":
            write_batching_file(args.export_dir, args.batching_file or None)
        return ok

    return 0 if run_command(p, argv, run) else 1


def write_batching_file(export_dir: str, path: str | None) -> str:
    """`kbert.export.batching.tune`, with what it measured and chose printed."""
    from kbert.export import batching

    path, signature, times, params = batching.tune(export_dir, path)
    print(f"  batch sweep ({signature}, ms per call): " + ", ".join(
        f"{size} {t * 1e3:.1f}" for size, t in sorted(times.items())))
    print(f"  wrote {path}: max_batch_size {params['max_batch_size']}, "
          f"batch_timeout_micros {params['batch_timeout_micros']}; serve with "
          f"--enable_batching --batching_parameters_file={path}")
    return path


def _parser() -> argparse.ArgumentParser:
    from kbert.export.folder import DTYPES, QUANTIZE_MODES, TASKS
    from kbert.export.ops import DEFAULT_SERVING_VERSION, SERVING_VERSIONS

    p = argparse.ArgumentParser(prog="python -m kbert.export",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--model_dir", default=None, type=model_path,
                   help="task run folder, or a model folder or Hugging Face Hub name "
                        "(embeddings, fill_mask, generate)")
    p.add_argument("--task", default=None, choices=TASKS, help="signature to export")
    p.add_argument("--heads", nargs="+", default=None, metavar="NAME=FOLDER",
                   help="instead of --model_dir and --task: one SavedModel of several task "
                        "runs (classifier, squad, ner) trained over one frozen encoder, a "
                        "signature per NAME, the encoder's variables once")
    p.add_argument("--export_dir", required=True,
                   help="EXPORT_BASE/NAME/VERSION, as TF Serving expects")
    p.add_argument("--serving_version", default=DEFAULT_SERVING_VERSION,
                   choices=SERVING_VERSIONS,
                   help="the tensorflow_model_server release the export must load in")
    p.add_argument("--seq_length", type=int, default=None,
                   help="override the sequence length of the task run (embeddings: "
                        "default 128)")
    p.add_argument("--quantize", default=None, choices=QUANTIZE_MODES,
                   help="quantize the weights first (Keras' int8: every Dense kernel and "
                        "the token table, per-channel scales); the export keeps them int8")
    p.add_argument("--dtype", default=None, choices=DTYPES,
                   help="bfloat16: bfloat16 variables and computation (task heads' output "
                        "layers stay float32); default: the model's own (float32)")
    p.add_argument("--no_check", action="store_true",
                   help="skip replaying the warmup requests in a fresh process")
    g = p.add_argument_group("generate (GPT, T5, BART): decoding settings, fixed in the "
                             "export")
    g.add_argument("--max_new_tokens", type=int, default=32, help="tokens to generate")
    g.add_argument("--sampler", default="greedy", choices=["greedy", "top_k", "top_p",
                                                            "beam"],
                   help="greedy: the likeliest token; top_k: sampled among the --top_k "
                        "likeliest; top_p: among the fewest whose probability reaches "
                        "--top_p (nucleus); beam: beam search, the best of --num_beams")
    g.add_argument("--num_beams", type=int, default=4, help="beam search: beams kept")
    g.add_argument("--max_num_beams", type=int, default=None,
                   help="the most num_beams a request may send to the generate signature "
                        "(default 4, or --num_beams of a beam export when larger)")
    g.add_argument("--length_penalty", type=float, default=1.0,
                   help="beam search: scores divided by length ** this")
    g.add_argument("--early_stopping", default="false", choices=["true", "false", "never"],
                   help="beam search: transformers' finishing rule")
    g.add_argument("--repetition_penalty", type=float, default=1.0,
                   help="CTRL's penalty on tokens already seen (1.0: off)")
    g.add_argument("--no_repeat_ngram_size", type=int, default=0,
                   help="never repeat an n-gram of this size (0: off)")
    g.add_argument("--min_new_tokens", type=int, default=0,
                   help="no end (or stop) token before this many new tokens")
    g.add_argument("--stop", action="append", default=None, metavar="TEXT",
                   help="a stop string (repeat the flag for several): the text ends "
                        "before it")
    g.add_argument("--jit_compile", action="store_true",
                   help="compile the decoding loops with XLA inside the SavedModel: "
                        "faster, and TF Serving must then run with "
                        "--xla_cpu_compilation_enabled=true (without it every decoding "
                        "request fails)")
    g.add_argument("--temperature", type=float, default=1.0,
                   help="divides the logits before sampling (below 1: surer; 0: greedy)")
    g.add_argument("--top_k", type=int, default=None,
                   help="generate: sample from the k likeliest; fill_mask: tokens returned "
                        "per mask (default 5)")
    g.add_argument("--top_p", type=float, default=None,
                   help="generate with --sampler top_p: the probability mass kept, (0, 1]")
    g.add_argument("--seed", type=int, default=None,
                   help="fixed seed (the same prompt gives the same text); default: new "
                        "random numbers for every request")
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["check"]:
        return _check_main(argv[1:])
    from kbert.cli import UsageError, add_cli_flags, check_export_dir, run_command
    from kbert.export.check import check
    from kbert.export.folder import check_exportable, check_variant, export_from_folder

    parser = _parser()
    add_cli_flags(parser, training=False)

    def export(args):
        if args.heads:
            from kbert.export.heads import export_heads

            return export_heads(args.heads, args.export_dir,
                                serving_version=args.serving_version), args
        generation = None
        if args.task == "fill_mask":
            generation = {"top_k": args.top_k or 5}
        if args.task == "generate":
            generation = {k: getattr(args, k) for k in (
                "max_new_tokens", "sampler", "temperature", "top_k", "top_p", "seed",
                "num_beams", "max_num_beams", "length_penalty", "repetition_penalty",
                "no_repeat_ngram_size", "min_new_tokens")}
            if args.jit_compile:
                generation["jit_compile"] = True
            generation["early_stopping"] = {"true": True, "false": False,
                                            "never": "never"}[args.early_stopping]
            generation["stop"] = args.stop or []
            # A fine-tuning run's settings saved with the folder (the seq2seq command's)
            # are the defaults of the flags not given.
            from kbert.export.generate_graph import folder_settings

            saved = folder_settings(args.model_dir)
            if saved:
                given = {a[2:].split("=")[0] for a in argv if a.startswith("--")}
                generation.update({k: v for k, v in saved.items() if k not in given
                                   and not (k == "sampler" and "num_beams" in given)})
        path = export_from_folder(args.model_dir, args.task, args.export_dir,
                                  serving_version=args.serving_version,
                                  seq_length=args.seq_length, generation=generation,
                                  quantize=args.quantize, dtype=args.dtype)
        return path, args

    def validate(args):
        if args.heads:
            from kbert.export.heads import parse_heads

            for flag in ("model_dir", "task", "quantize", "dtype"):
                if getattr(args, flag):
                    raise UsageError(f"--{flag}: not with --heads (each head is a task "
                                     "run folder, exported as its task)")
            try:
                args.heads = parse_heads(args.heads)
            except ValueError as e:
                raise UsageError(str(e)) from None
            for name, folder in args.heads.items():
                if not os.path.isdir(folder):
                    raise UsageError(f"--heads {name}={folder}: no such folder")
            check_export_dir(args.export_dir, args.overwrite)
            return
        if args.model_dir is None or args.task is None:
            raise UsageError("give --model_dir and --task (or --heads NAME=FOLDER ...)")
        if not os.path.isdir(args.model_dir):
            raise UsageError(f"--model_dir {args.model_dir}: no such folder")
        try:
            check_variant(args.quantize, args.dtype)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if args.seq_length is not None and args.seq_length < 3:
            raise UsageError(f"--seq_length {args.seq_length}: must be at least 3")
        if args.task == "generate":
            if args.max_new_tokens < 1:
                raise UsageError(f"--max_new_tokens {args.max_new_tokens}: must be at least 1")
            if not args.temperature >= 0:
                raise UsageError(f"--temperature {args.temperature}: must be 0 (greedy) "
                                 "or more")
            if args.sampler == "top_k" and (args.top_k is None or args.top_k < 1):
                raise UsageError(f"--sampler top_k needs --top_k 1 or more (got {args.top_k})")
            if args.sampler == "top_p" and (args.top_p is None or not 0 < args.top_p <= 1):
                raise UsageError(f"--sampler top_p needs --top_p in (0, 1] (got {args.top_p})")
            for flag, value, low in (("--num_beams", args.num_beams, 1),
                                     ("--max_num_beams", args.max_num_beams or 1, 1),
                                     ("--no_repeat_ngram_size", args.no_repeat_ngram_size, 0),
                                     ("--min_new_tokens", args.min_new_tokens, 0)):
                if value < low:
                    raise UsageError(f"{flag} {value}: must be at least {low}")
            if not args.repetition_penalty > 0:
                raise UsageError(f"--repetition_penalty {args.repetition_penalty}: must be "
                                 "more than 0")
            if any(not s for s in args.stop or []):
                raise UsageError("--stop '': an empty stop string would stop at once")
        if args.task == "fill_mask" and args.top_k is not None and args.top_k < 1:
            raise UsageError(f"--top_k {args.top_k}: must be at least 1")
        try:
            check_exportable(args.model_dir, args.task)
        except ValueError as e:
            raise UsageError(str(e)) from None
        check_export_dir(args.export_dir, args.overwrite)

    from kbert.export.check import keep_served

    with keep_served():  # `check` below reuses the C++ loader's answers to the warmup
        path, args = run_command(parser, argv, export, validate)
        print(f"exported {args.task or ', '.join(args.heads)} SavedModel to {path}")
        if args.task == "generate":
            from kbert.export.generate_graph import caps_line, read_settings

            print(f"its caps: {caps_line(read_settings(path)['caps'])} (kbert_generate.json)")
        if args.no_check:
            return 0
        return 0 if check(path, args.serving_version, verbose=args.verbose) else 1


if __name__ == "__main__":
    sys.exit(main())
