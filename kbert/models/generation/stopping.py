"""Stop strings: matched in-graph on each row's last bytes (`StopStrings`) and cut from
the text (`cut_at_stop`)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


class StopStrings:
    """In-graph matching of stop strings on the bytes of each row's continuation: the
    last `width` bytes of each row are kept; a row has stopped when one of the strings
    occurs in them."""

    def __init__(self, strings, token_bytes):
        self.strings = tuple(s.encode("utf-8") if isinstance(s, str) else bytes(s)
                             for s in strings)
        if not all(self.strings):
            raise ValueError("stop: an empty string would stop at once")
        longest = max(map(len, token_bytes))
        table = np.full((len(token_bytes), max(longest, 1)), -1, np.int32)
        for i, b in enumerate(token_bytes):
            table[i, :len(b)] = list(b)
        self.table, self.lengths = table, np.array([len(b) for b in token_bytes], np.int32)
        self.width = max(map(len, self.strings)) + table.shape[1]

    def key(self) -> tuple:
        return self.strings

    def empty(self, rows):
        return tf.fill([rows, self.width], -2)

    def update(self, tail, token):
        """(tail [R, width], tokens [R]) -> (the new tail, [R] bool: a string occurs)."""
        new = tf.gather(tf.constant(self.table), token)
        length = tf.gather(tf.constant(self.lengths), token)
        joined = tf.concat([tail, new], axis=1)
        tail = tf.gather(joined, length[:, None] + tf.range(self.width)[None, :],
                         batch_dims=1)
        found = tf.zeros([tf.shape(tail)[0]], tf.bool)
        for s in self.strings:
            m = len(s)
            spots = self.width - m + 1
            hit = tf.ones([tf.shape(tail)[0], spots], tf.bool)
            for j, byte in enumerate(s):
                hit = tf.logical_and(hit, tf.equal(tail[:, j:j + spots], byte))
            found = tf.logical_or(found, tf.reduce_any(hit, axis=1))
        return tail, found


def cut_at_stop(text: str, strings) -> tuple[str, bool]:
    """The text before the first of the stop strings, and whether one occurred."""
    spots = [text.find(s) for s in strings if isinstance(s, str)]
    spots = [i for i in spots if i >= 0]
    return (text[:min(spots)], True) if spots else (text, False)
