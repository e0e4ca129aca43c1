"""GPT (GPT-1 and GPT-2): config, decoder, language model (with the generation protocol
of `kbert.models.generation`), checkpoint converters; the family "gpt"
(`hooks.FAMILY`)."""

from kbert.models.gpt.config import GPTConfig
from kbert.models.gpt.decoder import GPTDecoder, GPTLanguageModel
from kbert.tokenizers.gpt import GPTTokenizer

__all__ = ["GPTConfig", "GPTDecoder", "GPTLanguageModel", "GPTTokenizer"]
