"""TensorFlow Datasets as the tasks' data source (`--tfds`), offline.

TFDS's own mock (`tfds.testing.mock_data`) serves consistent examples in each dataset's
real feature spec (`as_dataset_fn`; its default fills each feature on its own). The
examples read through TFDS equal those the file readers give for the same content,
and each command runs end to end on them and writes its official metrics. Without a
network and a prepared copy, a command fails with one line and leaves TFDS's data
directory as it was."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from glue_fixtures import write_task
from kbert.tasks import glue, ner, squad
from kbert.tasks.squad.sample import make_sample
from ner_fixtures import make_sentences, write_conll

CONLL_NAMES = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC",
               "I-MISC"]  # TFDS conll2003's `ner` ClassLabel names, in its order


def _dataset(rows: list[dict], signature: dict) -> tf.data.Dataset:
    return tf.data.Dataset.from_generator(lambda: iter(rows), output_signature=signature)


def _glue_rows(task: str, split: str) -> list[dict]:
    """The rows that `write_task(..., bom=False)` writes for `split`, as TFDS gives them."""
    spec = glue.get_task(task)
    examples = glue.load_dataset(task, split, _glue_rows.folder[task])
    rows = []
    for i, e in enumerate(examples):
        row = {"idx": np.int32(i), "label": np.int64(-1 if e.label is None else
                                                    spec.tfds_labels.index(e.label))}
        if spec.is_pair:
            row.update(sentence1=e.text_a, sentence2=e.text_b)
        else:
            row["sentence"] = e.text_a
        rows.append(row)
    return rows


def _glue_signature(task: str) -> dict:
    text = tf.TensorSpec([], tf.string)
    sig = {"idx": tf.TensorSpec([], tf.int32), "label": tf.TensorSpec([], tf.int64)}
    if glue.get_task(task).is_pair:
        return {**sig, "sentence1": text, "sentence2": text}
    return {**sig, "sentence": text}


def _conll_rows(sentences) -> list[dict]:
    return [{"tokens": words, "pos": [0] * len(words), "chunks": [0] * len(words),
             "ner": [CONLL_NAMES.index(t) for t in tags]} for words, tags in sentences]


CONLL_SIGNATURE = {"tokens": tf.TensorSpec([None], tf.string),
                   "pos": tf.TensorSpec([None], tf.int64),
                   "chunks": tf.TensorSpec([None], tf.int64),
                   "ner": tf.TensorSpec([None], tf.int64)}


def _squad_rows(data: dict) -> list[dict]:
    return [{"id": qa["id"], "title": article["title"], "context": p["context"],
             "question": qa["question"],
             "answers": {"text": [a["text"] for a in qa["answers"]],
                         "answer_start": [a["answer_start"] for a in qa["answers"]]}}
            for article in data["data"] for p in article["paragraphs"] for qa in p["qas"]]


SQUAD_SIGNATURE = {"id": tf.TensorSpec([], tf.string), "title": tf.TensorSpec([], tf.string),
                   "context": tf.TensorSpec([], tf.string),
                   "question": tf.TensorSpec([], tf.string),
                   "answers": {"text": tf.TensorSpec([None], tf.string),
                               "answer_start": tf.TensorSpec([None], tf.int32)}}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """Files in the original layouts, and the same content as TFDS serves it, by
    (dataset name, split)."""
    root = tmp_path_factory.mktemp("tfds-sources")
    _glue_rows.folder = {t: write_task(str(root / "glue"), t, {"train.tsv": 40,
                                                                "dev.tsv": 12, "test.tsv": 5},
                                        bom=False) for t in ("sst2", "mrpc")}
    served = {}
    for task in ("sst2", "mrpc"):
        for split, tfds_split in (("train", "train"), ("dev", "validation"),
                                  ("test", "test")):
            served[(f"glue/{task}", tfds_split)] = (_glue_rows(task, split),
                                                     _glue_signature(task))
    conll = {"train": make_sentences(300, seed=0), "validation": make_sentences(60, seed=1),
             "test": make_sentences(60, seed=2)}
    files = {split: write_conll(str(root / f"conll.{split}"), s) for split, s in conll.items()}
    for split, sentences in conll.items():
        served[("conll2003", split)] = (_conll_rows(sentences), CONLL_SIGNATURE)
    data = make_sample(40, seed=7)
    train = dict(data, data=data["data"][::2][:15])
    dev = dict(data, data=data["data"][1::2][:5])
    for name, content in (("train", train), ("validation", dev)):
        served[("squad/v1.1", name)] = (_squad_rows(content), SQUAD_SIGNATURE)
    return {"served": served, "conll_files": files, "squad": {"train": train, "dev": dev},
            "glue": _glue_rows.folder}


@pytest.fixture
def mocked(sources, tmp_path, monkeypatch):
    """tfds.load answers from `sources` (and nothing is downloaded)."""
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))

    def as_dataset(builder, split, *args, **kwargs):
        name = builder.name if builder.builder_config is None else \
            f"{builder.name}/{builder.builder_config.name}"
        name = {"squad/plain_text": "squad/v1.1", "conll2003/conll2003": "conll2003"}.get(
            name, name)
        rows, signature = sources["served"][(name, str(split))]
        return _dataset(rows, signature)

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        yield sources


@pytest.mark.parametrize("task", ["sst2", "mrpc"])
def test_glue_from_tfds_equals_the_files(mocked, task):
    folder = mocked["glue"][task]
    for split in ("train", "dev", "test"):
        from_tfds = glue.load_dataset(task, split)
        from_files = glue.load_dataset(task, split, folder)
        # TFDS's idx is the row number; the test file's index column is too here.
        assert [(e.text_a, e.text_b, e.label) for e in from_tfds] == \
            [(e.text_a, e.text_b, e.label) for e in from_files] and from_files, split


def test_conll_and_squad_from_tfds_equal_the_files(mocked):
    for split in ("train", "validation", "test"):
        from_tfds = ner.data.load_tfds(split)
        from_files = ner.read_conll(mocked["conll_files"][split])
        assert [(s.words, s.tags) for s in from_tfds] == [(s.words, s.tags)
                                                           for s in from_files]
    from kbert.tasks.squad.run import _load_tfds

    train, dev, dev_json = _load_tfds(False)
    want_train = squad.read_squad(mocked["squad"]["train"])
    want_dev = squad.read_squad(mocked["squad"]["dev"])
    key = lambda e: (e.qid, e.question, e.context, e.answers)  # noqa: E731
    assert sorted(map(key, train)) == sorted(map(key, want_train)) and want_train
    assert sorted(map(key, dev)) == sorted(map(key, want_dev))
    assert len(dev_json["data"]) == len(mocked["squad"]["dev"]["data"])


@pytest.mark.e2e
def test_each_command_runs_with_tfds_and_writes_its_metrics(mocked, tmp_path, capsys):
    from kbert.tasks.glue import __main__ as glue_cli
    from kbert.tasks.ner import __main__ as ner_cli
    from kbert.tasks.squad import __main__ as squad_cli

    tiny = ["--preset", "tiny", "--vocab_size", "200", "--steps_per_loop", "10"]
    out = tmp_path / "glue"
    assert glue_cli.main(["--task", "mrpc", "--tfds", "--output_dir", str(out),
                          "--num_train_epochs", "1", "--max_seq_length", "32",
                          "--train_batch_size", "8", *tiny]) == 0
    assert set(json.loads((out / "eval_results.json").read_text())) == {
        "eval_f1", "eval_accuracy", "eval_split", "epoch", "step"}
    out = tmp_path / "ner"
    assert ner_cli.main(["--tfds", "--output_dir", str(out), "--num_train_epochs", "1",
                         "--max_seq_length", "32", "--train_batch_size", "16", *tiny]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert {"eval_precision", "eval_recall", "eval_f1"} <= set(results), results
    assert results["eval_split"] == "tfds conll2003 validation"
    out = tmp_path / "squad"
    assert squad_cli.main(["--tfds", "--output_dir", str(out), "--num_train_epochs", "1",
                           "--max_seq_length", "96", "--doc_stride", "48",
                           "--train_batch_size", "8", "--export_dir", "none", *tiny]) == 0
    assert set(json.loads((out / "eval_results.json").read_text())) == {
        "eval_exact_match", "eval_f1", "eval_split", "epoch", "step"}
    assert "SQuAD v1.1: EM" in capsys.readouterr().out


def test_the_builders_prepare_as_installed_and_fail_on_the_download(tmp_path, monkeypatch):
    """The install has what TFDS's GLUE, CoNLL-2003 and SQuAD builders import while
    preparing (importlib_resources was missing: ModuleNotFoundError before any
    download). Offline, the download fails; the command says so in one line and leaves
    the TFDS data directory as it was."""
    def offline(self, *args, **kwargs):
        raise ConnectionError("no network (test)")

    monkeypatch.setattr(tfds.download.DownloadManager, "download_and_extract", offline)
    monkeypatch.setattr(tfds.download.DownloadManager, "download", offline)
    data_dir = tmp_path / "tfds"
    data_dir.mkdir()
    (data_dir / "kept.txt").write_text("a user's file")
    for name in ("glue/sst2", "conll2003", "squad/v1.1"):
        builder = tfds.builder(name, data_dir=str(tmp_path / "bare"))
        with pytest.raises(ConnectionError, match="no network"):
            builder.download_and_prepare()
    from kbert.tasks import tfds_source

    for name in ("glue/sst2", "conll2003", "squad/v1.1"):
        with pytest.raises(SystemExit) as err:
            tfds_source.load(name, "train", str(data_dir), advice="pass the files")
        assert str(err.value) == (f"TFDS could not load {name} into {data_dir} "
                                  "(ConnectionError: no network (test)); pass the files")
        assert sorted(os.listdir(data_dir)) == ["kept.txt"], os.listdir(data_dir)


def test_an_offline_command_is_one_line_and_leaves_no_trace(tmp_path, monkeypatch):
    from kbert.tasks.glue import __main__ as glue_cli

    def offline(self, *args, **kwargs):
        raise ConnectionError("no network (test)")

    monkeypatch.setattr(tfds.download.DownloadManager, "download_and_extract", offline)
    monkeypatch.setattr(tfds.download.DownloadManager, "download", offline)
    with pytest.raises(SystemExit) as err:
        glue_cli.main(["--task", "rte", "--tfds", "--tfds_data_dir", str(tmp_path / "tfds"),
                       "--output_dir", str(tmp_path / "out")])
    # SystemExit with the line as its code: Python prints it and exits with status 1.
    assert err.value.code == (
        f"error: TFDS could not load glue/rte into {tmp_path / 'tfds'} (ConnectionError: no "
        "network (test)); with no network, download GLUE (its download_glue_data.py) and "
        "pass --data_dir with the task's folder, or --tfds_data_dir with a prepared copy")
    assert not (tmp_path / "tfds").exists() and not (tmp_path / "out").exists()


def test_seq2seq_reads_tfds_summaries_and_fails_offline_in_one_line(tmp_path, monkeypatch):
    """`python -m kbert.tasks.seq2seq --tfds cnn_dailymail`: the split's `article` and
    `highlights` as source and target (TFDS's mock serving rows of its features), and
    `--tfds wmt14_translate/de-en` the language features --source_lang/--target_lang name; with
    no network and no prepared copy, one error line naming the dataset and the data
    directory, and nothing left there."""
    from types import SimpleNamespace

    from kbert.tasks.seq2seq import __main__ as cli
    from kbert.tasks.seq2seq.run import read_data

    rows = [{"article": "A long text about cats.", "highlights": "Cats.", "id": "a"},
            {"article": "Dogs bark at night.\nThey do.", "highlights": "Dogs bark.",
             "id": "b"}]
    signature = {k: tf.TensorSpec([], tf.string) for k in rows[0]}
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "mock"))
    with tfds.testing.mock_data(as_dataset_fn=lambda *a, **k: _dataset(
            [{k: v.encode() for k, v in r.items()} for r in rows], signature)):
        args = SimpleNamespace(tfds="cnn_dailymail", source_lang=None, target_lang=None,
                               tfds_data_dir=None, do_train=True, do_predict=False, shots=None)
        train, dev, test = read_data(args)
    assert [(p.source, p.target, p.line) for p in train] == [
        ("A long text about cats.", "Cats.", 1), ("Dogs bark at night.\nThey do.",
                                                  "Dogs bark.", 2)]
    assert [p.source for p in dev] == [r["article"] for r in rows] and test == []
    # a translation dataset: its language features, named by --source_lang/--target_lang
    pairs = [{"de": "Die Katze schläft.", "en": "The cat sleeps."},
             {"de": "Der Hund bellt.", "en": "The dog barks."}]
    signature = {k: tf.TensorSpec([], tf.string) for k in pairs[0]}
    with tfds.testing.mock_data(as_dataset_fn=lambda *a, **k: _dataset(
            [{k: v.encode() for k, v in r.items()} for r in pairs], signature)):
        args = SimpleNamespace(tfds="wmt14_translate/de-en", source_lang="de",
                               target_lang="en", tfds_data_dir=None, do_train=False,
                               do_predict=True, shots=None)
        train, dev, test = read_data(args)
    assert train == [] and [(p.source, p.target) for p in dev] == [
        ("Die Katze schläft.", "The cat sleeps."), ("Der Hund bellt.", "The dog barks.")]
    assert [(p.path, p.line) for p in test] == [("wmt14_translate/de-en:test", 1),
                                               ("wmt14_translate/de-en:test", 2)]

    def offline(self, *args, **kwargs):
        raise ConnectionError("no network (test)")

    monkeypatch.setattr(tfds.download.DownloadManager, "download_and_extract", offline)
    monkeypatch.setattr(tfds.download.DownloadManager, "download", offline)
    with pytest.raises(SystemExit) as err:
        cli.main(["--tfds", "cnn_dailymail", "--tfds_data_dir", str(tmp_path / "tfds"),
                  "--output_dir", str(tmp_path / "out")])
    assert err.value.code.startswith(
        f"error: TFDS could not load cnn_dailymail into {tmp_path / 'tfds'} "
        "(ConnectionError: no network (test)); download it once online")
    assert not (tmp_path / "tfds").exists() and not (tmp_path / "out").exists()
