"""In-graph tokenizers (tf.string in, ids out) and packing into model inputs."""

from kbert.tokenizers.base import Tokenizer
from kbert.tokenizers.bert import BertTokenizer, load_vocab
from kbert.tokenizers.gpt import GPTTokenizer
from kbert.tokenizers.gpt1 import GPT1Tokenizer
from kbert.tokenizers.packing import pack_bert, pack_decoder
from kbert.tokenizers.vocab import build_vocab

__all__ = ["BertTokenizer", "GPT1Tokenizer", "GPTTokenizer", "Tokenizer", "build_vocab", "load_vocab", "pack_bert",
           "pack_decoder"]
