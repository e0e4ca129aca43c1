"""toyfam's config."""

import dataclasses
from typing import ClassVar

from kbert.models.config import ModelConfig


@dataclasses.dataclass
class ToyConfig(ModelConfig):
    family: ClassVar[str] = "toyfam"
    PRESETS: ClassVar[dict] = {"demo": {}}
    vocab_size: int = 1028
    hidden_size: int = 48
    num_heads: int = 4
    num_layers: int = 1
    max_position_embeddings: int = 128
    dropout: float = 0.0
    initializer_range: float = 0.02
