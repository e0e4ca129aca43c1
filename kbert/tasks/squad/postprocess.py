"""From start/end logits to answers, as BERT's run_squad.py `write_predictions`.

For every window, the `n_best_size` best start and end tokens are paired (end >= start,
at most `max_answer_length` tokens, start token in its max-context window); pairs of
all windows of a question are ranked by start + end logit. v2.0 adds the null answer,
scored by the smallest [CLS] start + end logit over the windows; the question gets
no answer when `null score - best span score > null_score_diff_threshold`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os

import numpy as np

from kbert.io import atomic_file


@dataclasses.dataclass
class SquadPredictions:
    answers: dict  # question id -> answer text ("" for no answer)
    spans: dict  # question id -> (start_char, end_char) in the context, (-1, -1) if none
    nbest: dict  # question id -> list of candidate dicts
    null_odds: dict  # v2.0: question id -> null score - best span score

    def write(self, output_dir: str) -> None:
        """Writes predictions.json, nbest_predictions.json and (v2.0) null_odds.json."""
        files = {"predictions.json": self.answers, "nbest_predictions.json": self.nbest}
        if self.null_odds:
            files["null_odds.json"] = self.null_odds
        for name, content in files.items():
            with atomic_file(os.path.join(output_dir, name)) as f:
                json.dump(content, f, indent=2, ensure_ascii=False)


def _top(logits, n):
    return np.argsort(-np.asarray(logits), kind="stable")[:n]


def postprocess(examples, features, start_logits, end_logits, n_best_size: int = 20,
                max_answer_length: int = 30, version_2_with_negative: bool = False,
                null_score_diff_threshold: float = 0.0) -> SquadPredictions:
    """Answers for `examples` from per-feature logits of shape [num_features, seq_length]."""
    by_example = collections.defaultdict(list)
    for i, feature in enumerate(features):
        by_example[feature.example_index].append(i)
    answers, spans, nbest_all, null_odds = {}, {}, {}, {}
    for ex_index, example in enumerate(examples):
        candidates = []
        null = None  # (score, start_logit, end_logit)
        for fi in by_example.get(ex_index, []):
            feature, s, e = features[fi], start_logits[fi], end_logits[fi]
            if version_2_with_negative:  # read where the packer puts "no answer"
                at = feature.null_position
                score = float(s[at] + e[at])
                if null is None or score < null[0]:
                    null = (score, float(s[at]), float(e[at]))
            best_ends = _top(e, n_best_size)
            for a in _top(s, n_best_size):
                if feature.char_spans[a] is None or not feature.max_context[a]:
                    continue
                for b in best_ends:
                    if feature.char_spans[b] is None or b < a or b - a + 1 > max_answer_length:
                        continue
                    start_char = feature.char_spans[a][0]
                    end_char = feature.char_spans[b][1]
                    candidates.append((float(s[a] + e[b]), float(s[a]), float(e[b]),
                                       start_char, end_char))
        if null is not None:
            candidates.append((null[0], null[1], null[2], -1, -1))
        candidates.sort(key=lambda c: -c[0])
        nbest, seen = [], set()
        for score, start_logit, end_logit, start_char, end_char in candidates:
            if len(nbest) >= n_best_size:
                break
            text = example.context[start_char:end_char] if start_char >= 0 else ""
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "start_logit": start_logit, "end_logit": end_logit,
                          "start_char": start_char, "end_char": end_char})
        if not nbest:
            nbest.append({"text": "", "start_logit": 0.0, "end_logit": 0.0,
                          "start_char": -1, "end_char": -1})
        scores = np.array([c["start_logit"] + c["end_logit"] for c in nbest])
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        for c, p in zip(nbest, probs):
            c["probability"] = float(p)
        best = next((c for c in nbest if c["text"]), None)
        chosen = nbest[0]
        if version_2_with_negative:
            best_score = best["start_logit"] + best["end_logit"] if best else 0.0
            diff = (null[0] if null else 0.0) - best_score
            null_odds[example.qid] = diff
            chosen = best if best and diff <= null_score_diff_threshold else None
        if chosen is None or not chosen["text"]:
            answers[example.qid], spans[example.qid] = "", (-1, -1)
        else:
            answers[example.qid] = chosen["text"]
            spans[example.qid] = (chosen["start_char"], chosen["end_char"])
        nbest_all[example.qid] = nbest
    return SquadPredictions(answers, spans, nbest_all, null_odds)
