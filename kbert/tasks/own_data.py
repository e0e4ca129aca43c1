"""A user's own data files for the task commands, as Hugging Face's example scripts
take them: CSV (header row), TSV (header row, quoting off), JSON Lines (one object per
line; a `.json` file may also hold one JSON array of objects). Rows come back as
(line number, {column: value}); every error names the file, the line and the column.
No TensorFlow here."""

from __future__ import annotations

import csv
import json
import os

FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "json"}


def file_format(path: str, flag: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"{flag} {path}: unknown format {ext or '(no extension)'!r}; "
                         "use .csv, .tsv, .json or .jsonl")
    return FORMATS[ext]


def read_rows(path: str, flag: str) -> tuple[list[str], list[tuple[int, dict]]]:
    """(the columns in file order, [(line, row)]) of a CSV, TSV or JSON (Lines) file.
    A UTF-8 byte-order mark is skipped; blank lines of JSON Lines are skipped."""
    fmt = file_format(path, flag)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{flag} {path}: no such file")
    if fmt == "json":
        return _json_rows(path)
    with open(path, encoding="utf-8-sig", newline="") as f:
        if fmt == "csv":
            reader = csv.reader(f)
        else:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path}: empty file (expected a header row)") from None
        except csv.Error as e:
            raise ValueError(f"{path}:1: {e}") from None
        if len(set(header)) != len(header):
            twice = sorted({c for c in header if header.count(c) > 1})
            raise ValueError(f"{path}:1: column(s) {twice} appear twice in the header")
        rows = []
        try:
            for fields in reader:
                line = reader.line_num
                if not fields or fields == [""]:
                    continue
                if len(fields) != len(header):
                    raise ValueError(f"{path}:{line}: {len(fields)} fields, expected "
                                     f"{len(header)} ({', '.join(header)})")
                rows.append((line, dict(zip(header, fields))))
        except csv.Error as e:
            raise ValueError(f"{path}:{reader.line_num}: {e}") from None
    return header, rows


def _json_rows(path: str) -> tuple[list[str], list[tuple[int, dict]]]:
    with open(path, encoding="utf-8-sig") as f:
        text = f.read()
    rows: list[tuple[int, dict]] = []
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: not JSON ({e.msg})") from None
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise ValueError(f"{path}: item {i} is a {type(item).__name__}, "
                                 "expected an object")
            rows.append((i + 1, item))  # items carry no lines of their own: their index
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not JSON Lines ({e.msg})") from None
            if not isinstance(item, dict):
                raise ValueError(f"{path}:{number}: a {type(item).__name__}, expected an "
                                 "object")
            rows.append((number, item))
    columns: list[str] = []
    for _, item in rows:
        columns += [k for k in item if k not in columns]
    return columns, rows


def field(path: str, line: int, row: dict, column: str, kind: str = "text"):
    """`row[column]`, or one error naming file, line and column: missing, or (text) not
    a non-empty string."""
    if column not in row or row[column] is None:
        raise ValueError(f"{path}:{line}: no {column!r} column")
    value = row[column]
    if kind == "text":
        if not isinstance(value, str):
            raise ValueError(f"{path}:{line}: column {column!r} is a {type(value).__name__}, "
                             "expected text")
        if not value.strip():
            raise ValueError(f"{path}:{line}: column {column!r} is empty")
    return value
