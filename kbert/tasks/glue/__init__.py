"""GLUE: task specs, official TSV readers, classifier/regression heads, metrics.

`python -m kbert.tasks.glue --task mrpc --data_dir glue_data/MRPC --init_from DIR`.
"""

from kbert.tasks.glue.data import GlueExample, load_dataset, read_tsv
from kbert.tasks.glue.metrics import compute_metrics
from kbert.tasks.glue.model import ClassifierHead, build_classifier
from kbert.tasks.glue.run import build_model, encode, write_submission
from kbert.tasks.glue.tasks import PAPER_BERT_BASE, TASKS, GlueTask, get_task

__all__ = ["ClassifierHead", "GlueExample", "GlueTask", "PAPER_BERT_BASE", "TASKS",
           "build_classifier", "build_model", "compute_metrics", "encode", "get_task",
           "load_dataset", "read_tsv", "write_submission"]
