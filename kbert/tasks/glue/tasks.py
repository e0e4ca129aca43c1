"""The GLUE tasks: official files, fields, labels, metrics and submission names.

Label lists follow the original BERT `run_classifier.py` processors (MNLI is
contradiction, entailment, neutral); TFDS stores labels as integers in its own order,
so each spec also lists TFDS's label names, mapped onto kbert's by name.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task.

    Attributes:
        name: kbert's name (`--task`).
        labels: label strings in logit order; None for regression (STS-B).
        text_a, text_b: the columns (official TSV header names) of the two texts;
            `text_b` None for single-sentence tasks.
        label_column: the label column; `index_column` the id column of test files.
        metrics: metric names, the first one the task's main score.
        splits: split name -> file name in the task folder.
        submission: split name -> file name in the GLUE submission zip.
        tfds: TFDS config name and TFDS split name per split; `tfds_labels` TFDS's
            label names (kbert label for each TFDS integer label).
        header: whether train/dev files have a header row (CoLA's do not).
    """

    name: str
    labels: tuple | None
    text_a: str
    text_b: str | None
    label_column: str
    metrics: tuple
    splits: dict
    submission: dict
    tfds: str
    tfds_splits: dict
    tfds_labels: tuple | None
    index_column: str = "index"
    header: bool = True

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def is_pair(self) -> bool:
        return self.text_b is not None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)


_BINARY = ("0", "1")
_STD = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
_TFDS = {"train": "train", "dev": "validation", "test": "test"}

TASKS: dict[str, GlueTask] = {t.name: t for t in [
    GlueTask("cola", _BINARY, "sentence", None, "label", ("matthews_corrcoef",), _STD,
             {"test": "CoLA.tsv"}, "glue/cola", _TFDS, ("0", "1"), header=False),
    GlueTask("sst2", _BINARY, "sentence", None, "label", ("accuracy",), _STD,
             {"test": "SST-2.tsv"}, "glue/sst2", _TFDS, ("0", "1")),
    GlueTask("mrpc", _BINARY, "#1 String", "#2 String", "Quality", ("f1", "accuracy"), _STD,
             {"test": "MRPC.tsv"}, "glue/mrpc", _TFDS, ("0", "1")),
    GlueTask("qqp", _BINARY, "question1", "question2", "is_duplicate", ("f1", "accuracy"),
             _STD, {"test": "QQP.tsv"}, "glue/qqp", _TFDS, ("0", "1"), index_column="id"),
    GlueTask("stsb", None, "sentence1", "sentence2", "score", ("pearson", "spearman"), _STD,
             {"test": "STS-B.tsv"}, "glue/stsb", _TFDS, None),
    GlueTask("mnli", ("contradiction", "entailment", "neutral"), "sentence1", "sentence2",
             "gold_label", ("accuracy",),
             {"train": "train.tsv", "dev_matched": "dev_matched.tsv",
              "dev_mismatched": "dev_mismatched.tsv", "test_matched": "test_matched.tsv",
              "test_mismatched": "test_mismatched.tsv"},
             {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}, "glue/mnli",
             {"train": "train", "dev_matched": "validation_matched",
              "dev_mismatched": "validation_mismatched", "test_matched": "test_matched",
              "test_mismatched": "test_mismatched"},
             ("entailment", "neutral", "contradiction")),
    GlueTask("qnli", ("entailment", "not_entailment"), "question", "sentence", "label",
             ("accuracy",), _STD, {"test": "QNLI.tsv"}, "glue/qnli", _TFDS,
             ("entailment", "not_entailment")),
    GlueTask("rte", ("entailment", "not_entailment"), "sentence1", "sentence2", "label",
             ("accuracy",), _STD, {"test": "RTE.tsv"}, "glue/rte", _TFDS,
             ("entailment", "not_entailment")),
    GlueTask("wnli", _BINARY, "sentence1", "sentence2", "label", ("accuracy",), _STD,
             {"test": "WNLI.tsv"}, "glue/wnli", _TFDS, ("0", "1")),
    # The diagnostic set: test only, predicted with an MNLI model, MNLI's labels.
    GlueTask("ax", ("contradiction", "entailment", "neutral"), "sentence1", "sentence2",
             "label", (), {"test": "diagnostic.tsv"}, {"test": "AX.tsv"}, "glue/ax",
             {"test": "test"}, ("entailment", "neutral", "contradiction")),
]}

# The BERT paper's BERT-base GLUE test scores (Table 1), for users to check against.
PAPER_BERT_BASE = {"mnli": "84.6/83.4", "qqp": "71.2 (F1)", "qnli": "90.5", "sst2": "93.5",
                   "cola": "52.1", "stsb": "85.8", "mrpc": "88.9 (F1)", "rte": "66.4"}


def get_task(task) -> GlueTask:
    if isinstance(task, GlueTask):
        return task
    key = str(task).lower().replace("-", "").replace("_", "")
    key = {"sst": "sst2", "stsb": "stsb", "mnlim": "mnli", "diagnostic": "ax"}.get(key, key)
    if key not in TASKS:
        raise ValueError(f"unknown GLUE task {task!r}; tasks: {', '.join(TASKS)}")
    return TASKS[key]
