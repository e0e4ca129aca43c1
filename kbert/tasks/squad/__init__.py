"""SQuAD v1.1 and v2.0: reading, windows, span head, post-processing, official metrics.

`python -m kbert.tasks.squad` runs the whole job; see its `--help`.
"""

from kbert.tasks.squad.data import SquadExample, load_json, read_squad
from kbert.tasks.squad.evaluate import evaluate, exact_match, f1, normalize_answer
from kbert.tasks.squad.features import SquadFeature, convert_examples, feature_arrays
from kbert.tasks.squad.model import SpanHead, build_model, span_losses
from kbert.tasks.squad.postprocess import SquadPredictions, postprocess

__all__ = ["SpanHead", "SquadExample", "SquadFeature", "SquadPredictions", "build_model",
           "convert_examples", "evaluate", "exact_match", "f1", "feature_arrays", "load_json",
           "normalize_answer", "postprocess", "read_squad", "span_losses"]
