"""GPT (GPT-1 and GPT-2): config, decoder, language model (with the generation protocol
of `kbert.models.generation`), checkpoint converters; registered as the family "gpt"."""

import os

from kbert.io import read_json
from kbert.models.gpt.config import GPTConfig
from kbert.models.gpt.decoder import GPTDecoder, GPTLanguageModel
from kbert.models.registry import Family, register_family
from kbert.tokenizers.gpt import GPTTokenizer


def _recognizes(folder: str) -> bool:
    """Hugging Face `gpt2` / `openai-gpt` folders and OpenAI GPT-2 folders."""
    if os.path.exists(os.path.join(folder, "hparams.json")):
        return True
    config = os.path.join(folder, "config.json")
    if not os.path.exists(config):
        return False
    d = read_json(config)
    return isinstance(d, dict) and d.get("model_type") in ("gpt2", "openai-gpt")


register_family(Family(
    "gpt", GPTConfig, GPTDecoder, GPTTokenizer, recognizes=_recognizes,
    language_model_class=GPTLanguageModel,
    description="gpt fine-tunes as the GPT paper and needs --init_from a GPT folder",
    folder_hint="Hugging Face's gpt2 or openai-gpt, or OpenAI's GPT-2 release"))

__all__ = ["GPTConfig", "GPTDecoder", "GPTLanguageModel", "GPTTokenizer"]
