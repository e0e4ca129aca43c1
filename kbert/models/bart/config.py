"""BART's hyper-parameters (Lewis et al., 2020), readable from Hugging Face's
`config.json` (`facebook/bart-base`, `facebook/bart-large`, `-cnn`, `-xsum`, ...)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from kbert.models.config import ModelConfig

_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                "relu": "relu"}


@dataclasses.dataclass
class BartConfig(ModelConfig):
    """Hyper-parameters of a BART encoder-decoder (defaults: bart-large).

    Post-LN blocks (BERT's) in both stacks, a LayerNorm on the embeddings, learned
    positions (the table has max_position_embeddings + 2 rows: fairseq's offset of 2),
    the token table shared by the two stacks and the output layer (plus
    `final_logits_bias`). `scale_embedding`: the token vectors multiplied by
    sqrt(hidden_size) (False in bart-base/-large). Ids: `<s>` 0, `<pad>` 1, `</s>` 2;
    the decoder starts from `</s>` (decoder_start_token_id); `forced_bos_token_id`
    (bart-large's 0): the first generated token is always `<s>`; `forced_eos_token_id`
    (2, transformers' default; None: off): a row's last allowed token is `</s>`.
    `source_encoder_layers` (kbert's; 0: none): BART's translation mode (Lewis et al.,
    2020, section 3.4), a new Transformer encoder of that many layers, with its own token
    table and positions, whose output BART's encoder reads instead of its token vectors
    (`BartSourceEncoder`; no Hugging Face model has one).
    """

    vocab_size: int = 50265
    hidden_size: int = 1024
    encoder_layers: int = 12
    decoder_layers: int = 12
    encoder_heads: int = 16
    decoder_heads: int = 16
    encoder_intermediate_size: int = 4096
    decoder_intermediate_size: int = 4096
    hidden_act: str = "gelu"
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    classifier_dropout: float = 0.0
    max_position_embeddings: int = 1024
    initializer_range: float = 0.02
    scale_embedding: bool = False
    layer_norm_epsilon: float = 1e-5
    pad_token_id: int = 1
    start_token_id: int = 0  # <s> (bos)
    end_token_id: int = 2  # </s>
    decoder_start_token_id: int = 2
    forced_bos_token_id: int | None = None
    forced_eos_token_id: int | None = 2  # transformers' default: </s> at the last step
    source_encoder_layers: int = 0

    family: ClassVar[str] = "bart"
    reference_keys: ClassVar[tuple[str, ...]] = ("d_model",)
    reference_model_type: ClassVar[str | None] = "bart"
    PRESETS: ClassVar[dict[str, dict]] = {
        "tiny": dict(vocab_size=99, hidden_size=32, encoder_layers=2, decoder_layers=2,
                     encoder_heads=4, decoder_heads=4, encoder_intermediate_size=37,
                     decoder_intermediate_size=37, max_position_embeddings=64),
        "bart-base": dict(hidden_size=768, encoder_layers=6, decoder_layers=6,
                          encoder_heads=12, decoder_heads=12, encoder_intermediate_size=3072,
                          decoder_intermediate_size=3072),
        "bart-large": dict(forced_bos_token_id=0),
    }

    def __post_init__(self):
        if int(self.source_encoder_layers) < 0:
            raise ValueError(f"BartConfig.source_encoder_layers={self.source_encoder_layers} "
                             "is negative (0: no source encoder)")
        if self.hidden_act not in ("gelu", "gelu_tanh", "relu"):
            raise ValueError(f"BartConfig.hidden_act={self.hidden_act!r} is not supported; "
                             "use gelu, gelu_tanh or relu")
        for heads in (self.encoder_heads, self.decoder_heads):
            if self.hidden_size % heads:
                raise ValueError(f"BartConfig.hidden_size={self.hidden_size} is not a "
                                 f"multiple of {heads} heads")

    @classmethod
    def from_reference_dict(cls, d: dict[str, Any]) -> "BartConfig":
        """Hugging Face's `config.json` of a BART (`BartModel`,
        `BartForConditionalGeneration`)."""
        act = d.get("activation_function", "gelu")
        if act not in _ACTIVATIONS:
            raise ValueError(f"activation_function={act!r} is not supported; known: "
                             f"{', '.join(_ACTIVATIONS)}")
        if d.get("normalize_before") or d.get("add_final_layer_norm"):
            raise ValueError("a pre-LN BART (mBART's normalize_before / "
                             "add_final_layer_norm) is not supported")
        forced = d.get("forced_bos_token_id")
        return cls(vocab_size=int(d.get("vocab_size", 50265)),
                   hidden_size=int(d.get("d_model", 1024)),
                   encoder_layers=int(d.get("encoder_layers", 12)),
                   decoder_layers=int(d.get("decoder_layers", 12)),
                   encoder_heads=int(d.get("encoder_attention_heads", 16)),
                   decoder_heads=int(d.get("decoder_attention_heads", 16)),
                   encoder_intermediate_size=int(d.get("encoder_ffn_dim", 4096)),
                   decoder_intermediate_size=int(d.get("decoder_ffn_dim", 4096)),
                   hidden_act=_ACTIVATIONS[act], dropout=float(d.get("dropout", 0.1)),
                   attention_dropout=float(d.get("attention_dropout", 0.0)),
                   activation_dropout=float(d.get("activation_dropout", 0.0)),
                   classifier_dropout=float(d.get("classifier_dropout") or 0.0),
                   max_position_embeddings=int(d.get("max_position_embeddings", 1024)),
                   initializer_range=float(d.get("init_std", 0.02)),
                   scale_embedding=bool(d.get("scale_embedding", False)),
                   pad_token_id=int(d.get("pad_token_id", 1)),
                   start_token_id=int(d.get("bos_token_id", 0)),
                   end_token_id=int(_first(d.get("eos_token_id", 2))),
                   decoder_start_token_id=int(d.get("decoder_start_token_id", 2)),
                   forced_bos_token_id=None if forced is None else int(forced),
                   forced_eos_token_id=_optional(d.get("forced_eos_token_id", 2)))

    def to_reference_dict(self) -> dict[str, Any]:
        """Hugging Face's `config.json` of a `BartForConditionalGeneration`."""
        act = {"gelu_tanh": "gelu_new"}.get(self.hidden_act, self.hidden_act)
        return {"architectures": ["BartForConditionalGeneration"], "model_type": "bart",
                "vocab_size": self.vocab_size, "d_model": self.hidden_size,
                "encoder_layers": self.encoder_layers, "decoder_layers": self.decoder_layers,
                "encoder_attention_heads": self.encoder_heads,
                "decoder_attention_heads": self.decoder_heads,
                "encoder_ffn_dim": self.encoder_intermediate_size,
                "decoder_ffn_dim": self.decoder_intermediate_size,
                "activation_function": act, "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "classifier_dropout": self.classifier_dropout,
                "max_position_embeddings": self.max_position_embeddings,
                "init_std": self.initializer_range, "scale_embedding": self.scale_embedding,
                "pad_token_id": self.pad_token_id, "bos_token_id": self.start_token_id,
                "eos_token_id": self.end_token_id,
                "decoder_start_token_id": self.decoder_start_token_id,
                "forced_bos_token_id": self.forced_bos_token_id,
                "forced_eos_token_id": self.forced_eos_token_id,
                "is_encoder_decoder": True, "tie_word_embeddings": True}


def _first(value):
    return value[0] if isinstance(value, (list, tuple)) else value


def _optional(value):
    return None if value is None else int(value)
