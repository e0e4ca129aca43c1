"""A generated translation task that a small encoder-decoder learns on a CPU in minutes:
English-like sentences ("the red cat sees the old dog") and their translation into a
made-up language by a lexicon and one word-order rule (the adjective after its noun,
as in French: "der katze rot sieht der hund alt"). Copying the source scores a BLEU
near 0 (no word is shared but none), so what a model scores above that it learned:
the words and the reordering. Used by the tests and the command's embedded default."""

from __future__ import annotations

import json
import os

import numpy as np

NOUNS = {"cat": "katze", "dog": "hund", "bird": "vogel", "fish": "fisch", "horse": "pferd",
         "cow": "kuh"}
ADJECTIVES = {"red": "rot", "big": "gross", "small": "klein", "old": "alt", "blue": "blau",
              "green": "gruen"}
VERBS = {"sees": "sieht", "likes": "mag", "eats": "frisst", "finds": "findet"}
ARTICLE = ("the", "der")


def translation_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """`n` (source, target) sentences: "the ADJ NOUN VERB the ADJ NOUN" and its
    translation, the adjective after its noun; seeded."""
    rng = np.random.default_rng(seed)
    nouns, adjectives, verbs = (sorted(d) for d in (NOUNS, ADJECTIVES, VERBS))
    pairs = []
    for _ in range(n):
        a1, n1, v, a2, n2 = (words[rng.integers(len(words))] for words in (
            adjectives, nouns, verbs, adjectives, nouns))
        source = f"{ARTICLE[0]} {a1} {n1} {v} {ARTICLE[0]} {a2} {n2}"
        target = (f"{ARTICLE[1]} {NOUNS[n1]} {ADJECTIVES[a1]} {VERBS[v]} {ARTICLE[1]} "
                  f"{NOUNS[n2]} {ADJECTIVES[a2]}")
        pairs.append((source, target))
    return pairs


def write_translation_files(folder: str, sizes: dict, seed: int = 0) -> dict:
    """{split: path} of JSON Lines files in run_translation.py's layout
    ({"translation": {"en": ..., "xx": ...}}), `sizes` = {"train": 600, ...}; each
    split drawn with its own seed."""
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for i, (split, n) in enumerate(sizes.items()):
        paths[split] = path = os.path.join(folder, f"{split}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for source, target in translation_pairs(n, seed + 1000 * i):
                f.write(json.dumps({"translation": {"en": source, "xx": target}}) + "\n")
    return paths


def corpus() -> list[str]:
    """Every word of both languages in sentences, for a tokenizer trained on them."""
    return [s for pair in translation_pairs(400, seed=12345) for s in pair]
