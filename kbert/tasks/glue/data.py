"""Readers for the official GLUE TSV files, as distributed, and for TFDS `glue/*`.

The files are tab-separated with quoting off: a text may contain `"` or `'`, and
only `\\n` ends a row (a stray `\\r` inside a text is kept). Columns are found by
header name, so MNLI's many columns and MRPC's `#1 String` need nothing special;
CoLA's train and dev files have no header (source, label, original label, sentence).
Every row must have as many fields as the header: otherwise the error names the file
and line. The one known exception is QQP, whose train and dev files hold a few rows
with missing fields: those are skipped, with a warning that names file and lines.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from kbert.tasks.glue.tasks import GlueTask, get_task

logger = logging.getLogger(__name__)

_COLA_COLUMNS = ("source", "label", "original_label", "sentence")


@dataclasses.dataclass
class GlueExample:
    """`label`: a label string, a float (STS-B), or None in test files. `index`: the id
    the submission file needs (test files) or the row number."""

    index: str
    text_a: str
    text_b: str | None
    label: str | float | None


def _rows(path: str):
    """(line number, fields) of each non-empty line; only '\\n' ends a row. A UTF-8
    byte-order mark (GLUE's own MRPC files start with one) is not part of the header."""
    with open(path, encoding="utf-8-sig", newline="\n") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if line.endswith("\r"):
                line = line[:-1]
            if line:
                yield number, line.split("\t")


def read_tsv(task, path: str, split: str = "train") -> list[GlueExample]:
    """Reads one official GLUE TSV file of `task` (the split tells test from labelled)."""
    task = get_task(task)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such GLUE file (task {task.name}, split {split})")
    is_test = split.startswith("test")
    rows = _rows(path)
    if task.header or is_test:
        try:
            _, header = next(rows)
        except StopIteration:
            raise ValueError(f"{path}: empty file") from None
    else:
        header = list(_COLA_COLUMNS)
    columns = {name: i for i, name in enumerate(header)}
    if task.name == "mrpc" and is_test and "index" not in columns and "Quality" in columns:
        columns["index"] = columns["Quality"]  # some copies keep MRPC's train header
    needed = [task.text_a] + ([task.text_b] if task.text_b else [])
    needed += [task.index_column] if is_test else [task.label_column]
    missing = [c for c in needed if c not in columns]
    if missing:
        raise ValueError(f"{path}:1: missing column(s) {missing} for GLUE {task.name} "
                         f"{split}; header is {header}")
    examples, skipped = [], []
    for number, fields in rows:
        if len(fields) != len(header):
            if task.name == "qqp":
                skipped.append(number)
                continue
            raise ValueError(f"{path}:{number}: {len(fields)} fields, expected "
                             f"{len(header)} ({', '.join(header)})")
        label = None
        if not is_test:
            label = fields[columns[task.label_column]]
            if task.is_regression:
                try:
                    label = float(label)
                except ValueError:
                    raise ValueError(f"{path}:{number}: score {label!r} is not a number"
                                     ) from None
            elif label not in task.labels:
                raise ValueError(f"{path}:{number}: label {label!r} not in {task.labels}")
        index = fields[columns[task.index_column]] if is_test else str(len(examples))
        examples.append(GlueExample(index, fields[columns[task.text_a]],
                                    fields[columns[task.text_b]] if task.text_b else None,
                                    label))
    if skipped:
        logger.warning("%s: skipped %d row(s) with missing fields (lines %s%s)", path,
                       len(skipped), ", ".join(map(str, skipped[:10])),
                       ", ..." if len(skipped) > 10 else "")
    return examples


def split_file(task, split: str, data_dir: str) -> str:
    task = get_task(task)
    split = {"validation": "dev", "validation_matched": "dev_matched",
             "validation_mismatched": "dev_mismatched"}.get(split, split)
    if task.name == "mnli" and split in ("dev", "test"):
        split += "_matched"
    if split not in task.splits:
        raise ValueError(f"GLUE {task.name} has no split {split!r}; splits: "
                         f"{', '.join(task.splits)}")
    return os.path.join(data_dir, task.splits[split])


def load_dataset(task, split: str, data_dir: str | None = None,
                 tfds_data_dir: str | None = None) -> list[GlueExample]:
    """Examples of one split, from the official files in `data_dir` (the task's folder
    of the GLUE download, e.g. `glue_data/MRPC`) or, when `data_dir` is None, from
    TFDS `glue/<task>`.

    Splits: train, dev, test; MNLI: dev_matched, dev_mismatched, test_matched,
    test_mismatched ("dev"/"test" mean matched); AX: test.
    """
    task = get_task(task)
    if data_dir is not None:
        path = split_file(task, split, data_dir)
        norm = os.path.basename(path)[:-4]
        return read_tsv(task, path, "test" if norm.startswith(("test", "diagnostic"))
                        else norm)
    return _load_tfds(task, split, tfds_data_dir)


def _load_tfds(task: GlueTask, split: str, data_dir: str | None = None) -> list[GlueExample]:
    split = {"validation": "dev"}.get(split, split)
    if task.name == "mnli" and split in ("dev", "test"):
        split += "_matched"
    if split not in task.tfds_splits:
        raise ValueError(f"GLUE {task.name} has no split {split!r}")
    import tensorflow_datasets as tfds

    from kbert.tasks import tfds_source

    ds, _ = tfds_source.load(
        task.tfds, task.tfds_splits[split], data_dir,
        advice="with no network, download GLUE (its download_glue_data.py) and pass "
               "--data_dir with the task's folder, or --tfds_data_dir with a prepared copy")
    fields = {"sentence": "sentence", "#1 String": "sentence1", "#2 String": "sentence2",
              "question1": "question1", "question2": "question2", "sentence1": "sentence1",
              "sentence2": "sentence2", "question": "question"}
    if task.name in ("mnli", "ax"):
        fields.update({"sentence1": "premise", "sentence2": "hypothesis"})
    examples = []
    for ex in tfds.as_numpy(ds):
        a = ex[fields[task.text_a]].decode("utf-8")
        b = ex[fields[task.text_b]].decode("utf-8") if task.text_b else None
        label = ex["label"]
        if split.startswith("test"):
            label = None
        elif task.is_regression:
            label = float(label)
        elif int(label) < 0:  # TFDS test splits carry -1
            label = None
        else:
            label = task.tfds_labels[int(label)]
        examples.append(GlueExample(str(int(ex["idx"])), a, b, label))
    return examples
