"""T5 (Raffel et al., 2020): config, the encoder-decoder `T5Seq2SeqLM` (with the
generation protocol's encoder-decoder start), checkpoint converters; the family "t5"
(`hooks.FAMILY`)."""

from kbert.models.t5.config import T5Config
from kbert.models.t5.model import T5Seq2SeqLM, T5Stack
from kbert.tokenizers.t5 import T5Tokenizer

__all__ = ["T5Config", "T5Seq2SeqLM", "T5Stack", "T5Tokenizer"]
