"""One SavedModel of several task heads over one encoder (`kbert.export.heads`): each
head's signature answers exactly as that head's own export, in a fresh process and
through TF Serving's C++ loader, and the encoder's variables are saved once."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.export.check import signatures
from kbert.export.folder import export_from_folder, save_task_folder
from kbert.export.heads import export_heads, parse_heads
from tests.conftest import TINY_VOCAB

TEXTS = ["hello world !", "the cat sat on the mat .", "北京 unwanted running", ""]
NER_LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def _variables(export_dir):
    reader = tf.train.load_checkpoint(str(export_dir / "variables" / "variables"))
    return {k: v for k, v in reader.get_variable_to_shape_map().items()
            if not k.startswith("_CHECKPOINTABLE")}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A classifier and a NER folder whose heads sit on one (untrained) tiny BERT."""
    import keras

    from kbert.tasks.glue.model import build_classifier
    from kbert.tasks.ner.model import build_model

    keras.utils.set_random_seed(1)
    tokenizer = kbert.BertTokenizer(TINY_VOCAB)
    encoder = kbert.BertEncoder(kbert.BertConfig.preset("tiny", vocab_size=len(TINY_VOCAB)))
    base = tmp_path_factory.mktemp("heads")
    save_task_folder(str(base / "sst"), build_classifier(encoder, 2), tokenizer, "classifier",
                     labels=["negative", "positive"], pair=False, seq_length=16,
                     regression=False)
    save_task_folder(str(base / "ner"), build_model(encoder, NER_LABELS), tokenizer, "ner",
                     labels=NER_LABELS, seq_length=16)
    return base, len(encoder.variables)  # its weights and its dropouts' seed states


@pytest.mark.e2e
@pytest.mark.subprocess
def test_each_head_answers_as_its_own_export_with_one_encoder(folders, tmp_path, capsys,
                                                             monkeypatch):
    from kbert.export.__main__ import main

    from kbert.export.check import keep_served, served_results

    base, encoder_variables = folders
    want = {}
    for single, kind in (("sst", "classifier"), ("ner", "ner")):
        with keep_served(also=[{"text": TEXTS}]):  # answered in the exporter's C++ load
            export_from_folder(str(base / single), kind, str(tmp_path / single / "1"))
            want[single] = served_results(str(tmp_path / single / "1"), [{"text": TEXTS}])[0]
    from tests.conftest import spy_processes

    started = spy_processes(monkeypatch)
    capsys.readouterr()
    heads = ["sentiment", "entities", "serving_default"]
    with keep_served(also=[(name, {"text": TEXTS}) for name in heads]):
        assert main(["--heads", f"sentiment={base / 'sst'}", f"entities={base / 'ner'}",
                     "--export_dir", str(tmp_path / "text" / "1")]) == 0
        got = served_results(str(tmp_path / "text" / "1"), [{"text": TEXTS}] * 3, heads)
    monkeypatch.undo()
    multi = tmp_path / "text" / "1"
    # Every signature of each head warmed: 6 + classify + token_ids, 6 + token_ids.
    assert "OK: 15 warmup requests answered" in capsys.readouterr().out
    # Both signatures' warmup requests after one load by TF Serving's C++ loader (before
    # the export is moved into place) and one by tf.saved_model.load; the check after
    # the export compares the two, without loading it in the C++ loader again.
    assert sorted(started) == ["c_loader", "python"], started
    assert set(signatures(str(multi))) == {
        "serving_default", "sentiment", "sentiment_classify", "sentiment_token_ids",
        "entities", "entities_token_ids"}
    # Each signature of the multi-head export after one load by the C++ loader (the
    # exporter's, before the export was moved into place); each single export's. (The
    # check above ran both loaders, with nothing of kbert, Keras or torch imported.)
    assert got[0] == want["sst"]
    assert got[1] == want["ner"]
    assert got[2] == want["sst"]  # serving_default: the first head
    # `export check`'s batching sweep runs the first head's warmup requests.
    from kbert.export.batching import tune

    tune(str(multi), str(tmp_path / "batching.txt"))
    assert "max_batch_size { value: " in (tmp_path / "batching.txt").read_text()
    # The encoder's variables once: the heads' exports less one encoder.
    sst, ner, both = (_variables(tmp_path / "sst" / "1"), _variables(tmp_path / "ner" / "1"),
                      _variables(multi))
    assert len(both) == len(sst) + len(ner) - encoder_variables
    assert sum(np.prod(s) for s in both.values()) < sum(
        np.prod(s) for s in sst.values()) + sum(np.prod(s) for s in ner.values()) * 0.5


def test_a_head_over_another_encoder_is_refused(folders, tmp_path):
    from kbert.export.folder import load_task_folder
    from kbert.models.interface import find_encoder

    base, _ = folders
    _, model, tokenizer, settings = load_task_folder(str(base / "ner"))
    weight = find_encoder(model).weights[3]
    weight.assign(weight.numpy() + 0.01)
    save_task_folder(str(tmp_path / "other"), model, tokenizer, "ner", **settings)
    with pytest.raises(ValueError, match=r"--heads other=\S+: encoder variable \S+ differs "
                                         r"from sentiment=\S+'s; heads share one encoder"):
        export_heads({"sentiment": str(base / "sst"), "other": str(tmp_path / "other")},
                     str(tmp_path / "x" / "1"))
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("values, message", [
    (["a=x"], "give two or more NAME=FOLDER"),
    (["a=x", "a=y"], "the name 'a' is given twice"),
    (["a=x", "serving_default=y"], "must be a signature name"),
    (["a=x", "1b=y"], "must be a signature name"),
    (["a=x", "b"], "expected NAME=FOLDER"),
])
def test_heads_flag_errors(values, message):
    with pytest.raises(ValueError, match=message):
        parse_heads(values)
