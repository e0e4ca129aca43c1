"""BART's registry hooks (`Family.hooks` of "bart"): its pretraining recipe."""

from kbert.models.bart.pretraining import pretrain  # noqa: F401 (the pretrain hook)
