"""`python -m kbert.tasks.squad`: flags, evaluation command, a small end-to-end run."""

import json
import re
import subprocess
import sys

import pytest

from kbert.tasks.squad import __main__ as cli
from kbert.tasks.squad.sample import make_sample

RUN_SQUAD_FLAGS = ["--train_file", "--predict_file", "--version_2_with_negative",
                   "--init_from", "--max_seq_length", "--doc_stride", "--max_query_length",
                   "--n_best_size", "--max_answer_length", "--null_score_diff_threshold",
                   "--learning_rate", "--train_batch_size", "--num_train_epochs",
                   "--output_dir", "--export_dir", "--strategy", "--mixed_precision", "--tfds"]


def test_help_documents_every_flag(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    for flag in RUN_SQUAD_FLAGS:
        assert flag in text, flag
    parser = cli._parser()
    for action in parser._actions:
        assert action.help, f"{action.option_strings} has no help"


@pytest.mark.subprocess
def test_evaluate_command(tmp_path):
    data = make_sample(2, seed=1)
    (tmp_path / "dev.json").write_text(json.dumps(data))
    qas = [q for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    preds = {q["id"]: q["answers"][0]["text"] for q in qas}
    preds[qas[0]["id"]] = "wrong"
    (tmp_path / "preds.json").write_text(json.dumps(preds))
    out = subprocess.run([sys.executable, "-m", "kbert.tasks.squad", "evaluate",
                          str(tmp_path / "dev.json"), str(tmp_path / "preds.json")],
                         capture_output=True, text=True, check=True).stdout
    result = json.loads(out)
    assert result["exact_match"] == pytest.approx(100 * (len(qas) - 1) / len(qas))


@pytest.mark.e2e
def test_small_end_to_end_run(tmp_path, capsys, recwarn):
    assert cli.main(["--output_dir", str(tmp_path), "--sample_paragraphs", "24",
                     "--num_train_epochs", "1", "--max_seq_length", "64",
                     "--doc_stride", "32", "--steps_per_loop", "5"]) == 0
    out = capsys.readouterr().out
    assert "SQuAD v1.1: EM" in out
    for name in ("predictions.json", "nbest_predictions.json", "eval_results.json",
                 "sample_train.json", "sample_dev.json"):
        assert (tmp_path / name).exists(), name
    results = json.loads((tmp_path / "eval_results.json").read_text())
    assert set(results) == {"exact_match", "f1"} and 0 <= results["f1"] <= 100
    dev = json.loads((tmp_path / "sample_dev.json").read_text())
    preds = json.loads((tmp_path / "predictions.json").read_text())
    contexts = {q["id"]: p["context"] for a in dev["data"] for p in a["paragraphs"]
                for q in p["qas"]}
    assert set(preds) == set(contexts)
    assert all(p in contexts[q] for q, p in preds.items())  # answers are context substrings
    assert (tmp_path / "encoder" / "vocab.txt").exists()
    # The run's export (OUTPUT_DIR/serving/squad/1) equals one of its saved folder: no
    # optimizer slots (1.10 MB against 386 KB before).
    from tests.conftest import assert_same_served_variables
    from kbert.export.folder import export_from_folder

    export_from_folder(str(tmp_path), "squad", str(tmp_path / "again" / "1"))
    assert_same_served_variables(tmp_path / "serving" / "squad" / "1", tmp_path / "again" / "1")
    import keras

    model = keras.models.load_model(tmp_path / "model.keras")
    assert set(model.output) == {"start_logits", "end_logits"}
    # The span head does not read the pooler, which is frozen: no missing gradients.
    assert not [w for w in recwarn if "Gradients do not exist" in str(w.message)]


def test_bad_input_fails_before_training(tmp_path, capsys):
    bad = tmp_path / "train.json"
    bad.write_text('{"version": "1.1", "data": [\n oops]}')
    good = tmp_path / "dev.json"
    good.write_text(json.dumps(make_sample(1)))
    with pytest.raises(SystemExit) as err:
        cli.main(["--train_file", str(bad), "--predict_file", str(good),
                  "--output_dir", str(tmp_path / "out")])
    assert err.value.code == 1
    assert re.fullmatch(r"error: .*train\.json:2:\d+: not valid JSON \(.*\)\n",
                        capsys.readouterr().err)
    assert not (tmp_path / "out").exists()  # the failed run leaves no folder
    with pytest.raises(SystemExit, match=r"error: give --predict_file \(or no data flag"):
        cli.main(["--train_file", str(good), "--output_dir", str(tmp_path / "out")])


def test_tfds_offline_is_a_clear_error(tmp_path, monkeypatch):
    import tensorflow_datasets as tfds

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(tfds, "load", offline)
    with pytest.raises(SystemExit, match=r"TFDS could not load squad/v1\.1 .*pass "
                                         r"--train_file and --predict_file"):
        cli.main(["--tfds", "--output_dir", str(tmp_path)])


@pytest.mark.slow
@pytest.mark.parametrize("version_2", [False, True])
def test_embedded_default_reaches_em_85(tmp_path, capsys, version_2):
    """`make demo`: the bundled sample, all defaults, trained from scratch (4-5 min)."""
    flags = ["--version_2_with_negative"] if version_2 else []
    assert cli.main(["--output_dir", str(tmp_path), *flags]) == 0
    results = json.loads((tmp_path / "eval_results.json").read_text())
    assert results["exact" if version_2 else "exact_match"] >= 85.0, results
    assert (tmp_path / "serving" / "squad" / "1" / "saved_model.pb").exists()
    assert f"SQuAD {'v2.0' if version_2 else 'v1.1'}: EM" in capsys.readouterr().out
