"""Reading SQuAD v1.1 / v2.0 JSON into validated examples."""

from __future__ import annotations

import dataclasses
import logging
import os

from kbert.io import read_json

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SquadExample:
    """One question on one context.

    `answers` are (text, char_start) pairs into `context` (code points). For v2.0
    unanswerable questions `answers` is empty, `is_impossible` is True and
    `plausible_answers` may hold the annotators' plausible spans.
    """

    qid: str
    question: str
    context: str
    answers: list[tuple[str, int]]
    is_impossible: bool = False
    plausible_answers: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    title: str = ""


def load_json(path: str | os.PathLike) -> dict:
    """Loads a SQuAD file; malformed JSON is an error naming the file and line."""
    path = os.fspath(path)
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"{path}: not a SQuAD file (expected an object with a 'data' list)")
    return data


def read_squad(path_or_json, strict: bool = False, source: str | None = None
               ) -> list[SquadExample]:
    """Reads SQuAD v1.1 or v2.0 examples, checking every answer against its context.

    Args:
        path_or_json: a file path or the already loaded JSON object.
        strict: raise on a bad question instead of skipping it with a warning.
        source: the name warnings and errors give an already loaded JSON object (its
            file); a path names itself.

    A question is bad when its context is empty, its question text is empty, or an
    answer's `answer_start` does not point at the answer text in the context. Each
    problem names the question id; without `strict`, bad questions are skipped and a
    summary warning gives their number.

    Returns:
        The valid examples, in file order.
    """
    source = source or "<json>"
    if isinstance(path_or_json, (str, os.PathLike)):
        source = os.fspath(path_or_json)
        path_or_json = load_json(source)
    examples, problems = [], []
    seen: set[str] = set()
    for article in path_or_json["data"]:
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context", "")
            for qa in paragraph.get("qas", []):
                qid = str(qa.get("id", ""))
                try:
                    examples.append(_example(qa, qid, context, article.get("title", ""),
                                             seen))
                except ValueError as e:
                    if strict:
                        raise ValueError(f"{source}: {e}") from None
                    problems.append(str(e))
                    logger.warning("%s: skipping: %s", source, e)
    if problems:
        logger.warning("%s: skipped %d of %d questions", source, len(problems),
                       len(problems) + len(examples))
    return examples


def _spans(answers, qid, context, field):
    spans = []
    for i, answer in enumerate(answers):
        text, start = answer.get("text"), answer.get("answer_start")
        if not isinstance(text, str) or not isinstance(start, int):
            raise ValueError(f"question id {qid}: {field}[{i}] needs 'text' and an integer "
                             "'answer_start'")
        if context[start:start + len(text)] != text:
            found = context.find(text)
            hint = f" (the text occurs at {found})" if found >= 0 else ""
            raise ValueError(f"question id {qid}: {field}[{i}] answer_start={start} does not "
                             f"point at {text!r}{hint}")
        spans.append((text, start))
    return spans


def _example(qa, qid, context, title, seen) -> SquadExample:
    if not qid:
        raise ValueError("a question has no 'id'")
    if qid in seen:
        raise ValueError(f"question id {qid} appears twice")
    seen.add(qid)
    if not context.strip():
        raise ValueError(f"question id {qid}: empty context")
    question = qa.get("question", "")
    if not question.strip():
        raise ValueError(f"question id {qid}: empty question")
    impossible = bool(qa.get("is_impossible", False))
    answers = _spans(qa.get("answers", []), qid, context, "answers")
    if impossible and answers:
        raise ValueError(f"question id {qid}: is_impossible but has answers")
    if not impossible and not answers and "is_impossible" not in qa:
        raise ValueError(f"question id {qid}: no answers")
    plausible = _spans(qa.get("plausible_answers", []), qid, context, "plausible_answers")
    return SquadExample(qid, question, context, answers, impossible or not answers,
                        plausible, title)
