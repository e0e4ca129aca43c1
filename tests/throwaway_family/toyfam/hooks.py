"""toyfam's registration and hooks: a tokenizer and an encoder from scratch (no
--init_from)."""

from kbert.models.registry import Family
from kbert.models.toyfam.config import ToyConfig
from kbert.models.toyfam.model import ToyEncoder
from kbert.models.toyfam.tokenizer import ToyTokenizer


def scratch_tokenizer(texts, *, lowercase, vocab_size, seq_length):
    return ToyTokenizer(buckets=1024, seq_length=seq_length, lowercase=lowercase)


def scratch_encoder(tokenizer, *, preset="demo", demo_config=None, seq_length=128,
                    position_init="normal"):
    return ToyEncoder(ToyConfig(vocab_size=tokenizer.vocab_size,
                                max_position_embeddings=max(seq_length, 64)))


FAMILY = Family("toyfam", ToyConfig, ToyEncoder, ToyTokenizer,
                description="toyfam: a test's throw-away family")

HOOKS = ("scratch_tokenizer", "scratch_encoder")
