"""GPT hyper-parameters (GPT-1 and GPT-2), readable from Hugging Face's `config.json`
(`gpt2`, `openai-gpt`) and OpenAI's GPT-2 `hparams.json`."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from kbert.models.config import ModelConfig

# Reference activation names -> kbert's. GPT-1 and GPT-2 compute the tanh GELU:
# Hugging Face's GPT-2 calls it "gelu_new", and its openai-gpt code maps the name
# "gelu" (the `afn` of the released config) to the same tanh form.
_GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_tanh": "gelu_tanh",
                     "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
                     "gelu": "gelu", "relu": "relu"}
_OPENAI_GPT_ACTIVATIONS = {"gelu": "gelu_tanh", "relu": "relu"}


@dataclasses.dataclass
class GPTConfig(ModelConfig):
    """Hyper-parameters of a GPT decoder: GPT-1 (Radford et al., 2018; post-LN blocks)
    or GPT-2 (Radford et al., 2019; pre-LN blocks and a final LayerNorm).

    Example:
    >>> GPTConfig.preset("gpt2").num_layers
    12
    """

    vocab_size: int = 50257  # GPT-2's byte-level BPE: 256 bytes, 50,000 merges, end token
    hidden_size: int = 768  # n_embd
    num_layers: int = 12  # n_layer
    num_heads: int = 12  # n_head
    intermediate_size: int = 3072  # 4 * n_embd
    hidden_act: str = "gelu_tanh"  # both papers' GELU is the tanh approximation
    dropout: float = 0.1  # resid_pdrop: after each sublayer
    embedding_dropout: float = 0.1  # embd_pdrop: on token + position embeddings
    attention_dropout: float = 0.1  # attn_pdrop
    max_position_embeddings: int = 1024  # n_ctx / n_positions
    layer_norm_epsilon: float = 1e-5  # as both reference codes
    initializer_range: float = 0.02  # normal stddev (GPT-2 scales residual projections)
    norm_first: bool = True  # GPT-2's pre-LN blocks + final LayerNorm; False: GPT-1
    end_token_id: int | None = 50256  # <|endoftext|>; GPT-1 has none

    family: ClassVar[str] = "gpt"
    reference_keys: ClassVar[tuple[str, ...]] = ("n_embd", "n_layer")
    PRESETS: ClassVar[dict[str, dict]] = {
        "tiny": dict(vocab_size=99, hidden_size=32, num_layers=2, num_heads=4,
                     intermediate_size=37, max_position_embeddings=64, end_token_id=98),
        # openai-gpt: 12 x 768, 12 heads, 512 positions, 40,478 BPE tokens, post-LN
        "gpt1": dict(vocab_size=40478, max_position_embeddings=512, norm_first=False,
                     end_token_id=None),
        "gpt2": dict(),  # 124M
        "gpt2-medium": dict(hidden_size=1024, num_layers=24, num_heads=16,
                            intermediate_size=4096),  # 355M
        "gpt2-large": dict(hidden_size=1280, num_layers=36, num_heads=20,
                           intermediate_size=5120),  # 774M
        "gpt2-xl": dict(hidden_size=1600, num_layers=48, num_heads=25,
                        intermediate_size=6400),  # 1558M
    }

    def __post_init__(self):
        if self.hidden_act not in ("gelu_tanh", "gelu", "relu"):
            raise ValueError(f"GPTConfig.hidden_act={self.hidden_act!r} is not supported; "
                             "use gelu_tanh, gelu or relu")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"GPTConfig.hidden_size={self.hidden_size} is not a multiple "
                             f"of num_heads={self.num_heads}")
        if self.end_token_id is not None and not 0 <= self.end_token_id < self.vocab_size:
            raise ValueError(f"GPTConfig.end_token_id={self.end_token_id} is outside the "
                             f"vocabulary of {self.vocab_size}")

    def to_reference_dict(self) -> dict[str, Any]:
        """Hugging Face's `config.json`: `GPT2LMHeadModel` (pre-LN), or `OpenAIGPTLMHeadModel`
        for a GPT-1 (`norm_first=False`); `from_reference_dict` reads it back."""
        common = {"vocab_size": self.vocab_size, "n_embd": self.hidden_size,
                  "n_layer": self.num_layers, "n_head": self.num_heads,
                  "n_positions": self.max_position_embeddings,
                  "resid_pdrop": self.dropout, "embd_pdrop": self.embedding_dropout,
                  "attn_pdrop": self.attention_dropout,
                  "layer_norm_epsilon": self.layer_norm_epsilon,
                  "initializer_range": self.initializer_range}
        if not self.norm_first:
            if self.intermediate_size != 4 * self.hidden_size:
                raise ValueError("openai-gpt's config has no inner width: intermediate_size "
                                 f"{self.intermediate_size} is not 4 x {self.hidden_size}")
            afn = {v: k for k, v in _OPENAI_GPT_ACTIVATIONS.items()}[self.hidden_act]
            return {"architectures": ["OpenAIGPTLMHeadModel"], "model_type": "openai-gpt",
                    "afn": afn, **common}
        act = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}[self.hidden_act]
        d = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
             "activation_function": act, "n_ctx": self.max_position_embeddings,
             "n_inner": (None if self.intermediate_size == 4 * self.hidden_size
                         else self.intermediate_size), **common}
        if self.end_token_id is not None:
            d["bos_token_id"] = d["eos_token_id"] = self.end_token_id
        return d

    @classmethod
    def from_reference_dict(cls, d: dict[str, Any]) -> "GPTConfig":
        missing = [k for k in ("n_embd", "n_layer", "n_head") if k not in d]
        if missing:
            raise ValueError(f"GPT config is missing field(s) {missing}")
        width = d["n_embd"]
        if d.get("model_type") == "openai-gpt":
            act = _OPENAI_GPT_ACTIVATIONS.get(d.get("afn", "gelu"))
            if act is None:
                raise ValueError(f"afn={d.get('afn')!r} is not supported")
            return cls(vocab_size=d.get("vocab_size", 40478), hidden_size=width,
                       num_layers=d["n_layer"], num_heads=d["n_head"],
                       intermediate_size=4 * width, hidden_act=act,
                       dropout=d.get("resid_pdrop", 0.1),
                       embedding_dropout=d.get("embd_pdrop", 0.1),
                       attention_dropout=d.get("attn_pdrop", 0.1),
                       max_position_embeddings=d.get("n_positions", 512),
                       layer_norm_epsilon=d.get("layer_norm_epsilon", 1e-5),
                       initializer_range=d.get("initializer_range", 0.02),
                       norm_first=False, end_token_id=None)
        for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
            if d.get(flag):
                raise ValueError(f"{flag}=true is not supported (GPT-2's released models "
                                 "have it false)")
        if d.get("scale_attn_weights") is False:
            raise ValueError("scale_attn_weights=false is not supported")
        act = _GPT2_ACTIVATIONS.get(d.get("activation_function", "gelu_new"))
        if act is None:
            raise ValueError(f"activation_function={d.get('activation_function')!r} is not "
                             "supported")
        vocab = d.get("vocab_size", d.get("n_vocab", 50257))
        end = d.get("eos_token_id", 50256 if vocab == 50257 else None)
        return cls(vocab_size=vocab, hidden_size=width, num_layers=d["n_layer"],
                   num_heads=d["n_head"], intermediate_size=d.get("n_inner") or 4 * width,
                   hidden_act=act, dropout=d.get("resid_pdrop", 0.1),
                   embedding_dropout=d.get("embd_pdrop", 0.1),
                   attention_dropout=d.get("attn_pdrop", 0.1),
                   max_position_embeddings=d.get("n_positions", d.get("n_ctx", 1024)),
                   layer_norm_epsilon=d.get("layer_norm_epsilon", 1e-5),
                   initializer_range=d.get("initializer_range", 0.02), norm_first=True,
                   end_token_id=end if end is not None and end < vocab else None)
