"""Generic Keras layers of kbert's models."""

from kbert.layers.attention import MultiHeadSelfAttention
from kbert.layers.embeddings import BertEmbeddings
from kbert.layers.scalar_mix import ScalarMix
from kbert.layers.transformer import TransformerEncoderBlock

__all__ = ["BertEmbeddings", "MultiHeadSelfAttention", "ScalarMix", "TransformerEncoderBlock"]
