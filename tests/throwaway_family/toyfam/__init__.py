"""toyfam: a family kbert does not ship (hashed words, a one-layer Transformer), made of
kbert's public parts; registered by this folder alone (on `KBERT_FAMILY_PATH`): its
hooks module declares it (`FAMILY`)."""

from kbert.models.toyfam.config import ToyConfig
from kbert.models.toyfam.model import ToyEncoder
from kbert.models.toyfam.tokenizer import ToyTokenizer

__all__ = ["ToyConfig", "ToyEncoder", "ToyTokenizer"]
