"""bilm-tf's / AllenNLP's ELMo files: `options.json` and the weight HDF5.

Dataset names are bilm-tf's (`char_embed`, `CNN/W_cnn_0`, `CNN_high_0/W_carry`,
`CNN_proj/W_proj`, `RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0`, ...); `char_embed` holds
the characters 1..n_characters - 1 (the zero row for id 0 is added by the model, as
bilm-tf adds it when loading).
"""

from __future__ import annotations

import glob
import json
import os

import numpy as np

from kbert import convert
from kbert.io import atomic_directory
from kbert.models.elmo.config import ELMoConfig

OPTIONS, WEIGHTS = "options.json", "weights.hdf5"


def weight_file(folder: str) -> str:
    named = os.path.join(folder, WEIGHTS)
    if os.path.exists(named):
        return named
    found = sorted(glob.glob(os.path.join(folder, "*.hdf5")) + glob.glob(
        os.path.join(folder, "*.h5")))
    if len(found) != 1:
        raise FileNotFoundError(f"{folder}: expected one weight file (.hdf5), found "
                                f"{len(found)}" + (f": {found}" if found else ""))
    return found[0]


def load(cls, folder: str, dtype=None, stateful: bool = False, **kwargs):
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: not a folder")
    options = os.path.join(folder, OPTIONS)
    if not os.path.exists(options):
        from kbert.models import registry

        registry.expect_family(folder, "elmo")
        raise FileNotFoundError(f"{folder}: no {OPTIONS} (bilm-tf / AllenNLP options)")
    config = ELMoConfig.from_json_file(options)
    model = cls(config, stateful=stateful, **({"dtype": dtype} if dtype else {}), **kwargs)
    source = weight_file(folder)
    tensors = convert.read_hdf5(source)
    targets = model.weight_map()
    rules = [convert.Rule(name, (name,)) for name in targets]
    convert.load_into(targets, tensors, rules, source, "ELMo")
    return model


def save(model, folder: str, tokenizer=None) -> None:
    """bilm-tf's layout: `options.json` and `weights.hdf5`, written atomically (ELMo's
    character ids need no tokenizer files: `tokenizer` is accepted and not written)."""
    import h5py

    with atomic_directory(folder) as tmp:
        with open(os.path.join(tmp, OPTIONS), "w", encoding="utf-8") as f:
            json.dump(model.config.to_reference_dict(), f, indent=2)
        with h5py.File(os.path.join(tmp, WEIGHTS), "w") as h5:
            for name, var in model.weight_map().items():
                h5.create_dataset(name, data=np.asarray(var.numpy(), np.float32))
