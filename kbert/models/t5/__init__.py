"""T5 (Raffel et al., 2020): config, the encoder-decoder `T5Seq2SeqLM` (with the
generation protocol's encoder-decoder start), checkpoint converters; registered as the
family "t5"."""

from kbert.models.registry import Family, recognizes_model_type, register_family
from kbert.models.t5.config import T5Config
from kbert.models.t5.model import T5Seq2SeqLM, T5Stack
from kbert.tokenizers.t5 import T5Tokenizer


register_family(Family(
    "t5", T5Config, T5Seq2SeqLM, T5Tokenizer, recognizes=recognizes_model_type("t5"),
    language_model_class=T5Seq2SeqLM,
    description="t5 is an encoder-decoder (text to text)",
    folder_hint="Hugging Face's t5-small ... t5-11b, google/t5-v1_1-*, google/flan-t5-*"))

__all__ = ["T5Config", "T5Seq2SeqLM", "T5Stack", "T5Tokenizer"]
