"""GLUE: task specs, official TSV readers, classifier/regression heads, metrics.

`python -m kbert.tasks.glue --task mrpc --data_dir glue_data/MRPC --init_from DIR`.
"""

from kbert._lazy import lazy_package

# Imported on first use (kbert._lazy): the command lines answer --help before
# TensorFlow is imported.
_EXPORTS = {
    "ClassifierHead": "kbert.tasks.glue.model",
    "GlueExample": "kbert.tasks.glue.data",
    "GlueTask": "kbert.tasks.glue.tasks",
    "PAPER_BERT_BASE": "kbert.tasks.glue.tasks",
    "TASKS": "kbert.tasks.glue.tasks",
    "build_classifier": "kbert.tasks.glue.model",
    "build_model": "kbert.tasks.glue.run",
    "compute_metrics": "kbert.tasks.glue.metrics",
    "encode": "kbert.tasks.glue.run",
    "get_task": "kbert.tasks.glue.tasks",
    "load_dataset": "kbert.tasks.glue.data",
    "read_tsv": "kbert.tasks.glue.data",
    "write_submission": "kbert.tasks.glue.run",
}
lazy_package(__name__, _EXPORTS)
