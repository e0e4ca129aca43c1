"""SQuAD v1.1 and v2.0: reading, windows, span head, post-processing, official metrics.

`python -m kbert.tasks.squad` runs the whole job; see its `--help`.
"""

from kbert._lazy import lazy_package

# Imported on first use (kbert._lazy): the command lines answer --help before
# TensorFlow is imported.
_EXPORTS = {
    "SpanHead": "kbert.tasks.squad.model",
    "SquadExample": "kbert.tasks.squad.data",
    "SquadFeature": "kbert.tasks.squad.features",
    "SquadPredictions": "kbert.tasks.squad.postprocess",
    "build_model": "kbert.tasks.squad.model",
    "convert_examples": "kbert.tasks.squad.features",
    "evaluate": "kbert.tasks.squad.evaluate",
    "exact_match": "kbert.tasks.squad.evaluate",
    "f1": "kbert.tasks.squad.evaluate",
    "feature_arrays": "kbert.tasks.squad.features",
    "load_json": "kbert.tasks.squad.data",
    "normalize_answer": "kbert.tasks.squad.evaluate",
    "postprocess": "kbert.tasks.squad.postprocess",
    "read_squad": "kbert.tasks.squad.data",
    "span_losses": "kbert.tasks.squad.model",
}
lazy_package(__name__, _EXPORTS)
