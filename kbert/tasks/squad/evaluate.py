"""SQuAD's official metrics: the v1.1 and v2.0 evaluation scripts' numbers.

Answers are compared after normalization (lower case, ASCII punctuation removed, the
articles a/an/the removed, whitespace collapsed). Exact match and token F1 take the
best over the gold answers. v2.0 adds unanswerable questions (gold answer ""), the
HasAns/NoAns splits, a no-answer probability threshold and the best thresholds.

The two scripts differ in one F1 rule, and each dataset is scored with its own
version's: when the prediction or the gold answer normalizes to no tokens (an answer
such as "the", or an empty prediction), `evaluate-v1.1.py` scores F1 0 (no common
tokens), while `evaluate-v2.0.py` scores 1 if both are empty and 0 otherwise. Exact
match is the same in both (two empty strings match).
"""

from __future__ import annotations

import collections
import logging
import re
import string

logger = logging.getLogger(__name__)

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower case, drop ASCII punctuation, drop articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str, version: str = "v2.0") -> float:
    """Token F1 of normalized answers, by the rule of the official script `version`.

    "v2.0": two answers without tokens score 1, one without tokens scores 0.
    "v1.1": any answer without tokens scores 0 (the script counts common tokens only).
    """
    if version not in ("v1.1", "v2.0"):
        raise ValueError(f"version={version!r}: use 'v1.1' or 'v2.0'")
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if version == "v2.0" and (not pred_tokens or not gold_tokens):
        return float(pred_tokens == gold_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    data = dataset["data"] if isinstance(dataset, dict) else dataset
    for article in data:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def is_v2(dataset) -> bool:
    if isinstance(dataset, dict) and str(dataset.get("version", "")).startswith("v2"):
        return True
    return any("is_impossible" in qa for qa in _questions(dataset))


def evaluate(dataset, predictions: dict, na_probs: dict | None = None) -> dict:
    """Scores predictions as the official SQuAD script of the data's version does.

    Args:
        dataset: the SQuAD JSON (dict with "data") or its "data" list.
        predictions: question id -> predicted answer text ("" for no answer).
        na_probs: v2.0 only: question id -> probability of no answer (default 0).

    Returns:
        Each version scored with its own script's F1 rule (see `f1`).
        v1.1: {"exact_match", "f1"}; v2.0: {"exact", "f1", "total", "HasAns_exact",
        "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total",
        "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"}; scores 0..100.
    """
    if is_v2(dataset) or na_probs is not None:
        return _evaluate_v2(dataset, predictions, na_probs)
    return _evaluate_v1(dataset, predictions)


def _evaluate_v1(dataset, predictions):
    total = em = f1_sum = 0.0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            logger.warning("Unanswered question %s will receive score 0.", qa["id"])
            continue
        golds = [a["text"] for a in qa["answers"]]
        pred = predictions[qa["id"]]
        em += max(exact_match(pred, g) for g in golds)
        f1_sum += max(f1(pred, g, "v1.1") for g in golds)
    if not total:
        raise ValueError("the dataset has no questions")
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1_sum / total}


def _evaluate_v2(dataset, predictions, na_probs):
    has_answer, exact, f1s = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
        has_answer[qid] = bool(qa["answers"])
        if qid not in predictions:
            raise ValueError(f"no prediction for question id {qid}")
        golds = golds or [""]
        exact[qid] = max(exact_match(predictions[qid], g) for g in golds)
        f1s[qid] = max(f1(predictions[qid], g, "v2.0") for g in golds)
    if not exact:
        raise ValueError("the dataset has no questions")
    na_probs = na_probs if na_probs is not None else {k: 0.0 for k in predictions}
    missing = [q for q in exact if q not in na_probs]
    if missing:
        raise ValueError(f"no no-answer probability for question id {missing[0]}")

    def threshold(scores, thresh=1.0):
        return {q: float(not has_answer[q]) if na_probs[q] > thresh else s
                for q, s in scores.items()}

    def summary(e, f, qids):
        n = len(qids)
        return {"exact": 100.0 * sum(e[q] for q in qids) / n,
                "f1": 100.0 * sum(f[q] for q in qids) / n, "total": n}

    e_t, f_t = threshold(exact), threshold(f1s)
    out = summary(e_t, f_t, list(exact))
    for name, qids in (("HasAns", [q for q in exact if has_answer[q]]),
                       ("NoAns", [q for q in exact if not has_answer[q]])):
        if qids:
            for key, value in summary(e_t, f_t, qids).items():
                out[f"{name}_{key}"] = value
    for key, scores in (("exact", exact), ("f1", f1s)):
        best, thresh = _best_threshold(predictions, scores, na_probs, has_answer)
        out[f"best_{key}"], out[f"best_{key}_thresh"] = best, thresh
    return out


def _best_threshold(predictions, scores, na_probs, has_answer):
    """Sweeps the no-answer threshold over the sorted probabilities, as the v2 script."""
    score = best = sum(1 for q in scores if not has_answer[q])
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, best_thresh = score, na_probs[qid]
    return 100.0 * best / len(scores), best_thresh
