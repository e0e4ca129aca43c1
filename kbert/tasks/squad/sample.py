"""A deterministic SQuAD-format sample, written for kbert (no external data).

Articles about invented people and places, each paragraph long enough to need
several windows at small sequence lengths; names and places carry accents, CJK and
odd whitespace, so the pipeline is exercised on what real data holds. Questions ask
for a person's city, year, instrument or teacher; v2.0 samples add unanswerable
questions about people the paragraph does not mention.
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
_FILLER = [
    "The region is known for its long winters and crowded autumn markets.",
    "Local newspapers printed several reviews of the early concerts.",
    "Many visitors arrived by train, since the old road was often closed.",
    "Archives from that period were partly lost in a fire.",
    "Historians still disagree about the exact order of these events.",
    "The conservatory later moved to a larger building near the river.",
]
_SPACES = [" ", " ", " ", "\u00a0", "  ", "\u3000", "\t"]


def _person(rng):
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def make_sample(num_paragraphs: int = 60, seed: int = 0, version_2: bool = False) -> dict:
    """SQuAD JSON (v1.1 layout, or v2.0 with `is_impossible`) with 4-6 questions per
    paragraph. Deterministic for a given seed."""
    rng = random.Random(seed)
    articles = []
    qid = 0
    for p in range(num_paragraphs):
        people = []
        while len(people) < 3:
            name = _person(rng)
            if name not in [x["name"] for x in people]:
                people.append({"name": name, "city": rng.choice(_CITIES),
                               "year": str(rng.randint(1801, 1999)),
                               "instrument": rng.choice(_INSTRUMENTS)})
        for i, person in enumerate(people):
            person["teacher"] = people[(i + 1) % 3]["name"]
        context, facts = "", []
        for person in people:
            sentences = [
                ("city", f"{person['name']} was born in {{}} in {person['year']}.",
                 person["city"]),
                ("instrument", f"As a child, {person['name']} learned the {{}} at home.",
                 person["instrument"]),
                ("teacher", f"Later, {person['name']} studied with {{}} for several years.",
                 person["teacher"]),
            ]
            for kind, template, value in sentences:
                for _ in range(rng.randint(0, 2)):
                    context += rng.choice(_FILLER) + rng.choice(_SPACES)
                before, after = template.split("{}")
                start = len(context) + len(before)
                context += before + value + after + rng.choice(_SPACES)
                facts.append((kind, person, value, start))
        context = context.rstrip()
        questions = {
            "city": "In which city was {} born?",
            "instrument": "Which instrument did {} learn as a child?",
            "teacher": "With whom did {} study?",
        }
        qas = []
        for kind, person, value, start in rng.sample(facts, rng.randint(4, 6)):
            assert context[start:start + len(value)] == value
            qa = {"id": f"kb{qid:05d}", "question": questions[kind].format(person["name"]),
                  "answers": [{"text": value, "answer_start": start}]}
            if version_2:
                qa["is_impossible"] = False
            qas.append(qa)
            qid += 1
        if version_2:
            for _ in range(2):
                stranger = _person(rng)
                if stranger in [x["name"] for x in people]:
                    continue
                kind = rng.choice(list(questions))
                qas.append({"id": f"kb{qid:05d}", "question": questions[kind].format(stranger),
                            "answers": [], "is_impossible": True})
                qid += 1
        articles.append({"title": f"Musicians {p}",
                         "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "v2.0" if version_2 else "1.1", "data": articles}
