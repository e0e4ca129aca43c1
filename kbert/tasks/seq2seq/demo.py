"""`make demo-seq2seq`: the seq2seq command on its embedded default, offline.

Why this task: a generated translation (`kbert.tasks.seq2seq.sample`: English-like
sentences into a made-up language by a lexicon and one word-order rule, the adjective
after its noun) is learned by a small model from scratch on a CPU in about a minute, and
its score means something: copying the source shares no word with the target (BLEU
near 0), so BLEU above that is words and word order learned. Question generation from
the bundled SQuAD sample would need a pretrained model, which a fresh clone lacks.

1. Train, dev and test files in run_translation.py's layout (`{"translation": {"en":
   ..., "xx": ...}}`), each split with its own seed.
2. A SentencePiece model learned from the two languages' words, and a random-init
   2-layer T5 (`T5Config.preset("tiny")`, 64 wide).
3. `python -m kbert.tasks.seq2seq` fine-tunes it (beam search 2 for the dev and test
   outputs), scores dev BLEU and chrF with sacrebleu, and exports the `generate`
   SavedModel, checked through TF Serving's C++ loader.
4. The export is asked three test sources, as a client would (bare sources: the
   export adds the prefix), and the answers are printed beside the references.

    python -m kbert.tasks.seq2seq.demo [--output_dir runs/demo-seq2seq]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

PREFIX = "to xx: "


def run(output_dir: str = "runs/demo-seq2seq", train: int = 1000, epochs: float = 12.0,
        seed: int = 0) -> dict:
    """Runs the demo; returns {"eval": eval_results.json, "copy_bleu": copying the
    source's dev BLEU, "served": [(source, reference, the export's answer)]}."""
    import keras
    import sacrebleu
    import sentencepiece

    from kbert.export.check import run_c_loader
    from kbert.models.t5 import T5Config, T5Seq2SeqLM, T5Tokenizer
    from kbert.tasks.seq2seq import __main__ as cli
    from kbert.tasks.seq2seq.sample import corpus, write_translation_files

    os.makedirs(output_dir, exist_ok=True)
    paths = write_translation_files(os.path.join(output_dir, "data"),
                                    {"train": train, "dev": 100, "test": 20}, seed=seed)
    init = os.path.join(output_dir, "t5-init")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()), model_prefix=os.path.join(output_dir, "spiece"),
        vocab_size=56, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, model_type="unigram",
        character_coverage=1.0, minloglevel=2)
    tokenizer = T5Tokenizer.from_pretrained(output_dir)
    keras.utils.set_random_seed(seed)
    T5Seq2SeqLM(T5Config.preset("tiny", vocab_size=tokenizer.vocab_size, hidden_size=64,
                                intermediate_size=128)).save_pretrained(init, tokenizer=tokenizer)
    out = os.path.join(output_dir, "out")
    export = os.path.join(output_dir, "serving", "xx", "1")
    cli.main(["--init_from", init, "--train_file", paths["train"],
              "--validation_file", paths["dev"], "--test_file", paths["test"],
              "--source_lang", "en", "--target_lang", "xx", "--source_prefix", PREFIX,
              "--max_source_length", "40", "--max_target_length", "32",
              "--num_train_epochs", str(epochs), "--learning_rate", "3e-3",
              "--train_batch_size", "16", "--num_beams", "2", "--seed", str(seed),
              "--output_dir", out, "--export_dir", export, "--overwrite_output_dir",
              "--overwrite"])
    with open(os.path.join(out, "eval_results.json"), encoding="utf-8") as f:
        results = json.load(f)
    dev = [json.loads(line)["translation"] for line in open(paths["dev"], encoding="utf-8")]
    copy = sacrebleu.corpus_bleu([d["en"] for d in dev], [[d["xx"] for d in dev]]).score
    test = [json.loads(line)["translation"]
            for line in open(paths["test"], encoding="utf-8")][:3]
    answers = run_c_loader(export, [{"prompt": [t["en"] for t in test]}], "serving_default")
    texts = answers["results"][0]["text"]["value"]
    return {"eval": results, "copy_bleu": copy,
            "served": [(t["en"], t["xx"], a) for t, a in zip(test, texts)]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbert.tasks.seq2seq.demo",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="runs/demo-seq2seq")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    report = run(args.output_dir, seed=args.seed)
    print(f"dev BLEU {report['eval']['eval_bleu']:.1f} (chrF {report['eval']['eval_chrf']:.1f})"
          f"; copying the source: BLEU {report['copy_bleu']:.1f}")
    print("the export, through TF Serving's C++ loader:")
    for source, reference, answer in report["served"]:
        print(f"  {source}\n    -> {answer}\n    (reference: {reference})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
