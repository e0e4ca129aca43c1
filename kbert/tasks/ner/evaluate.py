"""Entity-level precision, recall and F1, as conlleval computes them.

conlleval (the CoNLL-2000/2003 scorer, and `seqeval`'s default mode) reads chunks
leniently: a chunk opens at `B-X`, `S-X`, or at `I-X`/`E-X` after `O`, after another
type or after a chunk end (`E-`/`S-`); it closes before any tag that does not continue
it. `mode="strict"` reads IOB2 strictly, as `seqeval`'s strict mode: a chunk is `B-X`
followed by `I-X`s; a stray `I-X` belongs to no chunk. Scores are percentages, as
conlleval prints them.
"""

from __future__ import annotations

import collections


def _parse(tag: str):
    if tag in ("O", "", None):
        return "O", ""
    if len(tag) > 2 and tag[1] == "-":
        return tag[0], tag[2:]
    return "I", tag  # conlleval reads a bare type as I-type


def _starts(prev_prefix, prev_type, prefix, kind) -> bool:
    """conlleval's startOfChunk."""
    if prefix in ("B", "S"):
        return True
    if prefix in ("I", "E"):
        return prev_prefix in ("O", "E", "S") or prev_type != kind
    return False


def _ends(prefix, kind, next_prefix, next_type) -> bool:
    """conlleval's endOfChunk: does a chunk of (prefix, kind) end before the next tag?"""
    if prefix in ("E", "S"):
        return True
    if prefix in ("B", "I"):
        return next_prefix in ("B", "S", "O") or next_type != kind
    return False


def chunks(tags: list[str], mode: str = "conlleval") -> list[tuple[str, int, int]]:
    """(type, first, last) of each chunk, word indices inclusive."""
    parsed = [_parse(t) for t in tags]
    out = []
    if mode == "strict":
        i = 0
        while i < len(parsed):
            prefix, kind = parsed[i]
            if prefix == "B":
                j = i
                while j + 1 < len(parsed) and parsed[j + 1] == ("I", kind):
                    j += 1
                out.append((kind, i, j))
                i = j + 1
            else:
                i += 1
        return out
    if mode != "conlleval":
        raise ValueError(f"unknown mode {mode!r}: use 'conlleval' or 'strict'")
    start = None
    prev = ("O", "")
    for i, (prefix, kind) in enumerate(parsed):
        if prefix != "O" and _starts(prev[0], prev[1], prefix, kind):
            start = i
        nxt = parsed[i + 1] if i + 1 < len(parsed) else ("O", "")
        if start is not None and prefix != "O" and _ends(prefix, kind, *nxt):
            out.append((kind, start, i))
            start = None
        prev = (prefix, kind)
    return out


def _as_sentences(tags):
    if tags and isinstance(tags[0], str):
        return [list(tags)]
    return [list(s) for s in tags]


def evaluate(true_tags, pred_tags, mode: str = "conlleval") -> dict:
    """Micro precision/recall/F1 over entity chunks, overall and per type.

    Args:
        true_tags, pred_tags: lists of sentences of tags (or one flat list); sentence
            ends close chunks.
        mode: "conlleval" (default: what papers report) or "strict" (IOB2 spans).

    Returns:
        {"precision", "recall", "f1", "accuracy" (token level), "per_type": {type:
        {"precision", "recall", "f1", "support"}}}, scores in 0..100.
    """
    true_s, pred_s = _as_sentences(true_tags), _as_sentences(pred_tags)
    if len(true_s) != len(pred_s):
        raise ValueError(f"{len(true_s)} gold sentences, {len(pred_s)} predicted")
    gold, found = set(), set()
    correct_tokens = total_tokens = 0
    for n, (t, p) in enumerate(zip(true_s, pred_s)):
        if len(t) != len(p):
            raise ValueError(f"sentence {n}: {len(t)} gold tags, {len(p)} predicted")
        gold |= {(n, *c) for c in chunks(t, mode)}
        found |= {(n, *c) for c in chunks(p, mode)}
        correct_tokens += sum(a == b for a, b in zip(t, p))
        total_tokens += len(t)

    def score(g, f):
        hit = len(g & f)
        precision = 100.0 * hit / len(f) if f else 0.0
        recall = 100.0 * hit / len(g) if g else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"precision": precision, "recall": recall, "f1": f1}

    by_type_gold, by_type_found = collections.defaultdict(set), collections.defaultdict(set)
    for c in gold:
        by_type_gold[c[1]].add(c)
    for c in found:
        by_type_found[c[1]].add(c)
    per_type = {k: {**score(by_type_gold[k], by_type_found[k]), "support": len(by_type_gold[k])}
                for k in sorted(set(by_type_gold) | set(by_type_found))}
    return {**score(gold, found),
            "accuracy": 100.0 * correct_tokens / total_tokens if total_tokens else 0.0,
            "per_type": per_type}
