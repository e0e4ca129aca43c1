"""RoBERTa (Liu et al., 2019): config, encoder, masked LM, Hugging Face weights;
registered as the family "roberta"."""

import os

from kbert.io import read_json
from kbert.models.registry import Family, register_family
from kbert.models.roberta.config import RobertaConfig
from kbert.models.roberta.encoder import RobertaEncoder, RobertaMaskedLM
from kbert.tokenizers.roberta import RobertaTokenizer


def _recognizes(folder: str) -> bool:
    """Hugging Face RoBERTa folders (`model_type` "roberta")."""
    config = os.path.join(folder, "config.json")
    if not os.path.exists(config):
        return False
    d = read_json(config)
    return isinstance(d, dict) and d.get("model_type") == "roberta"


register_family(Family(
    "roberta", RobertaConfig, RobertaEncoder, RobertaTokenizer, recognizes=_recognizes,
    masked_lm_class=RobertaMaskedLM, hooks="kbert.models.roberta.tasks",
    description="roberta fine-tunes a Hugging Face RoBERTa folder",
    folder_hint="Hugging Face's roberta-base"))

__all__ = ["RobertaConfig", "RobertaEncoder", "RobertaMaskedLM"]
