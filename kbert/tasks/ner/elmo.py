"""NER with ELMo (`--model elmo`): words in, one label a word.

ELMo reads whole words (its character CNN makes each word's vector), so there are no
pieces to align: a sentence is its words, cut into consecutive windows of
`max_seq_length` words when longer (logged), each word labelled and predicted in its
window. Character ids are made in the `tf.data` pipeline, one window at a time, so a
corpus is never held as a [sentences, words, characters] array.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from kbert.tasks.ner.features import IGNORE


@dataclasses.dataclass
class WordWindows:
    """Windows of words, their `labels` [num_windows, max_words] (-1 on padding) and
    `padding_mask`, and where each sentence's words went (`word_window`,
    `word_position`, as `NerFeatures` has them)."""

    words: list  # per window: list of str
    labels: np.ndarray
    padding_mask: np.ndarray
    word_window: list
    word_position: list

    def dataset(self, tokenizer) -> tf.data.Dataset:
        """Unbatched ({"char_ids" [max_words, C], "padding_mask"}, {"logits": labels})."""
        width = self.labels.shape[1]
        words = tf.ragged.constant(self.words, dtype=tf.string, ragged_rank=1) \
            if any(self.words) else tf.RaggedTensor.from_row_lengths(
                tf.constant([], tf.string), tf.zeros([len(self.words)], tf.int64))

        def encode(row, labels):
            x = tokenizer(tf.RaggedTensor.from_row_lengths(row, tf.shape(row, tf.int64)[:1]))
            n = tf.shape(row)[0]
            char_ids = tf.pad(x["char_ids"][0], [[0, width - n], [0, 0]])
            return ({"char_ids": char_ids, "padding_mask": tf.sequence_mask(n, width, tf.int32)},
                    {"logits": labels})

        ds = tf.data.Dataset.from_tensor_slices((words, self.labels))
        return ds.map(encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def word_windows(sentences: list[list[str]], max_words: int, tags=None, labels=None
                 ) -> WordWindows:
    """Sentences of words (and their tags, with the label list) -> windows."""
    if max_words < 1:
        raise ValueError(f"max_seq_length={max_words}: at least one word a window")
    label_id = {label: i for i, label in enumerate(labels or [])}
    windows, window_labels, word_window, word_position = [], [], [], []
    for n, words in enumerate(sentences):
        ids = []
        if tags is not None:
            for j, tag in enumerate(tags[n]):
                if tag not in label_id:
                    raise ValueError(f"sentence {n}, word {j} ({words[j]!r}): tag {tag!r} is "
                                     f"not in the label list {labels}")
                ids.append(label_id[tag])
        base = len(windows)
        for start in range(0, max(1, len(words)), max_words):
            windows.append(list(words[start:start + max_words]))
            window_labels.append(ids[start:start + max_words])
        positions = np.arange(len(words), dtype=np.int64)
        word_window.append(base + positions // max_words)
        word_position.append(positions % max_words)
    count = len(windows)
    label_arr = np.full((count, max_words), IGNORE, np.int32)
    mask = np.zeros((count, max_words), np.int32)
    for i, (words, ids) in enumerate(zip(windows, window_labels)):
        mask[i, :len(words)] = 1
        label_arr[i, :len(ids)] = ids
    return WordWindows(windows, label_arr, mask, word_window, word_position)
