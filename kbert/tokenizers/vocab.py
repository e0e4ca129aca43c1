"""Building a WordPiece vocabulary from a text corpus."""

from __future__ import annotations

import collections
import os
from typing import Iterable

import tensorflow as tf

from kbert.io import atomic_file
from kbert.tokenizers.bert import SPECIAL_TOKENS


def build_vocab(texts: Iterable[str], vocab_size: int, lowercase: bool = True,
                strip_accents: bool | None = None, min_count: int = 2,
                reserved_tokens: Iterable[str] = SPECIAL_TOKENS, batch_size: int = 1024,
                output_file: str | os.PathLike | None = None) -> list[str]:
    """Learns a WordPiece vocabulary with BERT's pre-tokenization.

    Words are counted after the same normalization and splitting `BertTokenizer`
    applies, then tensorflow-text's WordPiece learner (the bottom-up algorithm of
    Wu et al., 2016, as used for BERT's vocabularies) picks the pieces.

    Args:
        texts: an iterable of strings (a corpus).
        vocab_size: target size, reserved tokens included (the learner may return
            slightly fewer or more).
        lowercase, strip_accents: as for `BertTokenizer`.
        min_count: words seen fewer times are not used to learn pieces.
        reserved_tokens: tokens placed first, in order ([PAD] gets id 0).
        output_file: if given, the vocabulary is written there as `vocab.txt`.

    Returns:
        The vocabulary, a list of tokens; the line number of each is its id.
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    from kbert.tokenizers.bert import BertTokenizer

    reserved = list(reserved_tokens)
    # A stand-in vocabulary: only the pre-tokenizer of BertTokenizer is used.
    splitter = BertTokenizer(reserved, lowercase=lowercase, strip_accents=strip_accents)
    counts: collections.Counter = collections.Counter()

    def flush(batch):
        words, _, _ = splitter.split_words(tf.constant(batch, tf.string))
        counts.update(w.decode("utf-8") for w in words.flat_values.numpy())

    batch = []
    for text in texts:
        batch.append(text)
        if len(batch) == batch_size:
            flush(batch)
            batch = []
    if batch:
        flush(batch)
    if not counts:
        raise ValueError("build_vocab: the corpus has no words")
    vocab = learner.learn(sorted(counts.items()), vocab_size, reserved,
                          lower_thresh=min_count, upper_thresh=max(counts.values()) + 1)
    if output_file is not None:
        with atomic_file(output_file) as f:
            f.write("".join(t + "\n" for t in vocab))
    return vocab

