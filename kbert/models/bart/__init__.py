"""BART (Lewis et al., 2020): config, the encoder-decoder `BartSeq2SeqLM` (with the
generation protocol's encoder-decoder start), checkpoint converters; registered as the
family "bart"."""

from kbert.models.bart.config import BartConfig
from kbert.models.bart.model import BartSeq2SeqLM, BartStack
from kbert.models.registry import Family, recognizes_model_type, register_family
from kbert.tokenizers.bart import BartTokenizer


register_family(Family(
    "bart", BartConfig, BartSeq2SeqLM, BartTokenizer, recognizes=recognizes_model_type("bart"),
    language_model_class=BartSeq2SeqLM,
    description="bart is an encoder-decoder (denoising)",
    folder_hint="Hugging Face's facebook/bart-base, facebook/bart-large(-cnn, -xsum)"))

__all__ = ["BartConfig", "BartSeq2SeqLM", "BartStack", "BartTokenizer"]
