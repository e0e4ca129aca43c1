"""CoNLL-2003 files written as distributed (IOB1 tags, -DOCSTART-, 4 columns) from
templates: people, places and organizations in varied sentences."""

from __future__ import annotations

import os
import random

FIRST = ["John", "Mary", "Ahmed", "Chen", "Olga", "Pierre", "Sofia", "Kenji", "Amara", "Lars",
         "Ana", "Dmitri", "Fatima", "Hugo", "Ingrid", "José"]
LAST = ["Smith", "García", "Okafor", "Wang", "Ivanova", "Dubois", "Rossi", "Tanaka", "Berg",
        "Müller", "Kowalski", "Haddad"]
PLACES = [["Paris"], ["New", "York"], ["Tokyo"], ["Lagos"], ["São", "Paulo"], ["Berlin"],
          ["Cairo"], ["Lima"], ["Oslo"], ["Hong", "Kong"], ["Zürich"], ["Delhi"]]
ORGS = [["Reuters"], ["United", "Nations"], ["Acme", "Corp"], ["Red", "Cross"], ["FIFA"],
        ["Bank", "of", "Japan"], ["Siemens"], ["World", "Bank"]]
TEMPLATES = [
    "{PER} flew to {LOC} on Monday .",
    "{ORG} said {PER} will visit {LOC} .",
    "In {LOC} , {PER} met officials from {ORG} .",
    "Shares of {ORG} rose 3 percent in {LOC} trading .",
    "{PER} , a spokesman for {ORG} , declined to comment .",
    "The match between {LOC} and {LOC} ended 2-1 .",
    "{PER} and {PER} arrived late .",
    "It rained all day , officials said .",
]


def _person(rng):
    return [rng.choice(FIRST), rng.choice(LAST)] if rng.random() < 0.7 else [rng.choice(LAST)]


def make_sentences(n: int, seed: int = 0):
    """[(words, BIO2 tags)]."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words, tags = [], []
        for token in rng.choice(TEMPLATES).split():
            if token.startswith("{"):
                kind = token[1:4]
                entity = {"PER": lambda: _person(rng), "LOC": lambda: rng.choice(PLACES),
                          "ORG": lambda: rng.choice(ORGS)}[kind]()
                words += entity
                tags += [f"B-{kind}"] + [f"I-{kind}"] * (len(entity) - 1)
            else:
                words.append(token)
                tags.append("O")
        out.append((words, tags))
    return out


def to_iob1(tags):
    """BIO2 -> IOB1: B-X only where it follows a chunk of the same type."""
    out = []
    for i, tag in enumerate(tags):
        if tag.startswith("B-") and not (i and tags[i - 1][2:] == tag[2:]
                                         and tags[i - 1] != "O"):
            tag = "I-" + tag[2:]
        out.append(tag)
    return out


def write_conll(path: str, sentences, per_doc: int = 5) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for i, (words, tags) in enumerate(sentences):
            if i % per_doc == 0:
                f.write("-DOCSTART- -X- -X- O\n\n")
            for word, tag in zip(words, to_iob1(tags)):
                f.write(f"{word} NNP I-NP {tag}\n")
            f.write("\n")
    return path
