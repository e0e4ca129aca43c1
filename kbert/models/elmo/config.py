"""ELMo hyper-parameters: the fields of bilm-tf's / AllenNLP's `options.json`."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from kbert.models.config import ModelConfig

# bilm-tf's character CNN of every published model: filter widths 1..7 with
# 32, 32, 64, 128, 256, 512, 1024 filters (2,048 in all).
PUBLISHED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclasses.dataclass
class ELMoConfig(ModelConfig):
    """Hyper-parameters of ELMo's biLM (Peters et al., 2018): a character CNN token
    encoder, highway layers and a projection, then forward and backward LSTM LMs with
    projections.

    Example:
    >>> ELMoConfig.preset("original").lstm_dim
    4096
    """

    lstm_dim: int = 4096  # lstm.dim: LSTM cell size
    projection_dim: int = 512  # lstm.projection_dim: LSTM output and token size
    num_layers: int = 2  # lstm.n_layers
    cell_clip: float | None = 3.0  # lstm.cell_clip
    proj_clip: float | None = 3.0  # lstm.proj_clip
    use_skip_connections: bool = True  # lstm.use_skip_connections (residual above layer 0)
    char_embedding_dim: int = 16  # char_cnn.embedding.dim
    filters: tuple = PUBLISHED_FILTERS  # char_cnn.filters: (width, count) pairs
    num_highway: int = 2  # char_cnn.n_highway
    num_characters: int = 262  # char_cnn.n_characters: 256 bytes, 5 marks, +1 shift
    max_characters_per_token: int = 50  # char_cnn.max_characters_per_token
    activation: str = "relu"  # char_cnn.activation: "relu" or "tanh"
    dropout: float = 0.1  # dropout: on each LSTM's input and the top outputs, in training

    family: ClassVar[str] = "elmo"
    PRESETS: ClassVar[dict[str, dict]] = {
        "tiny": dict(lstm_dim=24, projection_dim=8, num_highway=1, char_embedding_dim=4,
                     filters=((1, 4), (2, 6), (3, 6)), max_characters_per_token=12),
        "small": dict(lstm_dim=1024, projection_dim=128, num_highway=1),
        "medium": dict(lstm_dim=2048, projection_dim=256, num_highway=1),
        "original": dict(),
    }

    def __post_init__(self):
        self.filters = tuple((int(w), int(n)) for w, n in self.filters)
        if self.activation not in ("relu", "tanh"):
            raise ValueError(f"ELMoConfig.activation={self.activation!r}: use relu or tanh")
        if self.max_characters_per_token < 3:
            raise ValueError(f"ELMoConfig.max_characters_per_token="
                             f"{self.max_characters_per_token}: needs room for the "
                             "begin-of-word and end-of-word marks and a byte")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"ELMoConfig.dropout={self.dropout}: use 0 <= dropout < 1")
        if self.num_layers < 1:
            raise ValueError(f"ELMoConfig.num_layers={self.num_layers}: at least 1")

    @property
    def num_filters(self) -> int:
        return sum(n for _, n in self.filters)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["filters"] = [list(f) for f in self.filters]
        return d

    @classmethod
    def is_reference_dict(cls, d: dict[str, Any]) -> bool:
        """bilm-tf's / AllenNLP's `options.json`: `lstm` and `char_cnn` sections."""
        return "lstm" in d and "char_cnn" in d

    @classmethod
    def from_reference_dict(cls, d: dict[str, Any]) -> "ELMoConfig":
        lstm, cnn = d["lstm"], d["char_cnn"]
        missing = [f"lstm.{k}" for k in ("dim", "projection_dim", "n_layers")
                   if k not in lstm]
        missing += [f"char_cnn.{k}" for k in ("filters", "n_highway", "n_characters",
                                              "max_characters_per_token")
                    if k not in cnn]
        if "embedding" not in cnn or "dim" not in cnn.get("embedding", {}):
            missing.append("char_cnn.embedding.dim")
        if missing:
            raise ValueError(f"ELMo options are missing field(s) {missing}")
        return cls(lstm_dim=lstm["dim"], projection_dim=lstm["projection_dim"],
                   num_layers=lstm["n_layers"], cell_clip=lstm.get("cell_clip"),
                   proj_clip=lstm.get("proj_clip"),
                   use_skip_connections=bool(lstm.get("use_skip_connections", False)),
                   char_embedding_dim=cnn["embedding"]["dim"],
                   filters=tuple(tuple(f) for f in cnn["filters"]),
                   num_highway=cnn["n_highway"], num_characters=cnn["n_characters"],
                   max_characters_per_token=cnn["max_characters_per_token"],
                   activation=cnn.get("activation", "relu"),
                   dropout=float(d.get("dropout", 0.1)))

    def to_reference_dict(self) -> dict[str, Any]:
        """bilm-tf's `options.json` layout."""
        return {"lstm": {"dim": self.lstm_dim, "projection_dim": self.projection_dim,
                         "n_layers": self.num_layers, "cell_clip": self.cell_clip,
                         "proj_clip": self.proj_clip,
                         "use_skip_connections": self.use_skip_connections},
                "char_cnn": {"embedding": {"dim": self.char_embedding_dim},
                             "filters": [list(f) for f in self.filters],
                             "n_highway": self.num_highway,
                             "n_characters": self.num_characters,
                             "max_characters_per_token": self.max_characters_per_token,
                             "activation": self.activation},
                "dropout": self.dropout}
