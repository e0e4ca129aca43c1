"""String ops the tokenizers and the task exports share, each with memory linear in the
text: a regex split that reads past NUL bytes, pieces of a batch's texts by byte
offsets, and byte offsets as code-point offsets.

A string tensor owns its bytes: `tf.gather(text, rows)` or `tf.repeat(text, n)` copies
each text once per row it is gathered for, so taking a word or an entity out of a text
with `tf.strings.substr(tf.gather(text, rows), ...)` costs words x text. These take the
pieces from the texts' bytes, each text read once.
"""

from __future__ import annotations

import tensorflow as tf


def byte_slices(texts, rows, starts, ends):
    """tf.string [n]: `texts[rows[i]][starts[i]:ends[i]]` (bytes), for int64 vectors
    `rows`, `starts`, `ends`; memory linear in the texts and the pieces."""
    pieces = tf.strings.bytes_split(texts)  # [batch, (bytes)], one string per byte
    first = tf.gather(pieces.row_starts(), rows)
    ranges = tf.ragged.range(first + starts, first + tf.maximum(ends, starts))
    return tf.strings.reduce_join(tf.gather(pieces.flat_values, ranges), axis=1)


def byte_to_char_offsets(texts, byte_offsets):
    """Code-point offsets of byte offsets (at character boundaries) into UTF-8 `texts`.

    Args:
        texts: tf.string [batch]; byte_offsets: int64 [batch].
    """
    rows = tf.range(tf.shape(texts, out_type=tf.int64)[0])
    return char_offsets(texts, rows, byte_offsets)


def char_offsets(texts, rows, byte_offsets):
    """Code-point offsets of byte offsets into `texts[rows]` (int64 vectors of one
    length), each text decoded once: the number of characters of the row's text that
    start before the offset."""
    _, char_starts = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")
    char_starts = tf.cast(char_starts, tf.int64)
    # Keys that grow across rows: row * width + byte, width past every text's length.
    width = tf.reduce_max(tf.concat([tf.cast(tf.strings.length(texts), tf.int64), [0]],
                                    0)) + 1
    batch = char_starts.nrows(out_type=tf.int64)
    keys = char_starts.flat_values + tf.repeat(tf.range(batch) * width,
                                               char_starts.row_lengths())
    found = tf.searchsorted(keys[tf.newaxis, :], (rows * width + byte_offsets)[tf.newaxis, :],
                            side="left", out_type=tf.int64)[0]
    return found - tf.gather(char_starts.row_starts(), rows)


def regex_split_with_offsets(texts, delim_pattern: str, keep_pattern: str = ""):
    """`tensorflow_text.regex_split_with_offsets` that reads the whole text: (pieces,
    byte starts, byte ends), RaggedTensors [batch, (pieces)].

    tensorflow-text's regex split stops at the first NUL byte (`"hello\\x00world"` splits
    as `"hello"`), silently dropping the rest. The text is split with each NUL swapped
    for byte 0x01 (neither matches a pattern here that the other does not: the
    patterns never name either), and the pieces are cut from the original bytes by their
    offsets, so a NUL stays in its piece as the reference tokenizers keep it."""
    import tensorflow_text as tf_text

    _, starts, ends = tf_text.regex_split_with_offsets(
        tf.strings.regex_replace(texts, "\\x00", "\x01"), delim_pattern, keep_pattern)
    pieces = byte_slices(texts, starts.value_rowids(), starts.flat_values, ends.flat_values)
    return starts.with_flat_values(pieces), starts, ends
