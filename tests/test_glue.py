"""GLUE: official file layouts, metrics equal to scikit-learn/SciPy, submission files,
and synthetic tasks learned end to end through `python -m kbert.tasks.glue`."""

import json
import logging
import os

import numpy as np
import pytest

from glue_fixtures import LABELS, synthetic_paraphrase, synthetic_similarity, write_task
from kbert.tasks import glue
from kbert.tasks.glue import __main__ as cli

ROWS = {"train.tsv": 9, "dev.tsv": 6, "test.tsv": 5, "dev_matched.tsv": 6,
        "dev_mismatched.tsv": 4, "test_matched.tsv": 5, "test_mismatched.tsv": 3,
        "diagnostic.tsv": 8}


@pytest.mark.parametrize("task", [t for t in glue.TASKS])
def test_readers_on_official_layouts(tmp_path, task):
    folder = write_task(str(tmp_path), task, ROWS)
    spec = glue.get_task(task)
    for split, name in spec.splits.items():
        examples = glue.load_dataset(task, split, folder)
        assert len(examples) == ROWS[name], (task, split)
        is_test = split.startswith("test")
        for i, e in enumerate(examples):
            assert e.text_a.startswith(("He said", "It's", "a lone", "back", "Ünï"))
            assert (e.text_b is not None) == spec.is_pair
            if is_test:
                assert e.label is None and e.index == str(i)
            elif spec.is_regression:
                assert 0.0 <= e.label <= 5.0
            else:
                assert e.label in LABELS[task]
    if spec.is_pair:  # texts with quotes are read verbatim, columns never shift
        e = glue.load_dataset(task, "test", folder)[0]
        assert (e.text_a, e.text_b) == ('He said "hello" and left.', "a lone \" quote")


@pytest.mark.parametrize("task", [t for t in glue.TASKS])
def test_files_with_a_byte_order_mark_read_as_without(tmp_path, task):
    """GLUE's own MRPC train.tsv and dev.tsv start with a UTF-8 byte-order mark (the
    header reads '\\ufeffQuality' to a plain UTF-8 reader); any file may."""
    with_bom = write_task(str(tmp_path / "bom"), task, ROWS, bom=True)
    without = write_task(str(tmp_path / "plain"), task, ROWS, bom=False)
    first = os.listdir(with_bom)[0]
    with open(os.path.join(with_bom, first), "rb") as f:
        assert f.read(3) == b"\xef\xbb\xbf"
    for split in glue.get_task(task).splits:
        want = glue.load_dataset(task, split, without)
        assert glue.load_dataset(task, split, with_bom) == want and want, (task, split)


def test_cola_has_no_header_but_its_test_file_does(tmp_path):
    folder = write_task(str(tmp_path), "cola", ROWS)
    with open(os.path.join(folder, "train.tsv"), encoding="utf-8") as f:
        first = f.readline().split("\t")
    assert first[0] == "gj04" and len(first) == 4
    assert len(glue.load_dataset("cola", "train", folder)) == ROWS["train.tsv"]


def test_malformed_rows_name_file_and_line(tmp_path, caplog):
    folder = write_task(str(tmp_path), "rte", ROWS)
    path = os.path.join(folder, "dev.tsv")
    with open(path, "a", encoding="utf-8") as f:
        f.write("99\tonly two fields\n")
    with pytest.raises(ValueError, match=r"RTE/dev\.tsv:8: 2 fields, expected 4"):
        glue.load_dataset("rte", "dev", folder)
    with open(path, "w", encoding="utf-8") as f:
        f.write("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(ValueError, match=r"dev\.tsv:2: label 'maybe' not in"):
        glue.load_dataset("rte", "dev", folder)
    # MNLI: the label column is found by name among the many.
    folder = write_task(str(tmp_path), "mnli", ROWS)
    with open(os.path.join(folder, "dev_matched.tsv"), "a", encoding="utf-8") as f:
        f.write("x\ty\n")
    with pytest.raises(ValueError, match=r"dev_matched\.tsv:8: 2 fields, expected 16"):
        glue.load_dataset("mnli", "dev_matched", folder)
    # QQP's rows with missing fields are skipped, with a warning naming the lines.
    folder = write_task(str(tmp_path), "qqp", ROWS)
    with open(os.path.join(folder, "train.tsv"), "a", encoding="utf-8") as f:
        f.write("201841\t303345\t303346\tHow do I get a job?\n")
    with caplog.at_level(logging.WARNING):
        examples = glue.load_dataset("qqp", "train", folder)
    assert len(examples) == ROWS["train.tsv"]
    assert "QQP/train.tsv: skipped 1 row(s) with missing fields (lines 11)" in caplog.text
    # A stray carriage return inside a text does not end the row.
    folder = write_task(str(tmp_path / "cr"), "sst2", ROWS)
    with open(os.path.join(folder, "dev.tsv"), "w", encoding="utf-8", newline="") as f:
        f.write("sentence\tlabel\r\nfirst\rpart\t1\r\nsecond\t0\r\n")
    examples = glue.load_dataset("sst2", "dev", folder)
    assert [(e.text_a, e.label) for e in examples] == [("first\rpart", "1"), ("second", "0")]


def test_metrics_equal_sklearn_and_scipy():
    from scipy import stats
    from sklearn import metrics as skm

    rng = np.random.default_rng(0)
    for task_name, spec in glue.TASKS.items():
        if not spec.metrics:
            continue
        for trial in range(5):
            n = int(rng.integers(5, 200))
            if spec.is_regression:
                labels = np.round(rng.uniform(0, 5, n), 1)  # ties, as in STS-B
                preds = labels + rng.normal(0, 1.5, n)
                got = glue.compute_metrics(task_name, preds, labels)
                assert got["pearson"] == pytest.approx(stats.pearsonr(labels, preds)[0], abs=1e-12)
                assert got["spearman"] == pytest.approx(stats.spearmanr(labels, preds)[0],
                                                        abs=1e-12)
                continue
            y = rng.integers(0, spec.num_labels, n)
            p = np.where(rng.random(n) < 0.6, y, rng.integers(0, spec.num_labels, n))
            got = glue.compute_metrics(task_name, [spec.labels[i] for i in p],
                                       [spec.labels[i] for i in y])
            expected = {"accuracy": skm.accuracy_score(y, p),
                        "f1": skm.f1_score(y, p, zero_division=0) if spec.num_labels == 2
                        else None,
                        "matthews_corrcoef": skm.matthews_corrcoef(y, p)}
            assert set(got) == set(spec.metrics)
            for k, v in got.items():
                assert v == pytest.approx(expected[k], abs=1e-12), (task_name, k, trial)
    # Degenerate inputs: constant predictions.
    assert glue.compute_metrics("cola", ["1"] * 5, ["0", "1", "1", "0", "1"]) == {
        "matthews_corrcoef": 0.0}
    assert glue.compute_metrics("mrpc", ["0"] * 3, ["0"] * 3) == {"f1": 0.0, "accuracy": 1.0}


SUBMISSION = {"cola": ["CoLA.tsv"], "sst2": ["SST-2.tsv"], "mrpc": ["MRPC.tsv"],
              "qqp": ["QQP.tsv"], "stsb": ["STS-B.tsv"], "mnli": ["MNLI-m.tsv", "MNLI-mm.tsv"],
              "qnli": ["QNLI.tsv"], "rte": ["RTE.tsv"], "wnli": ["WNLI.tsv"], "ax": ["AX.tsv"]}


def test_submission_files_for_every_task(tmp_path):
    rng = np.random.default_rng(1)
    written = []
    for task_name, spec in glue.TASKS.items():
        folder = write_task(str(tmp_path / "data"), task_name, ROWS)
        assert sorted(spec.submission.values()) == sorted(SUBMISSION[task_name])
        for split, name in spec.submission.items():
            examples = glue.load_dataset(task_name, split, folder)
            preds = (list(rng.uniform(-1, 6, len(examples))) if spec.is_regression
                     else [spec.labels[i] for i in rng.integers(0, spec.num_labels,
                                                                len(examples))])
            path = tmp_path / "sub" / name
            glue.write_submission(str(path), spec, examples, preds)
            lines = path.read_text(encoding="utf-8").splitlines()
            assert lines[0] == "index\tprediction"
            assert len(lines) == 1 + len(examples)
            assert [ln.split("\t")[0] for ln in lines[1:]] == [e.index for e in examples]
            values = [ln.split("\t")[1] for ln in lines[1:]]
            if spec.is_regression:
                assert all(0.0 <= float(v) <= 5.0 for v in values)
            else:
                assert set(values) <= set(spec.labels)
            written.append(name)
    assert sorted(written) == sorted(n for v in SUBMISSION.values() for n in v)


def test_cli_help_and_missing_data(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    for flag in ("--task", "--data_dir", "--tfds", "--init_from", "--do_predict",
                 "--max_seq_length", "--learning_rate", "--export_dir", "--strategy"):
        assert flag in text
    for action in cli._parser()._actions:
        assert action.help, action.option_strings
    with pytest.raises(SystemExit, match="give --data_dir"):
        cli.main(["--task", "rte", "--output_dir", "/tmp/kbert-no-data"])


SMALL = ["--max_seq_length", "16", "--learning_rate", "1e-3", "--num_train_epochs", "10",
         "--vocab_size", "200", "--steps_per_loop", "500"]


@pytest.mark.e2e
@pytest.mark.subprocess
def test_synthetic_paraphrase_task_is_learned(tmp_path, capsys):
    from kbert.export.check import keep_served, served_results

    folder = synthetic_paraphrase(str(tmp_path))
    out = tmp_path / "out"
    # The export's check below: its request runs in the exporter's own C++ load.
    request = {"text": ["red blue gold", "red blue gold"],
               "text_b": ["gold red blue", "pink white gray"]}
    with keep_served(also=[request]):
        assert cli.main(["--task", "mrpc", "--data_dir", folder, "--output_dir", str(out),
                         "--do_predict", "--export_dir",
                         str(tmp_path / "serving" / "para" / "1"), *SMALL]) == 0
        result = served_results(str(tmp_path / "serving" / "para" / "1"), [request])[0]
    results = json.loads((out / "eval_results.json").read_text())
    assert results["eval_accuracy"] >= 0.95, results
    assert results["eval_split"] == "mrpc dev", results
    assert results["epoch"] == pytest.approx(10, abs=0.05), results  # the last step's
    assert (f"GLUE mrpc, mrpc dev after step {results['step']} (epoch {results['epoch']:g}): "
            + json.dumps({k: round(results[k], 4) for k in ("eval_f1", "eval_accuracy")})
            ) in capsys.readouterr().out
    lines = (out / "MRPC.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 51
    assert (out / "kbert_task.json").exists() and (out / "model.keras").exists()
    # The exported classifier answers pairs with the label names, through TF Serving's
    # C++ loader.
    assert result["label"]["value"] == ["1", "0"]
    assert result["probabilities"]["shape"] == [2, 2]
    # The run's export equals one of its saved folder: no optimizer slots.
    from tests.conftest import assert_same_served_variables
    from kbert.export.folder import export_from_folder

    export_from_folder(str(out), "classifier", str(tmp_path / "serving" / "para" / "2"))
    assert_same_served_variables(tmp_path / "serving" / "para" / "1",
                                 tmp_path / "serving" / "para" / "2")


@pytest.mark.e2e
def test_synthetic_similarity_regression_is_learned(tmp_path):
    import tensorflow as tf

    folder = synthetic_similarity(str(tmp_path), n_train=1500)
    out = tmp_path / "out"
    export = tmp_path / "serving" / "sts" / "1"
    assert cli.main(["--task", "stsb", "--data_dir", folder, "--output_dir", str(out),
                     "--do_predict", *SMALL, "--num_train_epochs", "4",
                     "--export_dir", str(export), "--quantize", "int8"]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    # 0.9955 and 0.9954 with --seed 0 and 1 (0.9994 from 4,000 examples, 2.3x the time)
    assert results["eval_pearson"] >= 0.95, results
    assert len((out / "STS-B.tsv").read_text().splitlines()) == 41
    # --quantize: the export holds int8 kernels, the task folder float32 ones, and the
    # run reports the quantized model's own dev figures beside the float ones.
    assert abs(results["eval_int8_pearson"] - results["eval_pearson"]) < 0.01, results
    served = tf.train.load_checkpoint(str(export / "variables" / "variables"))
    dtypes = served.get_variable_to_dtype_map()
    assert sum(d == tf.int8 for d in dtypes.values()) >= 4, dtypes
    import keras

    saved = keras.saving.load_model(out / "model.keras", compile=False)
    assert {w.dtype for w in saved.weights} == {"float32"}


@pytest.mark.e2e
def test_freeze_encoder_trains_the_head_alone(tmp_path, capsys):
    """--freeze_encoder: the task folder's encoder weights are the --init_from folder's,
    so runs from one folder can share it (`python -m kbert.export --heads`)."""
    import keras

    import kbert
    from glue_fixtures import COLORS
    from kbert.export.folder import load_task_folder
    from kbert.models.interface import find_encoder

    keras.utils.set_random_seed(0)
    tokenizer = kbert.BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *COLORS])
    encoder = kbert.BertEncoder(kbert.BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size))
    encoder.save_pretrained(tmp_path / "bert", tokenizer=tokenizer)
    folder = synthetic_similarity(str(tmp_path))
    out = tmp_path / "out"
    assert cli.main(["--task", "stsb", "--data_dir", folder, "--output_dir", str(out),
                     "--init_from", str(tmp_path / "bert"), "--freeze_encoder",
                     "--max_seq_length", "16", "--learning_rate", "1e-2",
                     "--num_train_epochs", "0.5", "--steps_per_loop", "500"]) == 0
    _, model, _, _ = load_task_folder(str(out))
    trained = find_encoder(model)
    for a, b in zip(encoder.weights, trained.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=b.path)
    assert json.loads((out / "eval_results.json").read_text())["eval_pearson"] > 0.2
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--task", "stsb", "--data_dir", folder, "--freeze_encoder"])
    assert exit_.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --freeze_encoder: keeps the --init_from encoder as it is; give --init_from")


def test_predictions_with_trimmed_padding_are_the_same_and_in_order():
    import keras

    import kbert

    keras.utils.set_random_seed(0)
    cfg = kbert.BertConfig(vocab_size=60, hidden_size=16, num_layers=2, num_heads=2,
                           intermediate_size=24, max_position_embeddings=64)
    task = glue.get_task("stsb")
    model = glue.build_model(kbert.BertEncoder(cfg), task)
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 64, 23)
    lengths[5:10] = 3  # one batch of short rows only
    mask = (np.arange(64)[None] < lengths[:, None]).astype("int32")
    inputs = {"token_ids": rng.integers(5, 60, (23, 64)).astype("int32") * mask,
              "segment_ids": np.zeros((23, 64), "int32"), "padding_mask": mask}
    full = glue.run.predict(model, task, inputs, batch_size=5)
    trimmed = glue.run.predict(model, task, inputs, batch_size=5, trim=8)
    assert len(full) == 23
    np.testing.assert_allclose(trimmed, full, rtol=1e-5, atol=1e-6)
    assert np.std(full) > 0  # rows differ, so an order mix-up would show


def test_tfds_offline_is_a_clear_error(tmp_path, monkeypatch):
    import tensorflow_datasets as tfds

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(tfds, "load", offline)
    with pytest.raises(SystemExit, match=r"TFDS could not load glue/rte .*pass --data_dir"):
        cli.main(["--task", "rte", "--tfds", "--output_dir", str(tmp_path)])
