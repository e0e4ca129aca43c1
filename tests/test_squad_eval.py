"""SQuAD official metrics on hand-made cases, and the validating reader."""

import json
import logging

import pytest

from kbert.tasks import squad


def _data(qas, context="The cat sat on the mat in Paris.", version=None):
    d = {"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
    if version:
        d["version"] = version
    return d


def test_normalization_rules():
    assert squad.normalize_answer("The  Cat, sat!") == "cat sat"
    assert squad.normalize_answer("an apple a day") == "apple day"
    assert squad.normalize_answer("Theatre") == "theatre"  # articles only as words
    assert squad.normalize_answer("«Café»") == "«café»"  # only ASCII punctuation goes
    assert squad.normalize_answer("") == ""


def test_v1_exact_and_f1_max_over_golds():
    data = _data([
        {"id": "q1", "question": "Where?", "answers": [
            {"text": "on the mat", "answer_start": 12}, {"text": "the mat", "answer_start": 15}]},
        {"id": "q2", "question": "Who?", "answers": [{"text": "The cat", "answer_start": 0}]},
        {"id": "q3", "question": "City?", "answers": [{"text": "Paris", "answer_start": 26}]},
        {"id": "q4", "question": "What?", "answers": [{"text": "sat", "answer_start": 8}]},
    ])
    preds = {"q1": "mat", "q2": "cat sat", "q3": "in Paris.", "q4": ""}
    # q1: EM 1 ("mat" == norm("the mat")); q2: F1 2*(1/2*1)/(1.5)=2/3; q3: F1 2/3; q4: 0.
    result = squad.evaluate(data, preds)
    assert set(result) == {"exact_match", "f1"}
    assert result["exact_match"] == pytest.approx(25.0)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3 + 2 / 3 + 0) / 4)


def test_v1_missing_prediction_scores_zero(caplog):
    data = _data([{"id": "q1", "question": "Who?", "answers": [{"text": "The cat",
                                                                 "answer_start": 0}]},
                  {"id": "q2", "question": "Who?", "answers": [{"text": "The cat",
                                                                 "answer_start": 0}]}])
    with caplog.at_level(logging.WARNING):
        result = squad.evaluate(data, {"q1": "the cat"})
    assert result == {"exact_match": 50.0, "f1": 50.0}
    assert "Unanswered question q2" in caplog.text


def _v2():
    return _data([
        {"id": "a1", "question": "Who?", "is_impossible": False,
         "answers": [{"text": "The cat", "answer_start": 0}]},
        {"id": "a2", "question": "Where?", "is_impossible": False,
         "answers": [{"text": "the mat", "answer_start": 15}]},
        {"id": "n1", "question": "Why?", "is_impossible": True, "answers": [],
         "plausible_answers": [{"text": "Paris", "answer_start": 26}]},
        {"id": "n2", "question": "When?", "is_impossible": True, "answers": []},
    ], version="v2.0")


def test_v2_splits_and_threshold():
    preds = {"a1": "cat", "a2": "mat on", "n1": "", "n2": "Paris"}
    result = squad.evaluate(_v2(), preds)
    # a1 exact; a2 F1 = 2*(1/2*1)/(1.5) = 2/3; n1 right (empty); n2 wrong.
    assert result["exact"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    assert (result["total"], result["HasAns_total"], result["NoAns_total"]) == (4, 2, 2)
    assert result["HasAns_exact"] == pytest.approx(50.0)
    assert result["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert result["NoAns_exact"] == result["NoAns_f1"] == pytest.approx(50.0)


def test_v2_best_threshold_sweep():
    preds = {"a1": "cat", "a2": "mat on", "n1": "", "n2": "Paris"}
    na = {"a1": 0.1, "a2": 0.3, "n1": 0.9, "n2": 0.8}
    result = squad.evaluate(_v2(), preds, na)
    # All "no answer" scores 2 (n1, n2). Ascending na, exact: a1 +1 -> 3 (0.1),
    # a2 +0 -> 3, n2 (a wrong answer) -1 -> 2, n1 (empty) +0 -> 2: best 3/4 at 0.1.
    # F1: a1 +1 -> 3 (0.1), a2 +2/3 -> 3.67 (0.3), then 2.67: best 3.67/4 at 0.3.
    assert result["best_exact"] == pytest.approx(75.0)
    assert result["best_exact_thresh"] == pytest.approx(0.1)
    assert result["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert result["best_f1_thresh"] == pytest.approx(0.3)
    # The default threshold (1.0) keeps every prediction: same as without na_probs.
    assert result["exact"] == squad.evaluate(_v2(), preds)["exact"]
    # Probabilities over 1.0 turn predictions into "no answer".
    forced = squad.evaluate(_v2(), preds, {"a1": 0.0, "a2": 0.0, "n1": 2.0, "n2": 2.0})
    assert forced["NoAns_exact"] == pytest.approx(100.0)


def test_v2_missing_prediction_names_the_question():
    with pytest.raises(ValueError, match="no prediction for question id n2"):
        squad.evaluate(_v2(), {"a1": "", "a2": "", "n1": ""})


def test_reader_v1_and_v2(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(_v2()))
    examples = squad.read_squad(path)
    assert [e.qid for e in examples] == ["a1", "a2", "n1", "n2"]
    assert examples[0].answers == [("The cat", 0)] and not examples[0].is_impossible
    assert examples[2].is_impossible and examples[2].plausible_answers == [("Paris", 26)]


def test_reader_bad_input_names_file_line_and_question(tmp_path, caplog):
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [\n  {"title": "x",\n   "paragraphs": [}\n]}')
    with pytest.raises(ValueError, match=r"bad\.json:3:\d+: not valid JSON"):
        squad.read_squad(bad)
    data = _data([
        {"id": "ok", "question": "Who?", "answers": [{"text": "The cat", "answer_start": 0}]},
        {"id": "shifted", "question": "Where?", "answers": [{"text": "mat", "answer_start": 3}]},
    ])
    data["data"][0]["paragraphs"].append(
        {"context": "  ", "qas": [{"id": "empty_ctx", "question": "?", "answers": []}]})
    with caplog.at_level(logging.WARNING):
        examples = squad.read_squad(data)
    assert [e.qid for e in examples] == ["ok"]
    assert "question id shifted: answers[0] answer_start=3 does not point at 'mat' " \
           "(the text occurs at 19)" in caplog.text
    assert "question id empty_ctx: empty context" in caplog.text
    assert "skipped 2 of 3 questions" in caplog.text
    with pytest.raises(ValueError, match="question id shifted"):
        squad.read_squad(data, strict=True)


# Answers that normalize to no tokens: articles, punctuation, empty strings.
EMPTY_AFTER_NORMALIZATION = ["the", "A", "an.", "", "!!", " the , a "]


def test_v1_f1_of_answers_without_tokens_is_zero():
    """evaluate-v1.1.py counts common tokens only: the pair ("the", "a") has exact
    match 1 (both normalize to "") and F1 0."""
    data = _data([{"id": "q1", "question": "Which?", "answers": [{"text": "the",
                                                                   "answer_start": 0}]}])
    assert squad.evaluate(data, {"q1": "a"}) == {"exact_match": 100.0, "f1": 0.0}
    assert squad.evaluate(data, {"q1": ""}) == {"exact_match": 100.0, "f1": 0.0}
    assert squad.f1("the", "a", "v1.1") == 0.0


def test_v2_f1_of_answers_without_tokens_is_one_when_both_are_empty():
    data = _data([{"id": "q1", "question": "Which?", "is_impossible": False,
                   "answers": [{"text": "the", "answer_start": 0}]}], version="v2.0")
    result = squad.evaluate(data, {"q1": "a"})
    assert (result["exact"], result["f1"]) == (100.0, 100.0)
    assert squad.f1("the", "a", "v2.0") == squad.f1("the", "a") == 1.0
    assert squad.f1("the", "cat", "v2.0") == 0.0
    with pytest.raises(ValueError, match="version='v3'"):
        squad.f1("a", "b", "v3")


def _generated(version: str, seed: int):
    """Questions whose golds and predictions mix real words with answers that
    normalize to nothing, so each script's F1 rule is exercised many times."""
    import random

    rng = random.Random(seed)
    words = ["cat", "the", "mat", "a", "Paris", "sat", "on", "an", "dog", ","]
    pool = EMPTY_AFTER_NORMALIZATION + ["cat", "the cat", "on the mat", "Paris!",
                                        "a dog sat", "mat mat"]

    def phrase():
        return rng.choice(pool) if rng.random() < 0.6 else " ".join(
            rng.choice(words) for _ in range(rng.randint(1, 4)))

    qas, preds, na = [], {}, {}
    for i in range(300):
        impossible = version == "v2.0" and rng.random() < 0.3
        golds = [] if impossible else [phrase() for _ in range(rng.randint(1, 3))]
        qa = {"id": f"q{i}", "question": "?",
              "answers": [{"text": g, "answer_start": 0} for g in golds]}
        if version == "v2.0":
            qa["is_impossible"] = impossible
        qas.append(qa)
        preds[qa["id"]] = "" if rng.random() < 0.2 else phrase()
        na[qa["id"]] = rng.random()
    data = _data(qas, version=version if version == "v2.0" else None)
    return data, preds, na


@pytest.mark.parity
@pytest.mark.parametrize("seed", [0, 1])
def test_v1_equals_the_official_script(seed):
    from tests.references import squad_official

    official = squad_official("v1.1")
    data, preds, _ = _generated("v1.1", seed)
    ours = squad.evaluate(data, preds)
    theirs = official.evaluate(data["data"], preds)
    assert ours["exact_match"] == pytest.approx(100 * theirs["exact_match"], abs=1e-9)
    assert ours["f1"] == pytest.approx(100 * theirs["final_f1"], abs=1e-9)
    # The generated answers hit the rule where v1.1 and v2.0 differ.
    assert squad.evaluate({"version": "v2.0", **data}, preds)["f1"] > ours["f1"]


@pytest.mark.parity
@pytest.mark.parametrize("seed", [0, 1])
def test_v2_equals_the_official_script(seed):
    from tests.references import squad_official

    official = squad_official("v2.0")
    data, preds, na = _generated("v2.0", seed)
    for probs in (None, na):
        ours = squad.evaluate(data, preds, probs)
        theirs = official.evaluate(data["data"], preds, probs)
        assert len(ours) == 13
        for key, value in ours.items():
            # Model Garden's copy names the official script's best_* keys final_*.
            assert value == pytest.approx(theirs[key.replace("best_", "final_")],
                                          abs=1e-9), key
