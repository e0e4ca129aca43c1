"""Packing token ids into fixed-length model inputs, apart from tokenizing.

- `pack_bert`: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` with segment ids, pairs
  truncated longest-first (the reference's `_truncate_seq_pair`).
- `pack_decoder`: optional start/end tokens, padding on the right (training) or the
  left (batched generation, so that every prompt ends at the same position).
- `pack_segments`: the packer behind `Tokenizer.pack_segments`: one or two segments in
  a family's layout, with where each segment's tokens sit.
"""

from __future__ import annotations

import tensorflow as tf


def truncate_pair_lengths(len_a, len_b, budget):
    """Lengths kept by longest-first truncation of a pair (the reference's
    `_truncate_seq_pair`: drop the last token of the longer, ties from b).

    Args:
        len_a, len_b: int64 Tensors [batch_size]; budget: int, tokens available.

    Returns:
        (keep_a, keep_b), int64 Tensors [batch_size].
    """
    m = tf.cast(budget, tf.int64)  # may be a Python int or a scalar tensor
    half_a, half_b = (m + 1) // 2, m // 2
    over = len_a + len_b > m
    keep_a = tf.where(len_a <= half_a, len_a, tf.where(len_b <= half_b, m - len_b, half_a))
    keep_a = tf.where(over, keep_a, len_a)
    keep_b = tf.where(over, m - keep_a, len_b)
    return keep_a, keep_b


def truncate_pair_lengths_hf(len_a, len_b, budget):
    """Lengths kept by Hugging Face's `longest_first` truncation of a pair (the Rust
    `tokenizers`' rule, which `transformers`' tokenizers run): when both texts must be
    cut, the shorter keeps `budget // 2` and the longer the rest (b when they tie);
    when only the longer must be cut, it keeps `budget - len(shorter)`.

    It differs from Google's `_truncate_seq_pair` (`truncate_pair_lengths`) when both
    are cut to an odd budget: for lengths (4, 4) and budget 3, Google keeps (2, 1),
    Hugging Face (1, 2). Same arguments and results as `truncate_pair_lengths`."""
    m = tf.cast(budget, tf.int64)
    swap = len_a > len_b
    short = tf.minimum(len_a, len_b)
    both = short > m - short  # cutting the longer alone is not enough
    keep_short = tf.where(both, m // 2, short)
    keep_long = tf.where(both, m // 2 + m % 2, m - short)
    over = len_a + len_b > m
    keep_a = tf.where(over, tf.where(swap, keep_long, keep_short), len_a)
    keep_b = tf.where(over, tf.where(swap, keep_short, keep_long), len_b)
    return keep_a, keep_b


def truncate(ids: tf.RaggedTensor, keep) -> tf.RaggedTensor:
    """The first `keep[b]` ids of each row b, gathered by one `RaggedRange` over the
    flat values (a boolean mask over the rows wrote a hundred nodes of ragged checks per
    call into every export's graph)."""
    starts = ids.row_starts()
    ends = starts + tf.minimum(ids.row_lengths(), tf.cast(keep, starts.dtype))
    kept = tf.ragged.range(starts, ends)
    return tf.RaggedTensor.from_row_splits(tf.gather(ids.values, kept.values),
                                           kept.row_splits, validate=False)


def keep_where(rows: tf.RaggedTensor, keep: tf.RaggedTensor, *more: tf.RaggedTensor):
    """The values of `rows` (and of each of `more`, with the same row lengths) where the
    bool `keep` is true: `tf.ragged.boolean_mask` for [batch, (n)] tensors, as one
    `boolean_mask` of the flat values and the kept counts' running sum at the row splits
    (without `tf.ragged`'s checks, over a hundred graph nodes per mask). Returns one
    RaggedTensor, or a tuple with `more`."""
    flat = keep.values
    kept = tf.cumsum(tf.cast(flat, rows.row_splits.dtype))  # kept values up to each
    splits = tf.gather(tf.concat([tf.zeros([1], kept.dtype), kept], 0), rows.row_splits)
    out = [tf.RaggedTensor.from_row_splits(tf.boolean_mask(r.values, flat), splits,
                                           validate=False) for r in (rows, *more)]
    return out[0] if not more else tuple(out)


def _column(batch, value) -> tf.RaggedTensor:
    """[batch, 1] ragged column of one id."""
    return tf.RaggedTensor.from_row_lengths(
        tf.fill([batch], tf.constant(value, tf.int64)), tf.ones([batch], tf.int64),
        validate=False)


def _dense_shape(seq_length, batch):
    # A Python int keeps the static shape [batch, seq_length] (TPU-friendly).
    if isinstance(seq_length, int):
        return [None, seq_length]
    return tf.stack([batch, tf.cast(seq_length, tf.int64)])


def _check_room(seq_length, specials):
    if isinstance(seq_length, int) and seq_length < specials:
        raise ValueError(f"seq_length={seq_length} leaves no room for {specials} special "
                         "tokens")


def _check_pair(ids_a, ids_b):
    if ids_a.shape[0] is not None and ids_b.shape[0] is not None \
            and ids_a.shape[0] != ids_b.shape[0]:
        raise ValueError(f"a pair needs as many second texts as first texts: got "
                         f"{ids_a.shape[0]} and {ids_b.shape[0]}")


def pack_bert(ids_a: tf.RaggedTensor, ids_b: tf.RaggedTensor | None, seq_length, *,
              cls_id: int, sep_id: int, pad_id: int = 0) -> dict:
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated and padded.

    Args:
        ids_a, ids_b: int RaggedTensors [batch_size, (tokens)]; ids_b may be None.
        seq_length: packed length (a Python int keeps a static shape).

    Returns:
        dict of int32 Tensors [batch_size, seq_length]: `token_ids`, `segment_ids`,
        `padding_mask`.
    """
    specials = 2 if ids_b is None else 3
    _check_room(seq_length, specials)
    budget = tf.cast(seq_length, tf.int64) - specials
    ids_a = tf.cast(ids_a, tf.int64)
    batch = ids_a.nrows()
    cls, sep = _column(batch, cls_id), _column(batch, sep_id)
    if ids_b is None:
        a = truncate(ids_a, tf.fill([batch], budget))
        tokens = tf.concat([cls, a, sep], axis=1)
        segments = tf.zeros_like(tokens)
    else:
        _check_pair(ids_a, ids_b)
        ids_b = tf.cast(ids_b, tf.int64)
        keep_a, keep_b = truncate_pair_lengths(ids_a.row_lengths(), ids_b.row_lengths(), budget)
        a, b = truncate(ids_a, keep_a), truncate(ids_b, keep_b)
        tokens = tf.concat([cls, a, sep, b, sep], axis=1)
        segments = tf.concat([tf.zeros_like(cls), tf.zeros_like(a), tf.zeros_like(sep),
                              tf.ones_like(b), tf.ones_like(sep)], axis=1)
    shape = _dense_shape(seq_length, batch)
    return {
        "token_ids": tf.cast(tokens.to_tensor(pad_id, shape=shape), tf.int32),
        "segment_ids": tf.cast(segments.to_tensor(0, shape=shape), tf.int32),
        "padding_mask": tf.cast(tf.ones_like(tokens).to_tensor(0, shape=shape), tf.int32),
    }


def pack_decoder(ids: tf.RaggedTensor, seq_length, *, start_id: int | None = None,
                 end_id: int | None = None, pad_id: int = 0,
                 padding_side: str = "right") -> dict:
    """`[start] ids [end]` cut to `seq_length` (the end token is kept when given) and
    padded on `padding_side`.

    Returns:
        dict of int32 Tensors [batch_size, seq_length]: `token_ids`, `padding_mask`.
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side={padding_side!r}: use 'left' or 'right'")
    specials = (start_id is not None) + (end_id is not None)
    _check_room(seq_length, specials)
    ids = tf.cast(ids, tf.int64)
    batch = ids.nrows()
    ids = truncate(ids, tf.fill([batch], tf.cast(seq_length, tf.int64) - specials))
    parts = ([_column(batch, start_id)] if start_id is not None else []) + [ids] + (
        [_column(batch, end_id)] if end_id is not None else [])
    tokens = tf.concat(parts, axis=1) if len(parts) > 1 else ids
    if padding_side == "left":  # pad on the right of the reversed rows, then reverse
        tokens = tf.reverse(tokens, axis=[1])
    shape = _dense_shape(seq_length, batch)
    token_ids = tokens.to_tensor(pad_id, shape=shape)
    mask = tf.ones_like(tokens).to_tensor(0, shape=shape)
    if padding_side == "left":
        token_ids, mask = tf.reverse(token_ids, axis=[1]), tf.reverse(mask, axis=[1])
    return {"token_ids": tf.cast(token_ids, tf.int32), "padding_mask": tf.cast(mask, tf.int32)}


def pack_segments(segments, seq_length, *, start=(), between=(), end=(), pad_id: int = 0,
                  segment_ids: bool = True, truncate_pair=truncate_pair_lengths):
    """One or two segments of ids packed as a family lays them out, with where each
    segment's tokens sit: the packer's answer to "where is the context?" that SQuAD
    windows, NER word alignment and fill-mask positions ask, instead of computing
    `[CLS] q [SEP] c [SEP]` offsets themselves.

    `start + a + end`, or `start + a + between + b + end` (BERT: [CLS] / [SEP] / [SEP];
    RoBERTa: <s> / </s></s> / </s>), cut to `seq_length` (one segment from its end, two
    by `truncate_pair`), padded on the right with `pad_id`.

    Args:
        segments: a list of 1 or 2 int RaggedTensors [batch, (tokens)].
        segment_ids: also return `segment_ids` (0 up to the first segment's end
            token(s), 1 after), for families with token types.

    Returns:
        (inputs, layout): `inputs` the model's dict of int32 [batch, seq_length]
        (`token_ids`, `padding_mask` and, with `segment_ids`, `segment_ids`); `layout` a
        dict of int64 `segment_start` and `segment_length` [batch, num_segments] (the
        first position and the count of each segment's kept tokens), `special_mask`
        int32 [batch, seq_length] (1 on the packer's special tokens) and
        `null_position` [batch] (where a "no answer" is read: the first token).
    """
    if not 1 <= len(segments) <= 2:
        raise ValueError(f"pack_segments takes 1 or 2 segments, got {len(segments)}")
    specials = len(start) + len(end) + (len(between) if len(segments) == 2 else 0)
    _check_room(seq_length, specials)
    budget = tf.cast(seq_length, tf.int64) - specials
    ids = [tf.cast(s, tf.int64) for s in segments]
    batch = ids[0].nrows()

    def tokens_of(values):
        if not values:
            return []
        return [tf.RaggedTensor.from_row_lengths(
            tf.tile(tf.constant(list(values), tf.int64), [batch]),
            tf.fill([batch], tf.constant(len(values), tf.int64)), validate=False)]

    if len(ids) == 1:
        keep = [tf.minimum(ids[0].row_lengths(), budget)]
    else:
        _check_pair(ids[0], ids[1])
        keep = list(truncate_pair(ids[0].row_lengths(), ids[1].row_lengths(), budget))
    kept = [truncate(x, k) for x, k in zip(ids, keep)]
    parts = tokens_of(start)
    starts = [tf.fill([batch], tf.constant(len(start), tf.int64))]
    parts.append(kept[0])
    if len(kept) == 2:
        parts += tokens_of(between)
        starts.append(starts[0] + keep[0] + len(between))
        parts.append(kept[1])
    parts += tokens_of(end)
    tokens = tf.concat(parts, axis=1)
    shape = _dense_shape(seq_length, batch)
    positions = tf.ragged.range(tokens.row_lengths())  # [B, (T)]
    inside = tf.zeros_like(positions, tf.bool)
    for s, k in zip(starts, keep):
        inside |= (positions >= s[:, None]) & (positions < (s + k)[:, None])
    special = tf.cast(tf.logical_not(inside), tf.int32)
    inputs = {"token_ids": tf.cast(tokens.to_tensor(pad_id, shape=shape), tf.int32),
              "padding_mask": tf.cast(tf.ones_like(tokens).to_tensor(0, shape=shape),
                                      tf.int32)}
    if segment_ids:
        # Type 1 from the second segment on (BERT: b and the final [SEP]).
        second = starts[1][:, None] if len(starts) == 2 else tf.fill([batch, 1], tf.int64.max)
        inputs["segment_ids"] = tf.cast(
            tf.cast(positions >= second, tf.int32).to_tensor(0, shape=shape), tf.int32)
    layout = {"segment_start": tf.stack(starts, axis=1),
              "segment_length": tf.stack(keep, axis=1),
              "special_mask": special.to_tensor(0, shape=shape),
              "null_position": tf.zeros([batch], tf.int64)}
    return inputs, layout
