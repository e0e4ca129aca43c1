"""toyfam: a family kbert does not ship (hashed words, a one-layer Transformer), made of
kbert's public parts; registered by this folder alone (on `KBERT_FAMILY_PATH`)."""

from kbert.models.registry import Family, register_family
from kbert.models.toyfam.config import ToyConfig
from kbert.models.toyfam.model import ToyEncoder
from kbert.models.toyfam.tokenizer import ToyTokenizer

register_family(Family("toyfam", ToyConfig, ToyEncoder, ToyTokenizer,
                       description="toyfam: a test's throw-away family"))

__all__ = ["ToyConfig", "ToyEncoder", "ToyTokenizer"]
