"""BART (Lewis et al., 2020): config, the encoder-decoder `BartSeq2SeqLM` (with the
generation protocol's encoder-decoder start), checkpoint converters; registered as the
family "bart"."""

import os

from kbert.io import read_json
from kbert.models.bart.config import BartConfig
from kbert.models.bart.model import BartSeq2SeqLM, BartStack
from kbert.models.registry import Family, register_family
from kbert.tokenizers.bart import BartTokenizer


def _recognizes(folder: str) -> bool:
    config = os.path.join(folder, "config.json")
    if not os.path.exists(config):
        return False
    d = read_json(config)
    return isinstance(d, dict) and d.get("model_type") == "bart"


register_family(Family(
    "bart", BartConfig, BartSeq2SeqLM, BartTokenizer, recognizes=_recognizes,
    language_model_class=BartSeq2SeqLM, hooks="kbert.models.bart.tasks",
    description="bart is an encoder-decoder (denoising)",
    folder_hint="Hugging Face's facebook/bart-base, facebook/bart-large(-cnn, -xsum)"))

__all__ = ["BartConfig", "BartSeq2SeqLM", "BartStack"]
