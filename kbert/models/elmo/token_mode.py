"""bilm-tf's token mode: the character CNN's vectors of a fixed word list computed once
(`dump_token_embeddings`, the HDF5 file with one `embedding` dataset [words, P] that
bilm-tf writes), and the biLM reading word ids instead of characters
(`ELMo.with_token_table`), as bilm-tf's `TokenBatcher` gives them: the vocabulary id + 1,
0 for padding. Words outside the list read as `<UNK>`.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import tensorflow as tf

from kbert.io import normal_permissions


def dump_token_embeddings(model, words, path) -> np.ndarray:
    """Writes `model.token_embeddings(words)` to `path` as bilm-tf does (dataset
    `embedding`, float32), atomically; returns the array."""
    import h5py

    words = list(getattr(words, "words", words))
    table = model.token_embeddings(words)
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-", dir=folder)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("embedding", data=table)
        normal_permissions(tmp, folder=False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return table


def read_token_embeddings(path) -> np.ndarray:
    """bilm-tf's token embedding file -> [words, P]."""
    import h5py

    with h5py.File(path, "r") as f:
        if "embedding" not in f:
            raise ValueError(f"{path}: no 'embedding' dataset (a bilm-tf token embedding "
                             "file has one)")
        return np.asarray(f["embedding"], np.float32)


def token_inputs(vocab, texts, tokenizer=None) -> dict:
    """Texts (split as `str.split`) -> the token-mode inputs: `token_ids` [B, W] (ids + 1;
    `<UNK>`'s for other words) and `padding_mask`."""
    from kbert.tokenizers.elmo import ELMoCharTokenizer

    tokenizer = tokenizer or ELMoCharTokenizer()
    words = tokenizer.split(tf.constant(texts) if not tf.is_tensor(texts) else texts)
    table = vocab.table()
    ids = tf.ragged.map_flat_values(table.lookup, words) + 1
    dense = ids.to_tensor(0)
    return {"token_ids": dense,
            "padding_mask": tf.sequence_mask(words.row_lengths(), tf.shape(dense)[1], tf.int32)}
