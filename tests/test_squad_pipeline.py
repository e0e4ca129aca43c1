"""SQuAD windows and post-processing lose nothing: an oracle scores 100."""

import json

import numpy as np
import pytest

from kbert import BertTokenizer, build_vocab
from kbert.tasks import squad
from kbert.tasks.squad.features import (convert_examples, feature_arrays, is_max_context,
                                        window_starts)
from kbert.tasks.squad.postprocess import postprocess
from kbert.tasks.squad.sample import make_sample


@pytest.fixture(scope="module")
def tokenizer():
    data = make_sample(40, seed=3, version_2=True)
    texts = [p["context"] for a in data["data"] for p in a["paragraphs"]]
    texts += [q["question"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    return BertTokenizer(build_vocab(texts, vocab_size=600, min_count=1))


def _oracle(features, seq_length):
    """Logits that put all mass on the labelled positions ([CLS] when absent)."""
    start = np.full((len(features), seq_length), -10.0)
    end = np.full((len(features), seq_length), -10.0)
    for i, f in enumerate(features):
        start[i, f.start_position] = 10.0
        end[i, f.end_position] = 10.0
    return start, end


@pytest.mark.parametrize("version_2", [False, True])
def test_oracle_scores_100(tokenizer, version_2):
    data = make_sample(40, seed=3, version_2=version_2)
    examples = squad.read_squad(data, strict=True)
    kwargs = dict(max_seq_length=64, doc_stride=16, max_query_length=24)
    features = convert_examples(examples, tokenizer, is_training=True, **kwargs)
    start, end = _oracle(features, 64)
    result = postprocess(examples, features, start, end, version_2_with_negative=version_2)
    metrics = squad.evaluate(data, result.answers,
                             result.null_odds if version_2 else None)
    if version_2:
        assert metrics["exact"] == metrics["f1"] == 100.0
        assert metrics["NoAns_total"] > 10 and metrics["HasAns_total"] > 100
    else:
        assert metrics == {"exact_match": 100.0, "f1": 100.0}
    # The answers are exact substrings of the contexts.
    by_id = {e.qid: e for e in examples}
    for qid, (s, e) in result.spans.items():
        if s >= 0:
            assert by_id[qid].context[s:e] == result.answers[qid]
            assert (result.answers[qid], s) == by_id[qid].answers[0]
    # The sample exercises what the test claims: many windows per context, answers in
    # later windows, and answers cut by a window's edge.
    windows = {}
    for f in features:
        windows[f.example_index] = max(windows.get(f.example_index, 0), f.window_index + 1)
    assert max(windows.values()) >= 4
    later = sum(1 for f in features if f.window_index > 0 and f.start_position > 0)
    assert later > 50
    answered = {f.example_index for f in features if f.start_position > 0}
    cut = 0
    for f in features:
        ex = examples[f.example_index]
        if ex.is_impossible or f.start_position > 0:
            continue
        text, a = ex.answers[0]
        inside = [sp for sp in f.char_spans if sp and sp[0] < a + len(text) and sp[1] > a]
        cut += bool(inside)  # part of the answer is in this window, not all of it
    assert cut > 5 and len(answered) == sum(not e.is_impossible for e in examples)


def test_window_rules_match_run_squad():
    assert window_starts(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert window_starts(3, 4, 2) == [(0, 3)]
    spans = window_starts(10, 4, 3)
    # Token 4 is at the edge of window 0 (end 3), 1 from the left in window 1: window 1.
    assert [is_max_context(spans, w, 4) for w in range(3)] == [False, True, False]
    # Token 6: window 1 (left 3, right 0) vs window 2 (left 0, right 3): tie -> first.
    assert [is_max_context(spans, w, 6) for w in range(3)] == [False, True, False]


def test_features_layout_and_long_question(tokenizer, caplog):
    data = make_sample(2, seed=5)
    examples = squad.read_squad(data)
    examples[0].question = " ".join(["which instrument"] * 30)
    features = convert_examples(examples, tokenizer, max_seq_length=48, doc_stride=16,
                                max_query_length=8, is_training=True)
    assert f"question id {examples[0].qid}: question has 60 tokens, cut to " \
           "max_query_length=8" in caplog.text
    f = next(f for f in features if f.example_index == 0)
    arrays = feature_arrays(features)
    assert arrays["token_ids"].shape == (len(features), 48)
    x = f.inputs
    assert x["token_ids"][0] == tokenizer.cls_id and x["token_ids"][9] == tokenizer.sep_id
    assert list(x["segment_ids"][:10]) == [0] * 10 and x["segment_ids"][10] == 1
    assert f.char_spans[9] is None and f.char_spans[10] is not None  # context from 10
    # A question that leaves no room for context is cut to max_seq_length - 4 tokens,
    # as the SavedModel does (it stopped the whole run before), with a warning.
    caplog.clear()
    short = convert_examples(examples[:1], tokenizer, max_seq_length=10, max_query_length=8)
    question_part = [int(((f.inputs["segment_ids"] == 0) & (f.inputs["padding_mask"] == 1)).sum())
                     for f in short]
    assert short and question_part == [8] * len(short)  # [CLS], 6 tokens, [SEP]
    assert f"question id {examples[0].qid}: question has 60 tokens, cut to 6 " \
           "(max_seq_length=10 less 3 special tokens and one context token)" in caplog.text
    with pytest.raises(ValueError, match="max_seq_length=4 leaves no room"):
        convert_examples(examples[1:], tokenizer, max_seq_length=4, max_query_length=8)


def test_null_threshold_and_files(tokenizer, tmp_path):
    data = make_sample(3, seed=9, version_2=True)
    examples = squad.read_squad(data)
    features = convert_examples(examples, tokenizer, max_seq_length=64, doc_stride=16,
                                max_query_length=24, is_training=True)
    start, end = _oracle(features, 64)
    strict = postprocess(examples, features, start, end, version_2_with_negative=True,
                         null_score_diff_threshold=-1000.0)
    assert all(a == "" for a in strict.answers.values())  # any null beats every span
    result = postprocess(examples, features, start, end, version_2_with_negative=True)
    result.write(str(tmp_path))
    written = json.loads((tmp_path / "predictions.json").read_text())
    assert written == result.answers
    nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())
    first = nbest[examples[0].qid]
    assert abs(sum(c["probability"] for c in first) - 1) < 1e-6 and len(first) <= 20
    assert set(json.loads((tmp_path / "null_odds.json").read_text())) == set(result.answers)
