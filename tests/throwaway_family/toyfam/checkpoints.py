"""toyfam's folders: `config.json` (with `kbert_model`), the Keras weights file and the
tokenizer's files, written atomically."""

import os

from kbert.io import atomic_directory, read_json
from kbert.models.toyfam.config import ToyConfig


def load(cls, path, dtype=None, **overrides):
    config = ToyConfig.from_dict({**{k: v for k, v in read_json(
        os.path.join(path, "config.json")).items() if k != "kbert_model"}, **overrides})
    model = cls(config, dtype=dtype)
    model.load_weights(os.path.join(path, "model.weights.h5"))
    return model


def save(model, path, tokenizer=None):
    import json

    with atomic_directory(path) as tmp:
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
            json.dump({**model.config.to_dict(), "kbert_model": "toyfam"}, f)
        model.save_weights(os.path.join(tmp, "model.weights.h5"))
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
