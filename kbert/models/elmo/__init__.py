"""ELMo: config, the character tokenizer's model side, the biLM, bilm-tf's files."""

from kbert.models.elmo.bilm import ELMo
from kbert.models.elmo.config import ELMoConfig

__all__ = ["ELMo", "ELMoConfig"]
