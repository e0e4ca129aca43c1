"""Checkpoint conversion for every family: format readers, and name tables with
per-tensor hooks applied with errors that name the variable. Readers are lazy and
`load_into` assigns tensor by tensor; `initialization.deferred` builds a model without
the random values its checkpoint replaces.

A family hands its table to the converter (never the other way round): this package
knows no family's names. See `kbert.models.bert.checkpoints` for BERT's table, and
`kbert.convert.folders` for the folder handling every family shares.
"""

from kbert.convert.readers import (LazyTensors, lazy, read_hdf5, read_hf_folder_weights,
                                   read_safetensors, read_tf_checkpoint, read_torch_bin,
                                   read_weights_file)
from kbert.convert.rules import (Rule, assign, concat, convert, identity, load_into,
                                 reorder_gates, split, transpose)

__all__ = ["LazyTensors", "Rule", "assign", "concat", "convert", "identity", "lazy",
           "load_into", "read_hdf5", "read_hf_folder_weights", "read_safetensors",
           "read_tf_checkpoint", "read_torch_bin", "read_weights_file", "reorder_gates",
           "split", "transpose"]
