"""RoBERTa's hyper-parameters (Liu et al., 2019): BERT's encoder with a byte-level BPE
vocabulary, one token type, LayerNorm epsilon 1e-5 and positions counted past the
padding id, as fairseq and Hugging Face's `RobertaModel` number them."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from kbert.models.bert.config import BertConfig


@dataclasses.dataclass
class RobertaConfig(BertConfig):
    """`BertConfig`'s fields with RoBERTa-base's defaults, plus:

    pad_token_id: the padding id (1); positions start at pad_token_id + 1, so the
        position table has max_sequence_length + pad_token_id + 1 rows (514 for 512).
    pooler: whether the encoder has `RobertaModel`'s pooler (dense + tanh on `<s>`);
        masked-LM folders have none, and `pooled_output` is then the `<s>` state.
    """

    vocab_size: int = 50265
    max_position_embeddings: int = 514
    type_vocab_size: int = 1
    layer_norm_epsilon: float = 1e-5
    pad_token_id: int = 1
    pooler: bool = True

    family: ClassVar[str] = "roberta"
    reference_keys: ClassVar[tuple[str, ...]] = ("num_hidden_layers", "num_attention_heads")
    reference_model_type: ClassVar[str | None] = "roberta"
    PRESETS: ClassVar[dict[str, dict]] = {
        "tiny": dict(vocab_size=99, hidden_size=32, num_layers=2, num_heads=4,
                     intermediate_size=37, max_position_embeddings=66),
        "base": dict(),
        "large": dict(hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096),
    }

    @property
    def max_sequence_length(self) -> int:
        return self.max_position_embeddings - self.pad_token_id - 1

    def to_reference_dict(self) -> dict[str, Any]:
        """Hugging Face's `config.json` of a `RobertaModel` (see `BertConfig`)."""
        d = BertConfig.to_reference_dict(self)
        return {**d, "architectures": ["RobertaModel"], "model_type": "roberta",
                "pad_token_id": self.pad_token_id, "bos_token_id": 0, "eos_token_id": 2}

    @classmethod
    def from_reference_dict(cls, d: dict[str, Any]) -> "RobertaConfig":
        """Hugging Face's `config.json` of a RobertaModel / RobertaForMaskedLM."""
        base = BertConfig.from_reference_dict({"layer_norm_eps": 1e-5,
                                               "type_vocab_size": 1,
                                               "max_position_embeddings": 514, **d})
        return cls(**base.to_dict(), pad_token_id=int(d.get("pad_token_id", 1)))
