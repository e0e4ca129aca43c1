"""T5's hyper-parameters (Raffel et al., 2020), readable from Hugging Face's
`config.json` (`t5-small` ... `t5-11b`, `google/t5-v1_1-*`, `google/flan-t5-*`)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from kbert.models.config import ModelConfig

# Hugging Face's feed_forward_proj -> (kbert activation, gated). "gated-gelu" is the
# tanh GELU (what Hugging Face maps it to, `gelu_new`), as T5 v1.1's Mesh TF code.
_FEED_FORWARD = {"relu": ("relu", False), "gated-gelu": ("gelu_tanh", True),
                 "gated-relu": ("relu", True), "gelu": ("gelu", False),
                 "gated-gelu_new": ("gelu_tanh", True), "gated-silu": ("silu", True)}


@dataclasses.dataclass
class T5Config(ModelConfig):
    """Hyper-parameters of a T5 encoder-decoder (defaults: t5-small, T5.1.0).

    hidden_size: d_model. key_value_size: d_kv, each head's size (num_heads *
    key_value_size need not be hidden_size: t5-11b's is 128 x 128 over 1024).
    intermediate_size: d_ff. num_layers / num_decoder_layers: the two stacks' depths.
    hidden_act, gated: the feed-forward (T5.1.0: relu, not gated; v1.1 and FLAN-T5:
    the tanh GELU, gated).
    tie_word_embeddings: the output layer is the token table (T5.1.0); False: its own
    `lm_head` (v1.1). scale_decoder_outputs: the decoder's output is multiplied by
    hidden_size ** -0.5 before the output layer (T5.1.0's tied table; not v1.1).
    pad_token_id (0) is also the decoder's start token; end_token_id is `</s>` (1).
    """

    vocab_size: int = 32128  # 32,000 SentencePiece pieces + 100 sentinels, padded to 128
    hidden_size: int = 512
    key_value_size: int = 64
    intermediate_size: int = 2048
    num_layers: int = 6
    num_decoder_layers: int = 6
    num_heads: int = 8
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    dropout: float = 0.1
    layer_norm_epsilon: float = 1e-6
    hidden_act: str = "relu"
    gated: bool = False
    tie_word_embeddings: bool = True
    scale_decoder_outputs: bool = True
    pad_token_id: int = 0
    end_token_id: int = 1
    decoder_start_token_id: int = 0
    initializer_factor: float = 1.0

    family: ClassVar[str] = "t5"
    reference_keys: ClassVar[tuple[str, ...]] = ("d_model",)
    reference_model_type: ClassVar[str | None] = "t5"
    PRESETS: ClassVar[dict[str, dict]] = {
        "tiny": dict(vocab_size=120, hidden_size=32, key_value_size=8, intermediate_size=48,
                     num_layers=2, num_decoder_layers=2, num_heads=4),
        "t5-small": dict(),
        "t5-base": dict(hidden_size=768, intermediate_size=3072, num_layers=12,
                        num_decoder_layers=12, num_heads=12),
        "t5-large": dict(hidden_size=1024, intermediate_size=4096, num_layers=24,
                         num_decoder_layers=24, num_heads=16),
        "t5-v1_1-small": dict(intermediate_size=1024, num_layers=8, num_decoder_layers=8,
                              num_heads=6, hidden_act="gelu_tanh", gated=True,
                              tie_word_embeddings=False, scale_decoder_outputs=False),
        "t5-v1_1-base": dict(hidden_size=768, intermediate_size=2048, num_layers=12,
                             num_decoder_layers=12, num_heads=12, hidden_act="gelu_tanh",
                             gated=True, tie_word_embeddings=False,
                             scale_decoder_outputs=False),
    }

    def __post_init__(self):
        if self.hidden_act not in ("relu", "gelu", "gelu_tanh", "silu"):
            raise ValueError(f"T5Config.hidden_act={self.hidden_act!r} is not supported; "
                             "use relu, gelu, gelu_tanh or silu")
        for name in ("pad_token_id", "end_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if not 0 <= value < self.vocab_size:
                raise ValueError(f"T5Config.{name}={value} is outside the vocabulary of "
                                 f"{self.vocab_size}")

    @property
    def feed_forward_proj(self) -> str:
        """Hugging Face's name of the feed-forward (`relu`, `gated-gelu`, ...)."""
        for name, value in _FEED_FORWARD.items():
            if value == (self.hidden_act, self.gated):
                return name
        raise ValueError(f"T5Config: no Hugging Face name for {self.hidden_act} "
                         f"(gated={self.gated})")

    @classmethod
    def from_reference_dict(cls, d: dict[str, Any]) -> "T5Config":
        """Hugging Face's `config.json` of a T5 (`T5ForConditionalGeneration`).

        Which output layer: transformers 4.x reads `tie_word_embeddings` (False in
        v1.1's configs: an `lm_head` of its own, no scaling); transformers 5.x always
        ties and reads `scale_decoder_outputs`. kbert follows the weights file: a
        separate `lm_head.weight` in it makes the layer untied (`checkpoints.load`);
        the scaling is `scale_decoder_outputs` where given, else `tie_word_embeddings`."""
        proj = d.get("feed_forward_proj", "relu")
        if proj not in _FEED_FORWARD:
            raise ValueError(f"feed_forward_proj={proj!r} is not supported; known: "
                             f"{', '.join(_FEED_FORWARD)}")
        act, gated = _FEED_FORWARD[proj]
        tie = bool(d.get("tie_word_embeddings", True))
        scale = bool(d.get("scale_decoder_outputs", tie))
        layers = int(d.get("num_layers", 6))
        decoder_layers = d.get("num_decoder_layers")
        return cls(vocab_size=int(d.get("vocab_size", 32128)),
                   hidden_size=int(d.get("d_model", 512)),
                   key_value_size=int(d.get("d_kv", 64)),
                   intermediate_size=int(d.get("d_ff", 2048)), num_layers=layers,
                   num_decoder_layers=int(layers if decoder_layers is None else decoder_layers),
                   num_heads=int(d.get("num_heads", 8)),
                   relative_attention_num_buckets=int(d.get("relative_attention_num_buckets", 32)),
                   relative_attention_max_distance=int(
                       d.get("relative_attention_max_distance", 128)),
                   dropout=float(d.get("dropout_rate", 0.1)),
                   layer_norm_epsilon=float(d.get("layer_norm_epsilon", 1e-6)),
                   hidden_act=act, gated=gated, tie_word_embeddings=tie,
                   scale_decoder_outputs=scale,
                   pad_token_id=int(d.get("pad_token_id", 0) or 0),
                   end_token_id=int(_first(d.get("eos_token_id", 1))),
                   decoder_start_token_id=int(d.get("decoder_start_token_id", 0) or 0),
                   initializer_factor=float(d.get("initializer_factor", 1.0)))

    def to_reference_dict(self) -> dict[str, Any]:
        """Hugging Face's `config.json` of a `T5ForConditionalGeneration` (both
        transformers 4.x's `tie_word_embeddings` and 5.x's `scale_decoder_outputs`)."""
        act = {"gelu_tanh": "gelu_new"}.get(self.hidden_act, self.hidden_act)
        return {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5",
                "vocab_size": self.vocab_size, "d_model": self.hidden_size,
                "d_kv": self.key_value_size, "d_ff": self.intermediate_size,
                "num_layers": self.num_layers, "num_decoder_layers": self.num_decoder_layers,
                "num_heads": self.num_heads,
                "relative_attention_num_buckets": self.relative_attention_num_buckets,
                "relative_attention_max_distance": self.relative_attention_max_distance,
                "dropout_rate": self.dropout, "layer_norm_epsilon": self.layer_norm_epsilon,
                "feed_forward_proj": self.feed_forward_proj, "dense_act_fn": act,
                "is_gated_act": self.gated,
                "tie_word_embeddings": self.tie_word_embeddings,
                "scale_decoder_outputs": self.scale_decoder_outputs,
                "pad_token_id": self.pad_token_id, "eos_token_id": self.end_token_id,
                "decoder_start_token_id": self.decoder_start_token_id,
                "initializer_factor": self.initializer_factor,
                "is_encoder_decoder": True}


def _first(value):
    return value[0] if isinstance(value, (list, tuple)) else value
