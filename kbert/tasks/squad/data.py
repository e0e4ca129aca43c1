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
    """Loads a SQuAD file as SQuAD's own nested JSON (`data` -> `paragraphs` -> `qas`):
    SQuAD v1.1 / v2.0 files as distributed, or the flat records of Hugging Face's
    run_qa.py / `datasets`' `squad` (`id`, `title`, `context`, `question`, `answers`:
    {`text`: [...], `answer_start`: [...]}, empty for an unanswerable question) as JSON
    Lines (`.jsonl`) or under `data` in a `.json`. Malformed input is an error naming
    the file and line."""
    path = os.fspath(path)
    if path.lower().endswith(".jsonl"):
        from kbert.tasks.own_data import read_rows

        return records_to_squad(read_rows(path, "--train_file")[1], path)
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"{path}: not a SQuAD file (expected an object with a 'data' list)")
    first = data["data"][0] if data["data"] else {}
    if isinstance(first, dict) and "paragraphs" not in first and "context" in first:
        return records_to_squad(list(enumerate(data["data"], start=1)), path, "record")
    return data


def records_to_squad(rows, path: str, unit: str = "line") -> dict:
    """Flat question records [(line, record)] -> SQuAD's nested JSON: one article per
    title, one paragraph per run of records with the same context, in file order."""

    def where(line):
        return f"{path}:{line}" if unit == "line" else f"{path}: {unit} {line}"

    articles: list[dict] = []
    for line, rec in rows:
        for key in ("id", "context", "question"):
            if not isinstance(rec.get(key), str):
                raise ValueError(f"{where(line)}: no {key!r} text")
        answers = rec.get("answers", {"text": [], "answer_start": []})
        if isinstance(answers, dict):
            texts, starts = answers.get("text"), answers.get("answer_start")
            if not isinstance(texts, list) or not isinstance(starts, list) \
                    or len(texts) != len(starts):
                raise ValueError(f"{where(line)}: 'answers' needs lists 'text' and "
                                 "'answer_start' of one length")
            answers = [{"text": t, "answer_start": a} for t, a in zip(texts, starts)]
        elif not isinstance(answers, list):
            raise ValueError(f"{where(line)}: 'answers' is a {type(answers).__name__}")
        title = str(rec.get("title", ""))
        if not articles or articles[-1]["title"] != title:
            articles.append({"title": title, "paragraphs": []})
        paragraphs = articles[-1]["paragraphs"]
        if not paragraphs or paragraphs[-1]["context"] != rec["context"]:
            paragraphs.append({"context": rec["context"], "qas": []})
        qa = {"id": rec["id"], "question": rec["question"], "answers": answers}
        if not answers:  # datasets' squad_v2: no answers is an unanswerable question
            qa["is_impossible"] = True
        paragraphs[-1]["qas"].append(qa)
    return {"version": "records", "data": articles}


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


def squad_source(args) -> str:
    """What the SQuAD metrics measure, for the results file: the --predict_file, the
    TFDS validation split, or the bundled sample's dev part."""
    if getattr(args, "tfds", False):
        return f"tfds squad/{'v2.0' if args.version_2_with_negative else 'v1.1'} validation"
    if args.predict_file:
        return args.predict_file
    return os.path.join(args.output_dir, "sample_dev.json")
