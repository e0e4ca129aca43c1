"""Checkpoint conversion for every family: format readers, and name tables with
per-tensor hooks applied with errors that name the variable.

A family hands its table to the converter (never the other way round): this package
knows no family's names. See `kbert.models.bert.checkpoints` for BERT's table, and
`kbert.convert.folders` for the folder handling every family shares.
"""

from kbert.convert.readers import (read_hdf5, read_hf_folder_weights, read_safetensors,
                                   read_tf_checkpoint, read_torch_bin, read_weights_file)
from kbert.convert.rules import (Rule, assign, concat, convert, identity, reorder_gates, split,
                                 transpose)

__all__ = ["Rule", "assign", "concat", "convert", "identity", "read_hdf5",
           "read_hf_folder_weights", "read_safetensors", "read_tf_checkpoint",
           "read_torch_bin", "read_weights_file", "reorder_gates", "split", "transpose"]
