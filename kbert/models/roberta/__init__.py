"""RoBERTa (Liu et al., 2019): config, encoder, masked LM, Hugging Face weights;
registered as the family "roberta"."""

from kbert.models.registry import Family, recognizes_model_type, register_family
from kbert.models.roberta.config import RobertaConfig
from kbert.models.roberta.encoder import RobertaEncoder, RobertaMaskedLM
from kbert.tokenizers.roberta import RobertaTokenizer


register_family(Family(
    "roberta", RobertaConfig, RobertaEncoder, RobertaTokenizer, recognizes=recognizes_model_type("roberta"),
    masked_lm_class=RobertaMaskedLM,
    description="roberta fine-tunes a Hugging Face RoBERTa folder",
    folder_hint="Hugging Face's roberta-base"))

__all__ = ["RobertaConfig", "RobertaEncoder", "RobertaMaskedLM", "RobertaTokenizer"]
