"""BERT: config, encoder, checkpoint converters; registered as the family "bert"."""

import os

from kbert.io import read_json
from kbert.models.bert.config import BertConfig
from kbert.models.bert.encoder import BertEncoder, init_sinusoidal_positions
from kbert.models.bert.pretrainer import BertPretrainer
from kbert.models.registry import Family, register_family
from kbert.tokenizers.bert import BertTokenizer


def _recognizes(folder: str) -> bool:
    """Google folders (`bert_config.json`) and Hugging Face BERT folders."""
    if os.path.exists(os.path.join(folder, "bert_config.json")):
        return True
    config = os.path.join(folder, "config.json")
    if not os.path.exists(config):
        return False
    d = read_json(config)
    return isinstance(d, dict) and (d.get("model_type") == "bert" or (
        "model_type" not in d and BertConfig.is_reference_dict(d)))


register_family(Family(
    "bert", BertConfig, BertEncoder, BertTokenizer, recognizes=_recognizes,
    aliases=("BertEncoder",), masked_lm_class=BertPretrainer,
    description="bert fine-tunes a BERT folder (Google, Hugging Face, kbert) or trains "
                "one from scratch",
    folder_hint="Google's BERT release or a Hugging Face bert folder"))

__all__ = ["BertConfig", "BertEncoder", "BertPretrainer", "init_sinusoidal_positions",
           "BertTokenizer"]
