"""`make demo-pretrain`: the bundled corpus (the SQuAD sample's domain, none of its
questions) and, as a slow test, the whole demo: SQuAD fine-tuned from the pretrained BERT
scores at least 10 EM points above the same budget from scratch."""

from __future__ import annotations

import json

import pytest

from kbert.tasks.pretrain import demo
from kbert.tasks.pretrain.corpus import write_corpus


def test_corpus_is_the_sample_domain_without_its_questions(tmp_path):
    write_corpus(str(tmp_path / "corpus.txt"), 20)  # the bundled corpus's seed
    demo.write_squad(str(tmp_path / "train.json"), 20, seed=2000)
    lines = (tmp_path / "corpus.txt").read_text(encoding="utf-8").split("\n")
    assert lines.count("") >= 20  # a blank line after every paragraph
    assert any(" was born in " in l or "birthplace" in l for l in lines)
    squad = json.loads((tmp_path / "train.json").read_text(encoding="utf-8"))
    questions = {qa["question"] for a in squad["data"] for p in a["paragraphs"]
                 for qa in p["qas"]}
    contexts = {p["context"] for a in squad["data"] for p in a["paragraphs"]}
    text = "\n".join(lines)
    assert not any(q in text for q in questions)
    assert not any(c in text for c in contexts)


@pytest.mark.slow
def test_pretrained_start_beats_scratch_by_ten_em_points(tmp_path):
    scores = demo.run(str(tmp_path))
    pretrained, scratch = scores["pretrained"], scores["scratch"]
    assert pretrained["exact_match"] >= scratch["exact_match"] + 10, scores
