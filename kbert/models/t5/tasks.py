"""T5's registry hooks (`Family.hooks` of "t5"): its pretraining recipe."""

from kbert.models.t5.pretraining import pretrain  # noqa: F401 (the pretrain hook)
