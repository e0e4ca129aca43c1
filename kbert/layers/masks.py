"""Attention masks in one place: padding, causal, and their combination.

A mask is boolean, True where a query may attend to a key, of a shape broadcastable
to [B, Tq, Tk] (B = batch, Tq = query positions, Tk = key positions). The attention
layer turns it into a large negative bias on the scores it forbids.

Shape legend: B = batch size, Tq = query length, Tk = key length.
"""

from __future__ import annotations

from keras import ops

# Added to attention scores at padded keys by BERT's modeling.py. exp(-10000) is 0 in
# float32, and the value fits float16 and bfloat16.
BERT_MASK_BIAS = -10000.0


def padding_bias(padding_mask, bias: float = BERT_MASK_BIAS):
    """BERT's additive attention bias: 0 on real keys, `bias` on padding.

    Args:
        padding_mask: int or bool Tensor [B, Tk], 1 for real tokens.

    Returns:
        float32 Tensor [B, 1, 1, Tk] (broadcast over heads and queries).
    """
    mask = ops.cast(padding_mask, "float32")
    return ops.expand_dims(ops.expand_dims((1.0 - mask) * bias, 1), 1)  # (B, 1, 1, Tk)


def key_mask(padding_mask):
    """[B, Tk] padding mask -> bool [B, 1, Tk]: every query may see every real key."""
    return ops.expand_dims(ops.cast(padding_mask, "bool"), 1)


def causal_mask(query_length, key_length, start_index=0):
    """bool [1, Tq, Tk]: query i (at absolute position `start_index + i`) sees keys
    j <= start_index + i. With a key/value cache, `start_index` is the cache index."""
    rows = ops.expand_dims(ops.arange(query_length) + start_index, 1)  # (Tq, 1)
    cols = ops.expand_dims(ops.arange(key_length), 0)  # (1, Tk)
    return ops.expand_dims(cols <= rows, 0)  # (1, Tq, Tk)


def merge_masks(*masks):
    """Logical and of the given masks (None entries are skipped); None if none."""
    out = None
    for m in masks:
        if m is None:
            continue
        m = ops.cast(m, "bool")
        out = m if out is None else ops.logical_and(out, m)
    return out


def positions_from_mask(padding_mask):
    """int [B, T] padding mask -> int32 [B, T] positions counted from each row's first
    real token (0 on padding before it). Right-padded rows get 0..T-1 on their tokens,
    left-padded ones too: a prompt's positions do not depend on its padding, as in
    Hugging Face's `generate` (position ids from the attention mask's cumulative sum)."""
    mask = ops.cast(padding_mask, "int32")
    return ops.maximum(ops.cumsum(mask, axis=1) - 1, 0)
