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


# ---------------------------------------------------------------- a user's own files
def own_columns(columns: list[str], path: str, text_column: str | None = None,
                text_pair_column: str | None = None, label_column: str | None = None
                ) -> tuple[str, str | None, str]:
    """(text, text pair or None, label) columns by Hugging Face run_glue.py's rule: a
    `label` column; `sentence1` and `sentence2` if both are there, else the first two
    other columns, else the first one. The flags' columns win."""
    label = label_column or "label"
    if label not in columns:
        raise ValueError(f"{path}: no {label!r} column (columns: {', '.join(columns)})"
                         + ("" if label_column else "; name yours with --label_column"))
    others = [c for c in columns if c != label]
    for flag, given in (("--text_column", text_column), ("--text_pair_column", text_pair_column)):
        if given and given not in columns:
            raise ValueError(f"{path}: no {given!r} column for {flag} (columns: "
                             f"{', '.join(columns)})")
    if text_column:
        return text_column, text_pair_column, label
    if "sentence1" in others and "sentence2" in others:
        return "sentence1", text_pair_column or "sentence2", label
    if not others:
        raise ValueError(f"{path}: no text column besides {label!r}")
    return others[0], text_pair_column or (others[1] if len(others) > 1 else None), label


def _label_kind(values: list) -> str:
    """run_glue.py's rule, which reads the column's type: 'regression' when every label
    is a number and one is written as a float (`0.5`, `3.0`), else 'classification'
    (strings, or whole numbers, which name classes)."""
    floats = False
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            return "classification"
        if isinstance(v, float):
            floats = True
            continue
        if isinstance(v, int):
            continue
        try:
            int(v)
            continue
        except ValueError:
            pass
        try:
            float(v)
        except ValueError:
            return "classification"
        floats = True
    return "regression" if floats else "classification"


def _label_name(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def load_own_files(train_file: str | None, validation_file: str | None,
                   test_file: str | None, text_column=None, text_pair_column=None,
                   label_column=None) -> tuple[GlueTask, list, list, list]:
    """A classification or regression task from the user's files (CSV, TSV, JSON
    Lines): (task, train, validation, test examples). Labels are detected from the
    training file and stated in the log; the validation file's must be among them."""
    from kbert.tasks.own_data import field, read_rows

    columns, train_rows = read_rows(train_file, "--train_file")
    if not train_rows:
        raise ValueError(f"{train_file}: no rows")
    text_a, text_b, label = own_columns(columns, train_file, text_column, text_pair_column,
                                        label_column)
    raw = [field(train_file, line, row, label, "label") for line, row in train_rows]
    kind = _label_kind(raw)
    if kind == "regression":
        labels = None
        logger.info("%s: labels are numbers, not all whole: a regression task (metrics: "
                    "Pearson, Spearman)", train_file)
    else:
        labels = tuple(sorted({_label_name(v) for v in raw}))
        if len(labels) < 2:
            raise ValueError(f"{train_file}: column {label!r} holds one label, {labels[0]!r}; "
                             "a classifier needs two or more")
        logger.info("%s: %d labels %s (metrics: accuracy, macro F1)", train_file,
                    len(labels), ", ".join(labels))
    logger.info("%s: text column %r%s, label column %r", train_file, text_a,
                f", pair column {text_b!r}" if text_b else "", label)
    name = os.path.splitext(os.path.basename(train_file))[0]
    task = GlueTask(name, labels, text_a, text_b, label,
                    ("pearson", "spearman") if labels is None else ("accuracy", "f1_macro"),
                    {}, {"test": "test_predictions.tsv"}, "", {}, None)

    def examples(path, rows, labelled):
        out = []
        for line, row in rows:
            value = None
            if labelled:
                value = field(path, line, row, label, "label")
                if labels is None:
                    try:
                        value = float(value)
                    except (TypeError, ValueError):
                        raise ValueError(f"{path}:{line}: column {label!r}: {value!r} is not "
                                         "a number") from None
                else:
                    value = _label_name(value)
                    if value not in labels:
                        raise ValueError(f"{path}:{line}: column {label!r}: label {value!r} "
                                         f"is not in {train_file}'s labels ({', '.join(labels)})")
            out.append(GlueExample(str(len(out)), field(path, line, row, text_a),
                                   field(path, line, row, text_b) if text_b else None, value))
        return out

    train = examples(train_file, train_rows, True)
    dev = test = []
    if validation_file:
        dev = examples(validation_file, read_rows(validation_file, "--validation_file")[1],
                       True)
    if test_file:
        test = examples(test_file, read_rows(test_file, "--test_file")[1], False)
    return task, train, dev, test


def dev_source(args, task, dev: dict) -> str:
    """What the dev metrics measure, for the results file: the --validation_file, or
    the GLUE task's dev split(s)."""
    if getattr(args, "train_file", None):
        return args.validation_file
    return f"{task.name} {', '.join(dev)}" + (" (_mm)" if len(dev) > 1 else "")
