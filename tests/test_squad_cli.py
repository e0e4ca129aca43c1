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
def test_evaluate_command(tmp_path, capsys):
    data = make_sample(2, seed=1)
    (tmp_path / "dev.json").write_text(json.dumps(data))
    qas = [q for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    preds = {q["id"]: q["answers"][0]["text"] for q in qas}
    preds[qas[0]["id"]] = "wrong"
    (tmp_path / "preds.json").write_text(json.dumps(preds))
    from tests.conftest import run_cli

    code, out, _ = run_cli(cli.main, ["evaluate", tmp_path / "dev.json",
                                      tmp_path / "preds.json"], capsys)
    assert code == 0
    result = json.loads(out)
    assert result["exact_match"] == pytest.approx(100 * (len(qas) - 1) / len(qas))


@pytest.mark.e2e
def test_small_end_to_end_run(tmp_path, capsys, recwarn, monkeypatch):
    from tests.conftest import spy_processes

    started = spy_processes(monkeypatch)
    assert cli.main(["--output_dir", str(tmp_path), "--sample_paragraphs", "24",
                     "--num_train_epochs", "1", "--max_seq_length", "64",
                     "--doc_stride", "32", "--steps_per_loop", "5"]) == 0
    monkeypatch.undo()
    # One load by TF Serving's C++ loader answers the warmup requests and the 64 dev
    # questions that the export must answer as predictions.json does.
    assert started == ["c_loader"], started
    out = capsys.readouterr().out
    assert "SQuAD v1.1: EM" in out
    for name in ("predictions.json", "nbest_predictions.json", "eval_results.json",
                 "sample_train.json", "sample_dev.json"):
        assert (tmp_path / name).exists(), name
    results = json.loads((tmp_path / "eval_results.json").read_text())
    assert set(results) == {"eval_exact_match", "eval_f1", "eval_split", "epoch", "step"}
    assert 0 <= results["eval_f1"] <= 100
    assert results["eval_split"] == str(tmp_path / "sample_dev.json"), results
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
    # The dev set as Hugging Face run_qa.py's JSON Lines (datasets' `squad` records; the
    # sample's answers repeat, as SQuAD's do): the same questions, the same scores.
    records = tmp_path / "dev.jsonl"
    with open(records, "w", encoding="utf-8") as f:
        for article in dev["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    f.write(json.dumps({
                        "id": qa["id"], "title": article["title"],
                        "context": paragraph["context"], "question": qa["question"],
                        "answers": {"text": [a["text"] for a in qa["answers"]],
                                    "answer_start": [a["answer_start"] for a in qa["answers"]]},
                    }) + "\n")
    capsys.readouterr()
    assert cli.main(["--output_dir", str(tmp_path), "--sample_paragraphs", "24",
                     "--num_train_epochs", "1", "--max_seq_length", "64",
                     "--doc_stride", "32", "--steps_per_loop", "5", "--do_predict",
                     "--predict_file", str(records),
                     # the export of this model is checked above (#54: not again)
                     "--export_dir", "none"]) == 0
    again = json.loads((tmp_path / "eval_results.json").read_text())
    # the same scores, on the file named; a run that trained nothing names no step
    assert again == {"eval_exact_match": results["eval_exact_match"],
                     "eval_f1": results["eval_f1"], "eval_split": str(records)}, again
    assert json.loads((tmp_path / "predictions.json").read_text()) == preds


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
@pytest.mark.e2e
@pytest.mark.subprocess
def test_the_demo_command_reaches_em_and_f1_95(tmp_path):
    """`make demo` itself (`python -m kbert.tasks.squad --output_dir ...`, every other
    flag at its default) in a fresh process: the README's and the SQuAD page's figures,
    EM and F1 of at least 95 on the held-out questions (about 5 minutes; 10 with the
    exports below, the longest test: `make test-all`, with test_small_end_to_end_run
    the same command on a smaller sample in `make test`). Then the
    run exported with `--quantize int8` and with `--dtype bfloat16`: through TF Serving's
    C++ loader, the three exports answer the 600 held-out questions, and the int8 and
    bfloat16 ones' EM is within 1 point of the float32 one's."""
    import subprocess
    import sys

    from kbert.export.check import run_c_loader
    from kbert.tasks.squad.evaluate import evaluate

    out = tmp_path / "squad"
    proc = subprocess.run([sys.executable, "-m", "kbert.tasks.squad", "--output_dir",
                           str(out)], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "eval_results.json").read_text())
    assert results["eval_exact_match"] >= 95.0 and results["eval_f1"] >= 95.0, results
    assert (f"SQuAD v1.1: EM {results['eval_exact_match']:.2f} F1 {results['eval_f1']:.2f}"
            f" on {out}/sample_dev.json, after step {results['step']} (epoch {results['epoch']:g}) "
            in proc.stdout), proc.stdout
    exports = {"float32": out / "serving" / "squad" / "1",
               "int8": tmp_path / "int8" / "squad" / "1",
               "bfloat16": tmp_path / "bfloat16" / "squad" / "1"}
    for kind, flags in (("int8", ["--quantize", "int8"]), ("bfloat16", ["--dtype", "bfloat16"])):
        proc = subprocess.run([sys.executable, "-m", "kbert.export", "--model_dir", str(out),
                               "--task", "squad", *flags, "--export_dir", str(exports[kind])],
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
    dev = json.loads((out / "sample_dev.json").read_text())
    questions = [(q["id"], q["question"], p["context"]) for a in dev["data"]
                 for p in a["paragraphs"] for q in p["qas"]]
    requests = [{"question": [q for _, q, _ in questions[i:i + 150]],
                 "context": [c for _, _, c in questions[i:i + 150]]}
                for i in range(0, len(questions), 150)]
    em = {}
    for kind, export in exports.items():
        answers = [a for r in run_c_loader(str(export), requests)["results"]
                   for a in r["answer"]["value"]]
        em[kind] = evaluate(dev, {qid: a for (qid, _, _), a in zip(questions, answers)}
                            )["exact_match"]
    assert len(questions) == 600 and em["float32"] >= 95.0, em
    assert abs(em["int8"] - em["float32"]) <= 1.0, em
    assert abs(em["bfloat16"] - em["float32"]) <= 1.0, em

    def size(folder):
        return sum(f.stat().st_size for f in (folder / "variables").iterdir())

    assert size(exports["int8"]) < size(exports["float32"]) / 2  # the weights stay int8
    assert size(exports["bfloat16"]) < size(exports["float32"]) * 0.6  # and bfloat16


@pytest.mark.slow
def test_embedded_default_v2_reaches_em_and_f1_93(tmp_path, capsys):
    """`--version_2_with_negative` on the bundled sample, all defaults (about 8 min)."""
    assert cli.main(["--output_dir", str(tmp_path), "--version_2_with_negative"]) == 0
    results = json.loads((tmp_path / "eval_results.json").read_text())
    assert results["eval_exact"] >= 93.0 and results["eval_f1"] >= 93.0, results
    assert (tmp_path / "serving" / "squad" / "1" / "saved_model.pb").exists()
    assert "SQuAD v2.0: EM" in capsys.readouterr().out


def test_json_lines_records_read_as_the_nested_file(tmp_path):
    """run_qa.py's flat records (JSON Lines, or a list under `data` in a .json) read
    into the examples the nested SQuAD file gives, v1.1 and v2.0 (an empty `answers`
    is an unanswerable question, as in `datasets`' squad_v2)."""
    from kbert.tasks.squad.data import load_json, read_squad

    for v2 in (False, True):
        nested = make_sample(6, seed=1, version_2=v2)
        records = [{"id": qa["id"], "title": a["title"], "context": p["context"],
                    "question": qa["question"],
                    "answers": {"text": [x["text"] for x in qa["answers"]],
                                "answer_start": [x["answer_start"] for x in qa["answers"]]}}
                   for a in nested["data"] for p in a["paragraphs"] for qa in p["qas"]]
        lines = tmp_path / "train.jsonl"
        lines.write_text("".join(json.dumps(r) + "\n" for r in records))
        wrapped = tmp_path / "train.json"
        wrapped.write_text(json.dumps({"version": "1", "data": records}))
        want = read_squad(nested, strict=True)
        assert any(e.is_impossible for e in want) == v2
        for path in (lines, wrapped):
            got = read_squad(load_json(str(path)), strict=True)
            assert [(e.qid, e.question, e.context, e.answers, e.is_impossible, e.title)
                    for e in got] == [(e.qid, e.question, e.context, e.answers,
                                       e.is_impossible, e.title) for e in want]
    lines.write_text(json.dumps(records[0]) + "\n" + json.dumps(
        {**records[0], "answers": {"text": ["x"], "answer_start": []}}) + "\n")
    with pytest.raises(ValueError, match=rf"^{lines}:2: 'answers' needs lists 'text' and "
                                         "'answer_start' of one length$"):
        load_json(str(lines))
    lines.write_text(json.dumps({k: v for k, v in records[0].items() if k != "question"}))
    with pytest.raises(ValueError, match=rf"^{lines}:1: no 'question' text$"):
        load_json(str(lines))


@pytest.mark.e2e
def test_eval_strategy_scores_each_epoch_and_keeps_the_best(tmp_path):
    assert cli.main(["--output_dir", str(tmp_path), "--sample_paragraphs", "18",
                     "--num_train_epochs", "2", "--max_seq_length", "64", "--doc_stride", "32",
                     "--eval_strategy", "epoch", "--export_dir", "none"]) == 0
    state = json.loads((tmp_path / "best" / "state.json").read_text())
    assert state["metric"] == "f1" and len(state["evaluations"]) == 2, state
    results = json.loads((tmp_path / "eval_results.json").read_text())
    best = state["best"]["metrics"]
    assert best["f1"] == max(e["metrics"]["f1"] for e in state["evaluations"])
    # the restored weights' own score, at the best evaluation's step
    assert {k[5:]: v for k, v in results.items() if k[5:] in best} == \
        pytest.approx(best, abs=1e-9)
    assert results["step"] == state["best"]["step"]
