"""BERT hyper-parameters, readable from Google's and Hugging Face's config files."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar

from kbert.models.config import ModelConfig

# Hugging Face / Google activation names -> kbert's. "gelu" is the exact erf form
# (Hugging Face's "gelu"); Google's TF1 modeling.py computes the tanh approximation,
# which Hugging Face calls "gelu_new" / "gelu_pytorch_tanh".
_ACTIVATION_ALIASES = {
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_tanh": "gelu_tanh",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
}

# kbert's -> Hugging Face's name of the same function ("gelu" is erf there too).
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


@dataclasses.dataclass
class BertConfig(ModelConfig):
    """Hyper-parameters of a BERT encoder (Devlin et al., 2019, section 3).

    Example:
    >>> cfg = BertConfig.preset("tiny")
    >>> cfg.hidden_size
    32
    """

    vocab_size: int = 30522  # uncased English WordPiece vocabulary of the release
    hidden_size: int = 768  # H in the paper
    num_layers: int = 12  # L in the paper
    num_heads: int = 12  # A in the paper; head size is H / A = 64
    intermediate_size: int = 3072  # 4H, the feed-forward width
    hidden_act: str = "gelu"  # "gelu" (erf) or "gelu_tanh" (Google's TF1 code)
    dropout: float = 0.1  # hidden_dropout_prob of the release
    attention_dropout: float = 0.1  # attention_probs_dropout_prob of the release
    max_position_embeddings: int = 512  # longest sequence the position table covers
    type_vocab_size: int = 2  # segments A and B
    layer_norm_epsilon: float = 1e-12  # as in modeling.py, not Keras' 1e-3 default
    initializer_range: float = 0.02  # stddev of the truncated-normal initializer

    def __post_init__(self):
        act = _ACTIVATION_ALIASES.get(str(self.hidden_act).lower())
        if act is None:
            raise ValueError(
                f"BertConfig.hidden_act={self.hidden_act!r} is not supported; "
                f"use one of {sorted(set(_ACTIVATION_ALIASES.values()))}"
            )
        self.hidden_act = act
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"BertConfig.hidden_size={self.hidden_size} is not a multiple of "
                f"num_heads={self.num_heads}"
            )

    family: ClassVar[str] = "bert"
    reference_keys: ClassVar[tuple[str, ...]] = ("num_hidden_layers", "num_attention_heads")
    # Published sizes (Turc et al., 2019 "Well-Read Students" for mini..medium).
    PRESETS: ClassVar[dict[str, dict]] = {
        "tiny": dict(vocab_size=99, hidden_size=32, num_layers=2, num_heads=4,
                     intermediate_size=37, max_position_embeddings=64),
        "mini": dict(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024),
        "small": dict(hidden_size=512, num_layers=4, num_heads=8, intermediate_size=2048),
        "medium": dict(hidden_size=512, num_layers=8, num_heads=8, intermediate_size=2048),
        "base": dict(),
        "large": dict(hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096),
    }

    @classmethod
    def from_reference_dict(cls, d: dict[str, Any]) -> "BertConfig":
        required = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size"]
        missing = [k for k in required if k not in d]
        if missing:
            raise ValueError(f"BERT config is missing field(s) {missing}")
        pos_type = d.get("position_embedding_type", "absolute")
        if pos_type != "absolute":
            raise ValueError(f"position_embedding_type={pos_type!r} is not supported (only 'absolute')")
        return cls(
            vocab_size=d["vocab_size"],
            hidden_size=d["hidden_size"],
            num_layers=d["num_hidden_layers"],
            num_heads=d["num_attention_heads"],
            intermediate_size=d["intermediate_size"],
            # Google's bert_config.json says "gelu" but its modeling.py computes the
            # tanh approximation; from_json_file corrects that for Google folders.
            hidden_act=d.get("hidden_act", "gelu"),
            dropout=d.get("hidden_dropout_prob", 0.1),
            attention_dropout=d.get("attention_probs_dropout_prob", 0.1),
            max_position_embeddings=d.get("max_position_embeddings", 512),
            type_vocab_size=d.get("type_vocab_size", 2),
            layer_norm_epsilon=d.get("layer_norm_eps", 1e-12),
            initializer_range=d.get("initializer_range", 0.02),
        )

    def to_reference_dict(self) -> dict[str, Any]:
        """Hugging Face's `config.json` of a `BertModel` with these hyper-parameters
        (`from_reference_dict` reads it back to this config)."""
        return {"architectures": ["BertModel"], "model_type": "bert",
                "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
                "num_hidden_layers": self.num_layers, "num_attention_heads": self.num_heads,
                "intermediate_size": self.intermediate_size,
                "hidden_act": _HF_ACTIVATIONS[self.hidden_act],
                "hidden_dropout_prob": self.dropout,
                "attention_probs_dropout_prob": self.attention_dropout,
                "max_position_embeddings": self.max_position_embeddings,
                "type_vocab_size": self.type_vocab_size, "layer_norm_eps": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range, "pad_token_id": 0,
                "position_embedding_type": "absolute"}

    @classmethod
    def adjust_file_dict(cls, path: str, d: dict[str, Any]) -> dict[str, Any]:
        """For Google's `bert_config.json`, `"gelu"` means the tanh approximation,
        since that is what the checkpoint's reference code (modeling.py) computes."""
        if os.path.basename(path) == "bert_config.json" and d.get("hidden_act", "gelu") == "gelu":
            return {**d, "hidden_act": "gelu_tanh"}
        return d
