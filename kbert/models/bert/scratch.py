"""A BERT from scratch: a WordPiece vocabulary learned from the task's texts and a new
encoder (the task commands' default when no folder is given)."""

from __future__ import annotations

from kbert.models.bert.config import BertConfig
from kbert.models.bert.encoder import BertEncoder, init_sinusoidal_positions
from kbert.tokenizers.bert import BertTokenizer
from kbert.tokenizers.vocab import build_vocab


def scratch_tokenizer(texts, *, lowercase: bool, vocab_size: int, seq_length: int
                      ) -> BertTokenizer:
    """A WordPiece vocabulary of about `vocab_size` learned from `texts`."""
    vocab = build_vocab(list(dict.fromkeys(texts)), vocab_size=vocab_size, min_count=1,
                        lowercase=lowercase)
    return BertTokenizer(vocab, lowercase=lowercase, seq_length=seq_length)


def scratch_encoder(tokenizer, *, preset: str = "demo", demo_config: dict | None = None,
                    seq_length: int = 128, position_init: str = "normal") -> BertEncoder:
    """A new BERT of `preset` ("demo": `demo_config`) sized to the tokenizer's
    vocabulary, whose position embeddings start as `position_init` says ("normal" or
    "sinusoidal")."""
    overrides = dict(vocab_size=tokenizer.vocab_size,
                     max_position_embeddings=max(seq_length, 64))
    config = (BertConfig(**(demo_config or {}), **overrides) if preset == "demo"
              else BertConfig.preset(preset, **overrides))
    encoder = BertEncoder(config)
    if position_init == "sinusoidal":
        init_sinusoidal_positions(encoder)
    return encoder

