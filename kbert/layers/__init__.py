"""Generic Keras layers of kbert's models."""

from kbert.layers.attention import MultiHeadAttention
from kbert.layers.embeddings import BertEmbeddings, PositionEmbedding, TokenEmbedding
from kbert.layers.masks import causal_mask, key_mask, merge_masks, padding_bias
from kbert.layers.scalar_mix import ScalarMix
from kbert.layers.transformer import TransformerBlock

__all__ = ["BertEmbeddings", "MultiHeadAttention", "PositionEmbedding", "ScalarMix",
           "TokenEmbedding", "TransformerBlock", "causal_mask", "key_mask", "merge_masks",
           "padding_bias"]
