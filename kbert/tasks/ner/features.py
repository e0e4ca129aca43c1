"""Words -> WordPiece windows with first-piece labels, and back.

Each word becomes its WordPiece tokens (a word the tokenizer reduces to nothing, such
as a lone control character, becomes [UNK], so that no word is lost). The label sits
on the word's first piece; the other pieces get -1, which the loss and the
predictions ignore. A sentence whose pieces do not fit in `max_seq_length - 2` is cut
into consecutive windows of that many pieces; a word whose pieces cross a window edge
is labelled (and predicted) in the window of its first piece, its other pieces are
context in the next. The exported `ner` SavedModel windows the same way in-graph.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from kbert.layers.heads import IGNORE_LABEL as IGNORE


@dataclasses.dataclass
class NerFeatures:
    """Encoder inputs [num_windows, seq] plus `labels` (-1 where ignored) and, for
    every word, where its first piece went: `word_window`, `word_position` (aligned
    with the input sentences' words)."""

    model_inputs: dict  # the packer's: token_ids, padding_mask (and segment_ids)
    labels: np.ndarray
    window_sentence: np.ndarray
    word_window: list  # per sentence: np.ndarray [num_words]
    word_position: list

    @property
    def padding_mask(self) -> np.ndarray:
        return self.model_inputs["padding_mask"]

    def inputs(self) -> dict:
        return dict(self.model_inputs)

    def dataset(self, tokenizer=None) -> tf.data.Dataset:
        """Unbatched (inputs, {"logits": labels}) examples."""
        return tf.data.Dataset.from_tensor_slices((self.inputs(), {"logits": self.labels}))


def word_pieces(tokenizer, words: list[str], batch_size: int = 4096) -> list[list[int]]:
    """The pieces of each word (`Tokenizer.tokenize_words`; the unknown token for a word
    with none)."""
    out = []
    for i in range(0, len(words), batch_size):
        ids = tokenizer.tokenize_words(tf.constant(words[i:i + batch_size])).to_list()
        out.extend(row if row else [tokenizer.unk_id] for row in ids)
    return out


def convert_sentences(sentences: list[list[str]], tokenizer, max_seq_length: int = 128,
                      tags: list[list[str]] | None = None, labels: list[str] | None = None
                      ) -> NerFeatures:
    """Sentences of words (and tags) -> windows.

    Args:
        sentences: lists of words. tags: the words' tags, with `labels` the label list.
    """
    specials = tokenizer.special_tokens[0]
    if max_seq_length < specials + 1:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for words")
    width = max_seq_length - specials
    label_id = {label: i for i, label in enumerate(labels or [])}
    flat = [w for s in sentences for w in s]
    pieces = word_pieces(tokenizer, flat) if flat else []
    rows_ids, rows_labels, window_sentence, word_window, word_position = [], [], [], [], []
    k = 0
    for n, words in enumerate(sentences):
        ids, lab, first = [], [], []
        for j, word in enumerate(words):
            p = pieces[k]
            k += 1
            first.append(len(ids))
            ids.extend(p)
            if tags is not None:
                tag = tags[n][j]
                if tag not in label_id:
                    raise ValueError(f"sentence {n}, word {j} ({word!r}): tag {tag!r} is not "
                                     f"in the label list {labels}")
                lab.extend([label_id[tag]] + [IGNORE] * (len(p) - 1))
        num_windows = max(1, -(-len(ids) // width))
        base = len(rows_ids)
        for w in range(num_windows):
            rows_ids.append(ids[w * width:(w + 1) * width])
            rows_labels.append(lab[w * width:(w + 1) * width] if tags is not None else [])
            window_sentence.append(n)
        first = np.asarray(first, np.int64)
        word_window.append(base + first // width)
        word_position.append(first % width)  # in the window's pieces; the packer's
    count = len(rows_ids)                    # offset is added below
    inputs, layout = tokenizer.pack_segments(
        [tf.ragged.constant(rows_ids, tf.int64, ragged_rank=1)
         if count else tf.ragged.constant([], tf.int64, ragged_rank=1)], max_seq_length)
    inputs = {k: v.numpy() for k, v in inputs.items()}
    offset = layout["segment_start"][:, 0].numpy()  # where each window's pieces start
    label_arr = np.full((count, max_seq_length), IGNORE, np.int32)
    for i, lab in enumerate(rows_labels):
        if lab:
            label_arr[i, offset[i]:offset[i] + len(lab)] = lab
    word_position = [positions + offset[windows] if len(windows) else positions
                     for windows, positions in zip(word_window, word_position)]
    return NerFeatures(inputs, label_arr, np.asarray(window_sentence, np.int64),
                       word_window, word_position)


def word_predictions(features: NerFeatures, label_ids: np.ndarray, labels: list[str]):
    """Per-position label ids [num_windows, seq] -> the tag of every word."""
    return [[labels[int(label_ids[w, p])] for w, p in zip(windows, positions)]
            for windows, positions in zip(features.word_window, features.word_position)]
