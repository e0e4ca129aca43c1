"""SQuAD v1.1 and v2.0: reading, official metrics.

Features, the span head, post-processing and `python -m kbert.tasks.squad` are in
progress (see the README's "Not done yet").
"""

from kbert.tasks.squad.data import SquadExample, load_json, read_squad
from kbert.tasks.squad.evaluate import evaluate, exact_match, f1, normalize_answer

__all__ = ["SquadExample", "evaluate", "exact_match", "f1", "load_json", "normalize_answer",
           "read_squad"]
