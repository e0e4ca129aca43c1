"""BART (Lewis et al., 2020): config, the encoder-decoder `BartSeq2SeqLM` (with the
generation protocol's encoder-decoder start), checkpoint converters; the family "bart"
(`hooks.FAMILY`)."""

from kbert.models.bart.config import BartConfig
from kbert.models.bart.model import BartSeq2SeqLM, BartStack
from kbert.tokenizers.bart import BartTokenizer

__all__ = ["BartConfig", "BartSeq2SeqLM", "BartStack", "BartTokenizer"]
