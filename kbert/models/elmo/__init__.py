"""ELMo: config, the biLM, bilm-tf's files; the family "elmo" (`hooks.FAMILY`)."""

from kbert.models.elmo.bilm import ELMo
from kbert.models.elmo.config import ELMoConfig
from kbert.tokenizers.elmo import ELMoCharTokenizer

__all__ = ["ELMo", "ELMoConfig", "ELMoCharTokenizer"]
