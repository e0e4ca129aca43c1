"""GLUE metrics, as the benchmark computes them (scikit-learn / SciPy definitions),
in NumPy: Matthews correlation, accuracy, binary F1 (positive label "1"), macro F1 (a
user's own classes), Pearson and Spearman correlation. Scores are fractions in 0..1, as
the GLUE server reports them."""

from __future__ import annotations

import numpy as np

from kbert.tasks.glue.tasks import get_task


def accuracy(labels, predictions) -> float:
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if labels.size else 0.0


def f1_binary(labels, predictions, positive=1) -> float:
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    denominator = 2 * tp + fp + fn
    return float(2 * tp / denominator) if denominator else 0.0


def f1_macro(labels, predictions) -> float:
    """The unweighted mean of each class's F1, over the classes in the labels or the
    predictions (scikit-learn's `f1_score(average="macro")`)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = np.union1d(labels, predictions)
    if not classes.size:
        return 0.0
    return float(np.mean([f1_binary(labels, predictions, c) for c in classes]))


def matthews_corrcoef(labels, predictions) -> float:
    """Multi-class MCC (Gorodkin's R_K), which is the usual MCC for two classes."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = np.union1d(labels, predictions)
    index = {c: i for i, c in enumerate(classes)}
    confusion = np.zeros((len(classes), len(classes)), np.float64)
    for y, p in zip(labels, predictions):
        confusion[index[y], index[p]] += 1
    t_sum, p_sum = confusion.sum(axis=1), confusion.sum(axis=0)
    correct, n = np.trace(confusion), confusion.sum()
    cov_ytyp = correct * n - np.dot(t_sum, p_sum)
    cov_ypyp = n * n - np.dot(p_sum, p_sum)
    cov_ytyt = n * n - np.dot(t_sum, t_sum)
    if cov_ypyp * cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))


def pearson(labels, predictions) -> float:
    x, y = np.asarray(labels, np.float64), np.asarray(predictions, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
    return float(np.dot(x, y) / denominator) if denominator else float("nan")


def _ranks(values) -> np.ndarray:
    """1-based ranks, ties get their average rank (SciPy's 'average')."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), np.float64)
    sorted_values = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(labels, predictions) -> float:
    return pearson(_ranks(labels), _ranks(predictions))


_METRICS = {"accuracy": accuracy, "f1": f1_binary, "f1_macro": f1_macro,
            "matthews_corrcoef": matthews_corrcoef,
            "pearson": pearson, "spearman": spearman}


def compute_metrics(task, predictions, labels) -> dict:
    """The task's official metrics. Classification: predictions and labels are label
    strings or label ids (the same kind for both); STS-B: floats."""
    task = get_task(task)
    predictions, labels = list(predictions), list(labels)
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
    if not task.is_regression:
        ids = {label: i for i, label in enumerate(task.labels)}
        predictions = [ids.get(p, p) for p in predictions]
        labels = [ids.get(y, y) for y in labels]
    positive = 1  # "1" (paraphrase, duplicate) for MRPC and QQP
    out = {}
    for name in task.metrics:
        if name == "f1":
            out[name] = f1_binary(labels, predictions, positive)
        else:
            out[name] = _METRICS[name](labels, predictions)
    return out
