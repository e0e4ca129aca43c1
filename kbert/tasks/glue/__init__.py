"""GLUE: task specs, official TSV readers, classifier/regression heads, metrics."""

from kbert.tasks.glue.model import ClassifierHead, build_classifier

__all__ = ["ClassifierHead", "build_classifier"]
