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


def gpt1_word_tokenizer(words) -> "kbert.tokenizers.GPT1Tokenizer":
    """GPT-1's BPE (lower case, `</w>` word ends) with merges that make each given word
    one token, `word</w>`; single letters as symbols, `<unk>` for the others."""
    from kbert.tokenizers import GPT1Tokenizer

    vocab = {"<unk>": 0}
    for c in sorted({c for w in words for c in w}):
        vocab.setdefault(c, len(vocab))
        vocab.setdefault(c + "</w>", len(vocab))
    merges = []
    for word in words:  # each word's letters, left to right, the last one word-final
        for i in range(1, len(word)):
            right = word[i] + ("</w>" if i == len(word) - 1 else "")
            if (word[:i], right) not in merges:
                merges.append((word[:i], right))
                vocab.setdefault(word[:i] + right, len(vocab))
    return GPT1Tokenizer(vocab, merges)


def bart_word_tokenizer(words) -> "kbert.BartTokenizer":
    """`word_tokenizer`'s BPE with fairseq's special ids (<s> 0, <pad> 1, </s> 2, <unk> 3,
    <mask> last), as BART's and RoBERTa's vocab.json have them."""
    from kbert.tokenizers.bart import BartTokenizer

    plain = word_tokenizer(words)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for token, _ in sorted(plain.vocabulary.items(), key=lambda kv: kv[1]):
        if token != END_TOKEN:
            vocab.setdefault(token, len(vocab))
    vocab["<mask>"] = len(vocab)
    return BartTokenizer(vocab, plain.merges)
