"""Peak resident memory of the SQuAD, NER and ELMo exports against the size of one
request's text, through TF Serving's C++ loader (`kbert.export.check.run_c_loader`: one
fresh loader process per request, its peak resident memory over the loaded one).

    .venv/bin/python benchmarks/serving_memory.py

Tiny models (a 1-layer, 16-wide BERT; ELMo's "tiny" preset): the growth shown is the
graph's own (tokenizing, windows, span search, offsets, the text ops), which the model's
size scales but does not change in kind. Prints a Markdown table (docs/serving.md).
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402

import kbert  # noqa: E402
from kbert import BertConfig, BertEncoder, BertTokenizer, build_vocab  # noqa: E402
from kbert.export import export_squad  # noqa: E402
from kbert.export.check import run_c_loader  # noqa: E402
from kbert.export.elmo_graph import export_elmo  # noqa: E402
from kbert.export.ner_graph import export_ner  # noqa: E402

WORDS = ["the", "museum", "in", "zürich", "opened", "where", "is", "a", "北京", "🙂", "cat"]
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
MIB = 2 ** 20


def _text(n_bytes: int) -> str:
    words, size, i = [], 0, 0
    while size < n_bytes:
        word = WORDS[i % len(WORDS)]
        words.append(word)
        size += len(word.encode("utf-8")) + 1
        i += 1
    return " ".join(words).encode("utf-8")[:n_bytes].decode("utf-8", "ignore")


def build(root: str) -> dict:
    from kbert.tasks import squad
    from kbert.tasks.ner.model import build_model as build_ner

    tok = BertTokenizer(build_vocab(WORDS * 3, vocab_size=200, min_count=1), seq_length=32)

    def encoder():
        return BertEncoder(BertConfig(vocab_size=tok.vocab_size, hidden_size=16,
                                      num_layers=1, num_heads=2, intermediate_size=24,
                                      max_position_embeddings=64))

    keras.utils.set_random_seed(1)
    elmo = kbert.ELMo(kbert.ELMoConfig.preset("tiny"))
    return {
        "squad": export_squad(squad.build_model(encoder()), tok, f"{root}/squad/1",
                              max_seq_length=64, doc_stride=32, max_query_length=16,
                              n_best_size=5, max_answer_length=10,
                              version_2_with_negative=True),
        "ner": export_ner(build_ner(encoder(), LABELS), tok, f"{root}/ner/1", LABELS,
                          seq_length=32),
        "elmo": export_elmo(elmo, kbert.ELMoCharTokenizer(
            elmo.config.max_characters_per_token), f"{root}/elmo/1"),
    }


SIZES = {"squad": [12_500, 25_000, 50_000, 100_000, 200_000],
         "ner": [5_000, 10_000, 20_000, 40_000, 80_000],
         "elmo": [4_000, 8_000, 16_000, 32_000, 64_000]}


def request(kind: str, text: str) -> dict:
    if kind == "squad":
        return {"question": ["where is the museum ?"], "context": [text]}
    return {"text": [text]}


def main() -> int:
    with tempfile.TemporaryDirectory() as root:
        exports = build(root)
        print("| export | text bytes | words | peak resident over loaded (MiB) | "
              "MiB per 10 KB more than the row above |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for kind, sizes in SIZES.items():
            before = None
            for n in sizes:
                text = _text(n)
                report = run_c_loader(exports[kind], [request(kind, text)],
                                      max_rss=6 * 2 ** 30, timeout=600)
                grown = (report["peak_rss"][0] - report["loaded_rss"]) / MIB
                step = "" if before is None else \
                    f"{(grown - before[1]) / ((n - before[0]) / 10_000):.1f}"
                print(f"| {kind} | {n:,} | {len(text.split()):,} | {grown:.0f} | {step} |",
                      flush=True)
                before = (n, grown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
