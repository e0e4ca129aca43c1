"""ELMo: config, the biLM, bilm-tf's files; registered as the family "elmo"."""

import os

from kbert.models.elmo.bilm import ELMo
from kbert.models.elmo.config import ELMoConfig
from kbert.models.registry import Family, register_family
from kbert.tokenizers.elmo import ELMoCharTokenizer


def _recognizes(folder: str) -> bool:
    """bilm-tf / AllenNLP folders: `options.json` with `lstm` and `char_cnn`."""
    path = os.path.join(folder, "options.json")
    if not os.path.exists(path):
        return False
    from kbert.io import read_json

    d = read_json(path)
    return isinstance(d, dict) and ELMoConfig.is_reference_dict(d)


register_family(Family(
    "elmo", ELMoConfig, ELMo, ELMoCharTokenizer, recognizes=_recognizes, feature_based=True,
    description="elmo trains a head on a frozen biLM (feature-based, as the ELMo paper) "
                "and needs --init_from an ELMo folder",
    folder_hint="a bilm-tf / AllenNLP ELMo folder, or one that "
                "ELMoLanguageModel.save_pretrained wrote"))

__all__ = ["ELMo", "ELMoConfig", "ELMoCharTokenizer"]
