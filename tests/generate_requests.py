"""Hostile requests to `generate` exports (#49), and what their answers must be: empty
batches, fresh randomness that a global seed at export time does not freeze, decoding
settings that cannot be meant, ids out of the vocabulary, text after a NUL byte, and
requests sent at once by several threads.

Each family's test file sends them to the one `generate` export it writes anyway
(test_gpt_export, test_t5, test_bart): the exporter's own C++-loader load answers them
beside the file's other requests (`keep_served(also=...)`), so that no export is
written for these checks alone (#54); a check about a second process or threads starts
its own."""

from __future__ import annotations

ROWS = dict(max_new_tokens=[6], temperature=[1.0], top_k=[0], top_p=[1.0], seed=[-1],
            repetition_penalty=[1.0], no_repeat_ngram_size=[0], min_new_tokens=[0],
            num_beams=[1])


def request(prompt="The quick brown fox", **settings) -> dict:
    """One row of the per-request `generate` signature: ROWS' values, but `settings`."""
    return {"prompt": [prompt], **{k: [settings.get(k, v[0])] for k, v in ROWS.items()}}


EMPTY = [{"prompt": []}, {k: [] for k in ROWS} | {"prompt": []}]
EMPTY_SIGNATURES = ["serving_default", "generate"]
FRESH = [request(seed=-1, max_new_tokens=8)] * 2 + [request(seed=11, max_new_tokens=8)]
CANNOT_BE_MEANT = [request(**{name: value}) for name, value in [
    ("temperature", float("inf")), ("repetition_penalty", float("inf")), ("top_k", 10 ** 9),
    ("min_new_tokens", 10 ** 9), ("temperature", 1e9)]]
OUT_OF_VOCABULARY = [{"token_ids": [[5, -1]], "padding_mask": [[1, 1]]},
                     {"token_ids": [[5, 50257]], "padding_mask": [[1, 1]]},
                     {"token_ids": [[5, 7, 9]], "padding_mask": [[1, 1]]},
                     {"token_ids": [[5, 7]], "padding_mask": [[1, 1]]}]
NUL = [request(p, temperature=0.0, min_new_tokens=4)
       for p in ["hello\x00world foo bar", "hello"]]
_PROMPTS = ["The quick brown fox", "Hello", "数字 and émoji 🙂", "It's", "1234", "a b c",
            "Zürich", "?"]
CONCURRENT = [request(_PROMPTS[n % 8], seed=n % 5, max_new_tokens=1 + n % 8,
                      temperature=0.0 if n % 3 == 0 else 0.9) for n in range(64)]

# (signature names, requests) of each check, for `keep_served(also=...)`: GPT-2's
# export gets every one; the encoder-decoders' the empty batches and the NUL byte.
GPT_CASES = {"empty": (EMPTY_SIGNATURES, EMPTY), "fresh": (["generate"] * 3, FRESH),
             "cannot_be_meant": (["generate"] * 5, CANNOT_BE_MEANT),
             "out_of_vocabulary": (["token_ids"] * 4, OUT_OF_VOCABULARY),
             "concurrent": (["generate"] * 64, CONCURRENT)}
SEQ2SEQ_CASES = {"empty": (EMPTY_SIGNATURES, EMPTY), "nul": (["generate"] * 2, NUL)}


def also(cases: dict) -> list[tuple[str, dict]]:
    """`cases`' (signature name, request) pairs, for `keep_served(also=...)`."""
    return [pair for names, requests in cases.values() for pair in zip(names, requests)]


def answers(export_dir: str, cases: dict) -> dict:
    """{case: the answers of the exporter's own load (inside its `keep_served`), a
    refusal as {"error": line}}."""
    from kbert.export.check import served_results

    return {case: served_results(export_dir, requests, names, each=True)
            for case, (names, requests) in cases.items()}


def check_empty_batches(results: list[dict]) -> None:
    """Both signatures answer an empty batch with empty outputs, not an error."""
    assert len(results) == 2
    for result in results:
        assert result and "error" not in result, result
        assert all(v["shape"][0] == 0 for v in result.values()), result


def check_nul_byte(results: list[dict]) -> None:
    """The text after a NUL byte reaches the encoder: "hello\\x00world foo bar" is not
    answered as "hello"."""
    a, b = ((r["text"]["value"][0], r["logprob"]["value"][0]) for r in results)
    assert a != b
