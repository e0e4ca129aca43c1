"""Hostile requests to every kind of export (#49), through TF Serving's own loader
(`run_c_loader`: TensorFlow's C++ SavedModel loader, no TensorFlow Python), each process
watched for its resident memory and time: no request may exhaust the server's memory,
hang it, or be answered with silently wrong or lost text.

Tiny models, one export per kind (SQuAD v2.0, NER, a classifier, ELMo, embeddings,
fill-mask; `generate` exports get tests/generate_requests.py's, in the family files that
write them), built once for the file. The requests that measure no memory run in the
exporter's own C++-loader process (`KEPT`); the memory measures each start their own.
"""

from __future__ import annotations

import json
import os

import keras
import pytest
import tensorflow as tf

import kbert
from kbert import BertConfig, BertEncoder, BertTokenizer, build_vocab
from kbert.export import export_classifier, export_embeddings, export_squad
from kbert.export.check import ServingLoaderError, run_c_loader
from kbert.export.elmo_graph import export_elmo
from kbert.export.fill_mask_graph import export_fill_mask
from kbert.export.guards import LIMITS_FILE
from kbert.export.ner_graph import export_ner

pytestmark = pytest.mark.subprocess

GIB = 2 ** 30
WORDS = ["the", "museum", "in", "zürich", "opened", "where", "is", "a", "北京", "🙂", "cat"]
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _tokenizer():
    return BertTokenizer(build_vocab(WORDS * 3 + ["the museum opened in 1898 ."],
                                     vocab_size=200, min_count=1), seq_length=32)


def _encoder(tokenizer):
    return BertEncoder(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16,
                                  num_layers=1, num_heads=2, intermediate_size=24,
                                  max_position_embeddings=64))


def _rank_requests(text):
    return [{text: []}, {text: [["a", "b"]]}, {text: "a"}, {text: ["the cat"]}]


SQUAD_MALFORMED = [
    {"question": [], "context": []},
    {"token_ids": [[2, 5, -1]], "padding_mask": [[1, 1, 1]], "segment_ids": [[0, 0, 0]]},
    {"token_ids": [[2, 5, 10 ** 6]], "padding_mask": [[1, 1, 1]], "segment_ids": [[0, 0, 0]]},
    {"token_ids": [[2, 5, 3]], "padding_mask": [[1, 1]], "segment_ids": [[0, 0, 0]]},
    {"token_ids": [[2, 5, 3]], "padding_mask": [[1, 1, 1]], "segment_ids": [[0, 0, 0]]}]
SQUAD_MALFORMED_SIGNATURES = ["serving_default"] + ["token_ids"] * 4
# The requests the tests below send that need no process of their own (not a memory
# measure): the exporter runs them in its own C++-loader load after the warmup
# requests (`keep_served(also=...)`), each answered or refused on its own.
KEPT = {kind: (["serving_default"] * 4, _rank_requests("text"))
        for kind in ("classifier", "ner", "elmo", "embeddings", "fill_mask")}
KEPT["squad"] = (SQUAD_MALFORMED_SIGNATURES, SQUAD_MALFORMED)


class _Exports(dict):
    """{kind: export dir}, with `served`: {kind: answers}."""

    served: dict


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{kind: export dir}; `exports.served[kind]`: the exporter's own load's answers to
    KEPT[kind]."""
    from kbert.tasks import squad
    from tests.conftest import export_answering
    from kbert.tasks.glue import build_classifier
    from kbert.tasks.ner.model import build_model as build_ner

    root = tmp_path_factory.mktemp("hostile")
    tok = _tokenizer()
    keras.utils.set_random_seed(1)
    out, served = _Exports(), {}

    def export(kind, write):
        out[kind], answers = export_answering(lambda: write(str(root / kind / "1")),
                                              {kind: KEPT[kind]})
        served[kind] = answers[kind]

    export("squad", lambda path: export_squad(
        squad.build_model(_encoder(tok)), tok, path, max_seq_length=64, doc_stride=32,
        max_query_length=16, n_best_size=5, max_answer_length=10,
        version_2_with_negative=True))
    export("ner", lambda path: export_ner(build_ner(_encoder(tok), LABELS), tok, path, LABELS,
                                          seq_length=32))
    export("classifier", lambda path: export_classifier(
        build_classifier(_encoder(tok), 2), tok, path, ["neg", "pos"], seq_length=32))
    elmo = kbert.ELMo(kbert.ELMoConfig.preset("tiny"))
    export("elmo", lambda path: export_elmo(elmo, kbert.ELMoCharTokenizer(
        elmo.config.max_characters_per_token), path))
    export("embeddings", lambda path: export_embeddings(_encoder(tok), tok, path,
                                                        seq_length=32))
    pretrainer = kbert.BertPretrainer(_encoder(tok))
    pretrainer({"token_ids": tf.zeros([1, 4], tf.int32),
                "segment_ids": tf.zeros([1, 4], tf.int32),
                "padding_mask": tf.ones([1, 4], tf.int32),
                "masked_lm_positions": tf.zeros([1, 1], tf.int32)})
    export("fill_mask", lambda path: export_fill_mask(pretrainer, tok, path, seq_length=32))
    out.served = served
    return out


def _words(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def test_a_100_kb_squad_context_is_answered_in_linear_memory(exports):
    context = ("the museum opened in 1898 . " * 4000)[:100_000]
    report = run_c_loader(exports["squad"], [{"question": ["where is the museum ?"],
                                              "context": [context]}],
                          max_rss=2 * GIB, timeout=300)
    answer = report["results"][0]
    start, end = answer["start_char"]["value"][0], answer["end_char"]["value"][0]
    assert answer["answer"]["value"][0] == (context[start:end] if start >= 0 else "")
    assert report["peak_rss"][0] - report["loaded_rss"] < GIB


def test_a_40_kb_ner_text_is_answered_in_linear_memory(exports):
    text = ("a " * 20_000)[:40_000]
    report = run_c_loader(exports["ner"], [{"text": [text]}], max_rss=2 * GIB, timeout=300)
    out = report["results"][0]
    n = out["num_entities"]["value"][0]
    for k in range(n):
        s, e = out["start_char"]["value"][k], out["end_char"]["value"][k]
        assert out["entity_text"]["value"][k] == text[s:e]
    assert report["peak_rss"][0] - report["loaded_rss"] < GIB


def test_a_request_over_the_declared_limit_is_refused_in_one_line(exports):
    with open(os.path.join(exports["elmo"], "assets.extra", LIMITS_FILE)) as f:
        limit = json.load(f)["max_request_bytes"]
    assert limit == 65536
    report = run_c_loader(exports["elmo"], [{"text": [_words(40_000)]}], each=True,
                          max_rss=2 * GIB, timeout=300)
    error = report["results"][0]["error"]
    assert "text: the request text" in error and "at most 65536 bytes" in error
    assert "\n" not in error
    with open(os.path.join(exports["squad"], "assets.extra", LIMITS_FILE)) as f:
        assert json.load(f) == {"max_request_bytes": 1 << 20}
    report = run_c_loader(exports["squad"], [{"question": ["q"], "context": ["a " * 600_000]}],
                          each=True, max_rss=2 * GIB, timeout=300)
    assert "question, context: the request text" in report["results"][0]["error"]


@pytest.mark.parametrize("kind, text", [("classifier", "text"), ("ner", "text"),
                                        ("elmo", "text"), ("embeddings", "text"),
                                        ("fill_mask", "text")])
def test_empty_batches_get_empty_outputs_and_wrong_ranks_one_line(exports, kind, text):
    assert KEPT[kind][1] == _rank_requests(text)
    empty, rank2, rank0, fine = exports.served[kind]
    assert empty and all(v["shape"][0] == 0 for v in empty.values()), empty
    assert f"{text}: must have rank 1 ([batch]); got rank" in rank2["error"]
    assert f"{text}: must have rank 1 ([batch]); got rank" in rank0["error"]
    assert "error" not in fine


def test_squad_empty_batch_and_malformed_token_ids(exports):
    empty, negative, large, short_mask, fine = exports.served["squad"]
    assert empty["answer"]["shape"] == [0] and empty["has_answer"]["shape"] == [0]
    assert "token_ids: each id must be in [0," in negative["error"]
    assert "token_ids: each id must be in [0," in large["error"]
    assert "padding_mask: must have the shape of token_ids" in short_mask["error"]
    assert "error" not in fine


def test_peak_memory_grows_linearly_with_the_text(exports):
    """Peak resident memory over the loaded size at growing sizes: each step's growth per
    byte within 3x of the others' (a quadratic cost would multiply it by the size
    ratio, 2 per step)."""
    sizes = [20_000, 40_000, 80_000]
    growth = []
    for n in sizes:
        context = ("the museum opened in 1898 . " * 4000)[:n]
        report = run_c_loader(exports["squad"], [{"question": ["where ?"],
                                                  "context": [context]}],
                              max_rss=2 * GIB, timeout=300)
        growth.append(report["peak_rss"][0] - report["loaded_rss"])
    per_byte = [(growth[i + 1] - growth[i]) / (sizes[i + 1] - sizes[i])
                for i in range(len(sizes) - 1)]
    assert max(per_byte) < 3 * max(min(per_byte), 1.0), (growth, per_byte)
    assert growth[-1] < 0.5 * GIB, growth
