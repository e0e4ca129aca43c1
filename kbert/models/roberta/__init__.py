"""RoBERTa (Liu et al., 2019): config, encoder, masked LM, Hugging Face weights; the
family "roberta" (`hooks.FAMILY`)."""

from kbert.models.roberta.config import RobertaConfig
from kbert.models.roberta.encoder import RobertaEncoder, RobertaMaskedLM
from kbert.tokenizers.roberta import RobertaTokenizer

__all__ = ["RobertaConfig", "RobertaEncoder", "RobertaMaskedLM", "RobertaTokenizer"]
