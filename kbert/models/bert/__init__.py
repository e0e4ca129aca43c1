"""BERT: config, encoder, pretraining heads, checkpoint converters."""

from kbert.models.bert.config import BertConfig
from kbert.models.bert.encoder import BertEncoder, init_sinusoidal_positions

__all__ = ["BertConfig", "BertEncoder", "init_sinusoidal_positions"]
