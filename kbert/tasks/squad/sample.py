"""A deterministic SQuAD-format sample, written for kbert (no external data).

Each paragraph is a short biography of an invented musician: where and when they were
born, which instrument they learned, who taught them, with several phrasings per
fact, between distractor sentences that hold cities, years, instruments and names in
other roles (a festival's city, a museum's harp, a critic's name). Answering means
reading the relation, not spotting a word type. Names and places carry accents, CJK
and odd whitespace, and paragraphs are long enough to need several windows at short
sequence lengths. v2.0 samples add unanswerable questions: ones that ask for a fact
the paragraph does not state.
"""

from __future__ import annotations

import random

_FIRST = ["Amélie", "José", "Zoë", "Søren", "Łukasz", "Hiroshi", "Ngozi", "Ahmed", "Inès",
          "Mateo", "Chloé", "Björn", "Yasmin", "Dmitri", "Aiko", "Kwame"]
_LAST = ["Dubois", "García", "Müller", "Nørgaard", "Wójcik", "Tanaka", "Okafor", "Haddad",
         "Lefèvre", "Rossi", "Moreau", "Lindqvist", "Farouk", "Ivanov", "Sato", "Mensah"]
_CITIES = ["São Paulo", "Zürich", "Kraków", "Reykjavík", "Málaga", "北京", "東京", "Québec",
           "Düsseldorf", "Besançon", "İzmir", "Ålesund"]
_INSTRUMENTS = ["violin", "cello", "piano", "oboe", "harp", "clarinet", "guitar", "flute"]
_SPACES = [" ", " ", " ", "\u00a0", "  ", "\u3000", "\t"]

# Fact sentences: {n} is the musician, {v} the answer.
_FACTS = {
    "city": ["{n} was born in {v}.", "Born in {v}, {n} grew up near the harbour.",
             "The birthplace of {n} was {v}."],
    "year": ["{n} came into the world in {v}.", "The year of birth of {n} was {v}.",
             "{n} was born in {v}, a year of heavy snow."],
    "instrument": ["As a child, {n} learned the {v}.", "{n} first played the {v} at home.",
                   "The first instrument of {n} was the {v}."],
    "teacher": ["{n} later studied with {v}.", "For years, {v} taught {n}.",
                "The teacher of {n} was {v}."],
}
_QUESTIONS = {
    "city": ["In which city was {n} born?", "Where was {n} born?"],
    "year": ["In which year was {n} born?", "When was {n} born?"],
    "instrument": ["Which instrument did {n} learn first?", "What did {n} first play?"],
    "teacher": ["Who taught {n}?", "With whom did {n} study?"],
}
# Distractors: the same kinds of words in other roles.
_DISTRACTORS = [
    "A festival in {city} invited young players in {year}.",
    "The museum of {city} keeps an old {instrument}.",
    "Critics compared the style to that of {person}.",
    "In {year}, the conservatory bought a new {instrument}.",
    "{person} opened a music shop in {city}.",
    "Local newspapers printed several reviews of the early concerts.",
    "Historians still disagree about the exact order of these events.",
]


def _person(rng):
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def make_sample(num_paragraphs: int = 60, seed: int = 0, version_2: bool = False) -> dict:
    """SQuAD JSON (v1.1 layout, or v2.0 with `is_impossible`), deterministic per seed."""
    rng = random.Random(seed)
    articles, qid = [], 0
    for p in range(num_paragraphs):
        name = _person(rng)
        values = {"city": rng.choice(_CITIES), "year": str(rng.randint(1801, 1999)),
                  "instrument": rng.choice(_INSTRUMENTS), "teacher": _person(rng)}
        while values["teacher"] == name:
            values["teacher"] = _person(rng)
        kinds = list(_FACTS)
        stated = rng.sample(kinds, 3 if version_2 else 4)
        context, facts = "", []

        def distract():
            nonlocal context
            for _ in range(rng.randint(1, 3)):
                context += rng.choice(_DISTRACTORS).format(
                    city=rng.choice(_CITIES), year=rng.randint(1801, 1999),
                    instrument=rng.choice(_INSTRUMENTS), person=_person(rng))
                context += rng.choice(_SPACES)

        for kind in stated:
            distract()
            before, after = rng.choice(_FACTS[kind]).format(n=name, v="\0").split("\0")
            facts.append((kind, values[kind], len(context) + len(before)))
            context += before + values[kind] + after + rng.choice(_SPACES)
        distract()
        context = context.rstrip()
        qas = []
        for kind, value, start in facts:
            assert context[start:start + len(value)] == value
            qa = {"id": f"kb{qid:05d}",
                  "question": rng.choice(_QUESTIONS[kind]).format(n=name),
                  "answers": [{"text": value, "answer_start": start}]}
            if version_2:
                qa["is_impossible"] = False
            qas.append(qa)
            qid += 1
        if version_2:
            for kind in kinds:
                if kind not in stated:
                    qas.append({"id": f"kb{qid:05d}",
                                "question": rng.choice(_QUESTIONS[kind]).format(n=name),
                                "answers": [], "is_impossible": True})
                    qid += 1
        articles.append({"title": f"Musician {p}",
                         "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "v2.0" if version_2 else "1.1", "data": articles}
