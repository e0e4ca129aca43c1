"""In-graph tokenizers (tf.string in, ids out)."""

from kbert.tokenizers.bert import BertTokenizer, load_vocab
from kbert.tokenizers.vocab import build_vocab

__all__ = ["BertTokenizer", "build_vocab", "load_vocab"]
