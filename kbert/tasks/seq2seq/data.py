"""Source -> target pairs from a user's files, as transformers' `run_summarization.py`
and `run_translation.py` take them: CSV, TSV or JSON (Lines) with a source and a target
column (`--text_column`, `--summary_column`; default `source` and `target`), or
run_translation's layout, one `{"translation": {"en": ..., "de": ...}}` object per
line, read with `--source_lang` and `--target_lang`. A source given as a list of turns
(JSON) is a dialogue: the turns joined, one per line, the next turn the target.
Every error names the file, the line and the column. No TensorFlow here."""

from __future__ import annotations

import dataclasses

from kbert.tasks.own_data import field, read_rows

# Dialogue turns are joined with a newline: it survives every family's tokenizer as
# whitespace (T5's SentencePiece, BART's and GPT-2's byte-level BPE), and ROUGE-Lsum
# reads newlines as sentence ends.
TURN_SEPARATOR = "\n"


@dataclasses.dataclass(frozen=True)
class Pair:
    """One example: where it is (file, line), the model's input without the prefix
    (`source`), and the reference output (`target`; None in a test file without one)."""

    path: str
    line: int
    source: str
    target: str | None


@dataclasses.dataclass(frozen=True)
class Columns:
    """What a file's rows are read with: two columns, or the translation layout's
    languages (`source_lang` set)."""

    text: str = "source"
    summary: str = "target"
    source_lang: str | None = None
    target_lang: str | None = None

    @property
    def is_translation(self) -> bool:
        return self.source_lang is not None


def _text(path: str, line: int, row: dict, column: str) -> str:
    """A text column's value: a string, or (a dialogue) a non-empty list of non-empty
    strings joined one turn per line."""
    value = row.get(column)
    if isinstance(value, list):
        if not value:
            raise ValueError(f"{path}:{line}: column {column!r} is an empty list of turns")
        for i, turn in enumerate(value):
            if not isinstance(turn, str) or not turn.strip():
                raise ValueError(f"{path}:{line}: column {column!r}, turn {i}: expected a "
                                 "non-empty string")
        return TURN_SEPARATOR.join(value)
    return field(path, line, row, column)


def _translation(path: str, line: int, row: dict, lang: str, what: str) -> str:
    pair = row.get("translation")
    if not isinstance(pair, dict):
        raise ValueError(f"{path}:{line}: no 'translation' object (the run_translation.py "
                         "layout: {\"translation\": {\"en\": ..., \"de\": ...}})")
    if lang not in pair:
        raise ValueError(f"{path}:{line}: 'translation' has no {lang!r} text ({what}; it has "
                         f"{', '.join(map(repr, pair)) or 'none'})")
    return field(path, line, pair, lang)


def read_pairs(path: str, flag: str, columns: Columns, *, targets: bool = True
               ) -> list[Pair]:
    """The pairs of one file, in file order. `targets=False` (a test file): a missing
    target column is allowed (the pairs' targets are None)."""
    header, rows = read_rows(path, flag)
    if not rows:
        raise ValueError(f"{flag} {path}: no rows")
    pairs = []
    if columns.is_translation:
        for line, row in rows:
            source = _translation(path, line, row, columns.source_lang, "--source_lang")
            target = _translation(path, line, row, columns.target_lang, "--target_lang") \
                if targets or columns.target_lang in (row.get("translation") or {}) else None
            pairs.append(Pair(path, line, source, target))
        return pairs
    if columns.text not in header:
        raise ValueError(f"{path}: no {columns.text!r} column (--text_column; the file has "
                         f"{', '.join(map(repr, header))})")
    has_target = columns.summary in header
    if targets and not has_target:
        raise ValueError(f"{path}: no {columns.summary!r} column (--summary_column; the file "
                         f"has {', '.join(map(repr, header))})")
    for line, row in rows:
        target = _text(path, line, row, columns.summary) if has_target else None
        pairs.append(Pair(path, line, _text(path, line, row, columns.text), target))
    return pairs


def guess_columns(path: str, flag: str) -> str:
    """'translation' when the file's first row has a `translation` object (JSON), else
    'columns'. Used for --metric's default (translation -> bleu)."""
    header, rows = read_rows(path, flag)
    if rows and isinstance(rows[0][1].get("translation"), dict):
        return "translation"
    return "columns"
