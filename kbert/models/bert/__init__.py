"""BERT: config, encoder, checkpoint converters; the family "bert" (`hooks.FAMILY`)."""

from kbert.models.bert.config import BertConfig
from kbert.models.bert.encoder import BertEncoder, init_sinusoidal_positions
from kbert.models.bert.pretrainer import BertPretrainer
from kbert.tokenizers.bert import BertTokenizer

__all__ = ["BertConfig", "BertEncoder", "BertPretrainer", "init_sinusoidal_positions",
           "BertTokenizer"]
