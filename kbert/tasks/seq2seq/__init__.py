"""Summarization, translation and dialogue as source -> target text:
`python -m kbert.tasks.seq2seq` (see `__main__` and docs/tasks/seq2seq.md).

`read_pairs(path, flag, columns)` reads a user's files as transformers'
run_summarization.py / run_translation.py take them; `compute_metrics(metric,
predictions, references)` scores with rouge-score or sacrebleu."""

from kbert.tasks.seq2seq.data import Columns, Pair, read_pairs
from kbert.tasks.seq2seq.metrics import compute_metrics

__all__ = ["Columns", "Pair", "compute_metrics", "read_pairs"]
