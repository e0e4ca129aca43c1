"""The byte-level BPE engine shared by kbert's BPE tokenizers (GPT-2, RoBERTa, GPT-1's
character-level BPE): the files (`vocab.json` + `merges.txt`), GPT-2's byte-to-character
table, and the merge rounds that run in-graph over every word of a batch at once.
A pre-tokenizer (GPT-2's, in `kbert.tokenizers.gpt`; BERT's basic tokenization for
GPT-1) decides the words; this module only merges them.
"""

from __future__ import annotations

import json

import tensorflow as tf

_NO_RANK = 2 ** 31 - 1


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's stand-in character of each byte: the printable bytes of Latin-1
    (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) stand for themselves, the other 68 bytes for
    U+0100, U+0101, ... in byte order (so no symbol holds a space or a control)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def bpe_assets(vocabulary, merges) -> dict[str, str]:
    """A BPE tokenizer's files in Hugging Face's layout: `vocab.json`, `merges.txt`."""
    return {"vocab.json": json.dumps(dict(vocabulary), ensure_ascii=False),
            "merges.txt": "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)}


def read_merges(path: str) -> list[tuple[str, str]]:
    """`merges.txt` / `vocab.bpe`: a `#version` line, then one pair a line."""
    merges = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or (number == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not all(parts):
                raise ValueError(f"{path}:{number}: expected two symbols separated by one "
                                 f"space, got {line!r}")
            merges.append((parts[0], parts[1]))
    return merges


class HeldBpe:
    """The vocabulary and merges of a BPE tokenizer, kept in `self._held`
    (`kbert.tokenizers.base.Held`: outside TensorFlow's object tracking)."""

    def hold(self, vocabulary, merges) -> None:
        """Keeps `vocabulary` (token -> id, or a `vocab.json` path) and `merges` (pairs,
        or a `merges.txt` / `vocab.bpe` path)."""
        import os

        from kbert.io import read_json
        from kbert.tokenizers.base import Held

        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = read_json(os.fspath(vocabulary))
        if isinstance(merges, (str, os.PathLike)):
            merges = read_merges(os.fspath(merges))
        self._held = Held(vocabulary=dict(vocabulary), merges=[tuple(m) for m in merges])

    @property
    def _vocabulary(self) -> dict:
        return self._held.vocabulary

    @property
    def _merges(self) -> list:
        return self._held.merges


_PAIR_BASE = 2 ** 22  # a pair (left, right) of symbol ids is the key left * base + right


class MergeTable(tf.Module):
    """BPE merges as integer tables, so that the merge rounds handle no strings: each
    symbol is an id (the vocabulary's; strings that only merges name get ids past it),
    a pair of ids has its merge's rank, and a rank gives the merged symbol's id.

    Args:
        vocabulary: token -> id.
        merges: (left, right) pairs in rank order (the first of repeated pairs counts).
    """

    def __init__(self, vocabulary: dict, merges):
        super().__init__(name="merge_table")
        ids = dict(vocabulary)
        self.vocab_end = max(ids.values(), default=-1) + 1  # ids from here: not tokens
        for a, b in merges:
            for piece in (a, b, a + b):
                ids.setdefault(piece, self.vocab_end + len(ids) - len(vocabulary))
        if max(ids.values(), default=0) >= _PAIR_BASE:
            raise ValueError(f"BPE symbol ids up to {max(ids.values())}: this tokenizer "
                             f"handles ids below {_PAIR_BASE}")
        keys, ranks = [], []
        seen = set()
        for rank, (a, b) in enumerate(merges):
            key = ids[a] * _PAIR_BASE + ids[b]
            if key not in seen:
                seen.add(key)
                keys.append(key)
                ranks.append(rank)
        if not keys:  # no merges (a character-level byte BPE): a key no pair has
            keys, ranks = [-1], [_NO_RANK]
        self.ranks = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.int64), tf.constant(ranks, tf.int32)), _NO_RANK)
        self.results = tf.constant([ids[a + b] for a, b in merges] or [0], tf.int32)
        strings = sorted(ids, key=ids.get)
        self.symbol_ids = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(strings), tf.constant([ids[t] for t in strings], tf.int32)), -1)


def merge_rounds(merges: MergeTable, rows, symbols, count) -> tf.RaggedTensor:
    """BPE on many words at once: int64 `rows` [N] (each symbol's word, sorted) and
    int32 symbol ids `symbols` [N] (`merges.symbol_ids`; -1 for a symbol no merge
    names) -> RaggedTensor [count, (ids)] of the merged symbols' ids.

    The symbols of all words lie in one flat vector, so a round costs what the words
    still merging hold, whatever the longest word. Each round, every word merges every
    occurrence of its best-ranked pair, left to right without overlap, as the reference
    `bpe()` does; a word without a listed pair is done and its symbols are emitted.
    """
    base = tf.constant(_PAIR_BASE, tf.int64)
    last_rank = tf.size(merges.results) - 1

    def cond(rows, symbols, out_rows, out_pos, out_symbols):
        return tf.size(rows) > 0

    def body(rows, symbols, out_rows, out_pos, out_symbols):
        n = tf.size(rows)
        index = tf.range(n)
        same = tf.equal(rows[1:], rows[:-1])  # pair (i, i + 1) inside one word
        wide = tf.cast(symbols, tf.int64)
        pair_ranks = tf.where(same & (symbols[:-1] >= 0) & (symbols[1:] >= 0),
                              merges.ranks.lookup(wide[:-1] * base + wide[1:]), _NO_RANK)
        pair_rows = rows[:-1]
        best = tf.math.unsorted_segment_min(pair_ranks, pair_rows, count)
        hit = tf.equal(pair_ranks, tf.gather(best, pair_rows)) & (pair_ranks < _NO_RANK)
        # Consecutive hits (a pair of equal symbols, "a a a"): every other one, from
        # the first, as the reference scans left to right.
        first_of_run = hit & tf.logical_not(tf.concat([[False], hit[:-1]], 0))
        runs = tf.cumsum(tf.cast(first_of_run, tf.int32))  # runs begun so far
        run_begin = tf.gather(tf.concat(
            [[0], tf.cast(tf.where(first_of_run)[:, 0], tf.int32)], 0), runs)
        merge = hit & tf.equal((index[:-1] - run_begin) % 2, 0)
        merged_ids = tf.gather(merges.results, tf.minimum(pair_ranks, last_rank))
        merge = tf.concat([merge, [False]], 0)  # (n,): symbol i takes symbol i + 1
        merged_ids = tf.concat([merged_ids, [0]], 0)
        merged_words = tf.math.unsorted_segment_max(tf.cast(merge, tf.int32), rows, count)
        done = tf.equal(tf.gather(merged_words, rows), 0)
        # Words without a listed pair are done: emit their symbols with positions.
        starts = tf.concat([[True], tf.not_equal(rows[1:], rows[:-1])], 0)
        word_start = tf.gather(tf.cast(tf.where(starts)[:, 0], tf.int32),
                               tf.cumsum(tf.cast(starts, tf.int32)) - 1)
        out_rows = tf.concat([out_rows, tf.boolean_mask(rows, done)], 0)
        out_pos = tf.concat([out_pos, tf.boolean_mask(index - word_start, done)], 0)
        out_symbols = tf.concat([out_symbols, tf.boolean_mask(symbols, done)], 0)
        # The others merge and go on.
        joined = tf.where(merge, merged_ids, symbols)
        dropped = tf.concat([[False], merge[:-1]], 0)
        keep = tf.logical_not(done) & tf.logical_not(dropped)
        return (tf.boolean_mask(rows, keep), tf.boolean_mask(joined, keep), out_rows,
                out_pos, out_symbols)

    state = (tf.cast(rows, tf.int64), tf.cast(symbols, tf.int32), tf.zeros([0], tf.int64),
             tf.zeros([0], tf.int32), tf.zeros([0], tf.int32))
    invariants = tuple(tf.TensorShape([None]) for _ in state)
    _, _, out_rows, out_pos, out_symbols = tf.while_loop(
        cond, body, state, shape_invariants=invariants)
    # Back in word order, each word's symbols in position order.
    width = tf.cast(tf.reduce_max(tf.concat([out_pos, [0]], 0)) + 1, tf.int64)
    order = tf.argsort(out_rows * width + tf.cast(out_pos, tf.int64), stable=True)
    return tf.RaggedTensor.from_value_rowids(tf.gather(out_symbols, order),
                                             tf.gather(out_rows, order), nrows=count,
                                             validate=False)
