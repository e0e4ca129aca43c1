"""Small GPT-2-style tokenizers for tests that train: GPT-2's byte-level BPE (the 256
byte symbols) with merges that make each given word, with or without its leading
space, one token."""

from __future__ import annotations

import kbert
from kbert.tokenizers.gpt import END_TOKEN, bytes_to_unicode


def word_tokenizer(words) -> "kbert.GPTTokenizer":
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    merges = []

    def add(a, b):
        if (a, b) not in merges:
            merges.append((a, b))
            vocab.setdefault(a + b, len(vocab))

    for word in words:  # each word's letters, left to right ...
        for i in range(1, len(word)):
            add(word[:i], word[i])
    for word in words:  # ... then the space before it
        add("\u0120", word)
    vocab[END_TOKEN] = len(vocab)
    return kbert.GPTTokenizer(vocab, merges)
