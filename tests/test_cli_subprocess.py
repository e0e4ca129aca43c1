"""The command lines as a user's shell runs them: a fresh `python -m ...` process for
each bad input, checked for its exit status, its one `error:` line and what that line
names, a terminal free of tracebacks and TensorFlow's start-up chatter, nothing on
stdout, and no output folder left behind.

The processes run side by side (a few at a time); each case is then its own test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import kbert
from kbert.tasks.squad.sample import make_sample
from tests.conftest import TINY_VOCAB

pytestmark = pytest.mark.subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fixtures(root: str) -> dict:
    from glue_fixtures import write_task
    from ner_fixtures import make_sentences, write_conll

    f = {"root": root}
    f["glue"] = write_task(root, "sst2", {"train.tsv": 12, "dev.tsv": 4, "test.tsv": 3})
    f["bad_glue"] = write_task(os.path.join(root, "bad"), "sst2",
                               {"train.tsv": 12, "dev.tsv": 4, "test.tsv": 3})
    with open(os.path.join(f["bad_glue"], "train.tsv"), "a", encoding="utf-8") as out:
        out.write("a sentence\t1\tan extra field\n")  # line 14 (a header and 12 rows before)
    f["tiny"] = os.path.join(root, "tiny")  # 64 positions
    encoder = kbert.BertEncoder(kbert.BertConfig.preset("tiny", vocab_size=len(TINY_VOCAB)))
    encoder.save_pretrained(f["tiny"], tokenizer=kbert.BertTokenizer(TINY_VOCAB))
    f["broken"] = os.path.join(root, "broken")
    shutil.copytree(f["tiny"], f["broken"])
    os.truncate(os.path.join(f["broken"], "model.safetensors"), 100)
    f["squad_v2"] = os.path.join(root, "v2.json")
    with open(f["squad_v2"], "w", encoding="utf-8") as out:
        json.dump(make_sample(10, 0, version_2=True), out)
    f["ner_bad"] = os.path.join(root, "ner_bad.txt")
    write_conll(f["ner_bad"], make_sentences(20))
    with open(f["ner_bad"], encoding="utf-8") as lines:
        lines = lines.read().splitlines()
    lines[7] = "Paris"  # line 8: one column
    with open(f["ner_bad"], "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    f["version"] = os.path.join(root, "serving", "sst2", "1")
    os.makedirs(f["version"])
    return f


GLUE = ["kbert.tasks.glue", "--task", "sst2", "--data_dir", "{glue}", "--output_dir", "{out}",
        "--max_seq_length", "16", "--vocab_size", "60"]

# (id, argv, exit status, the error line, with {fixture} names filled in)
CASES = [
    ("batch_size_0", GLUE + ["--train_batch_size", "0"], 2,
     "error: --train_batch_size 0: must be at least 1"),
    ("epochs_0", GLUE + ["--num_train_epochs", "0"], 2,
     "error: --num_train_epochs 0.0: must be more than 0"),
    ("seq_length_2", GLUE[:-4] + ["--max_seq_length", "2"], 2,
     "error: --max_seq_length 2: leaves no room for a token besides the 2 special tokens"),
    ("seq_length_over_positions", ["kbert.tasks.squad", "--init_from", "{tiny}",
                                   "--max_seq_length", "600", "--output_dir", "{out}"], 2,
     "error: --max_seq_length 600: the model in --init_from {tiny} has 64 positions"),
    ("loop_not_whole_executions", GLUE + ["--steps_per_loop", "6", "--steps_per_execution", "4"],
     2, "error: --steps_per_loop 6: must be a multiple of --steps_per_execution 4 "
        "(Keras runs whole executions)"),
    ("export_dir_without_version", GLUE + ["--export_dir", "{root}/serving/sst2"], 2,
     "error: --export_dir {root}/serving/sst2: must end in a version number"),
    ("export_version_exists", GLUE + ["--export_dir", "{version}"], 2,
     "error: --export_dir {version}: exists already"),
    ("missing_data_dir", ["kbert.tasks.glue", "--task", "rte", "--data_dir", "{root}/nowhere",
                          "--output_dir", "{out}"], 1, "error: {root}/nowhere"),
    ("bad_tsv_line", ["kbert.tasks.glue", "--task", "sst2", "--data_dir", "{bad_glue}",
                      "--output_dir", "{out}"], 1,
     "error: {bad_glue}/train.tsv:14: 3 fields, expected 2 (sentence, label)"),
    ("init_from_missing", GLUE + ["--init_from", "{root}/nonexistent"], 2,
     "python -m kbert.tasks.glue: error: argument --init_from: {root}/nonexistent: no such "
     "model folder, and not a Hugging Face Hub repo id (org/name[@revision])"),
    ("truncated_safetensors", GLUE[:-2] + ["--init_from", "{broken}"], 1,
     "error: {broken}/model.safetensors: cannot read safetensors"),
    ("squad_v2_without_flag", ["kbert.tasks.squad", "--train_file", "{squad_v2}",
                               "--predict_file", "{squad_v2}", "--output_dir", "{out}"], 1,
     "error: {squad_v2}: SQuAD v2.0 data (10 of 40 questions have no answer, is_impossible); "
     "pass --version_2_with_negative"),
    ("conll_bad_line", ["kbert.tasks.ner", "--train_file", "{ner_bad}", "--output_dir",
                        "{out}"], 1,
     "error: {ner_bad}:8: expected 'word ... tag' columns, got 'Paris'"),
    ("export_from_no_run", ["kbert.export", "--model_dir", "{root}/nothing", "--task",
                            "classifier", "--export_dir", "{root}/serving/x/1"], 2,
     "python -m kbert.export: error: argument --model_dir: {root}/nothing: no such model "
     "folder, and not a Hugging Face Hub repo id (org/name[@revision])"),
    ("export_sampler_without_top_p", ["kbert.export", "--model_dir", "{root}", "--task",
                                      "generate", "--export_dir", "{root}/serving/g/1",
                                      "--sampler", "top_p"], 2,
     "error: --sampler top_p needs --top_p in (0, 1] (got None)"),
    ("check_no_saved_model", ["kbert.export", "check", "{root}/nothing"], 2,
     "error: {root}/nothing: no saved_model.pb"),
    ("unknown_flag", GLUE + ["--bogus"], 2,
     "python -m kbert.tasks.glue: error: unrecognized arguments: --bogus"),
    ("bad_boolean", ["kbert.tasks.squad", "--do_lower_case", "maybe", "--output_dir", "{out}"],
     2, "python -m kbert.tasks.squad: error: argument --do_lower_case: expected true or "
        "false, got 'maybe'"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every case run once, four processes at a time: {id: (proc, fixtures, out)}."""
    root = str(tmp_path_factory.mktemp("cli"))
    fixtures = _fixtures(root)
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as in a user's shell

    def run(case):
        name, argv, _, _ = case
        out = os.path.join(root, "out_" + name)
        argv = [a.format(out=out, **fixtures) for a in argv]
        proc = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                              timeout=300, env=env, cwd=root)
        return name, (proc, fixtures, out)

    with ThreadPoolExecutor(4) as pool:
        return dict(pool.map(run, CASES))


@pytest.mark.parametrize("name, argv, status, line", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_one_error_line(runs, name, argv, status, line):
    proc, fixtures, out = runs[name]
    want = line.format(**fixtures)
    assert proc.returncode == status, proc.stderr[-3000:]
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines, "no error line"
    assert lines[-1].startswith(want), lines[-1]
    if lines[-1].startswith("python -m "):  # argparse's own: the usage, then the error
        assert lines[0].startswith("usage: python -m ")
        return
    # Besides the error line, at most kbert's own log records of work done before the
    # input was found bad: no traceback, no TensorFlow/absl lines (I0000, E0000, W0000).
    for other in lines[:-1]:
        assert other.startswith(("INFO kbert.", "WARNING kbert.")), proc.stderr[-3000:]
    assert not os.path.exists(out), "a failed run left its --output_dir"


def test_verbose_keeps_the_traceback(tmp_path):
    """--verbose is for the bug report: the traceback and TensorFlow's own lines."""
    proc = subprocess.run(
        [sys.executable, "-m", "kbert.tasks.glue", "--task", "rte", "--data_dir",
         str(tmp_path / "nowhere"), "--output_dir", str(tmp_path / "out"), "--verbose"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT}, cwd=str(tmp_path))
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("FileNotFoundError: ")


COMMANDS = [["kbert.tasks.squad"], ["kbert.tasks.squad", "evaluate"], ["kbert.tasks.glue"],
            ["kbert.tasks.ner"], ["kbert.tasks.pretrain"],
            ["kbert.tasks.pretrain", "create_data"], ["kbert.export"],
            ["kbert.export", "check"], ["kbert.tasks.seq2seq"]]


def _help(command):
    return subprocess.run([sys.executable, "-X", "importtime", "-m", *command, "--help"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_help_is_answered_before_tensorflow_is_imported():
    """`--help` of every command imports no TensorFlow, Keras or NumPy (6-11 s before):
    the parsers are built from TF-free modules and the packages import their names on
    first use (kbert._lazy); TensorFlow comes after parsing."""
    with ThreadPoolExecutor(4) as pool:
        procs = list(pool.map(_help, COMMANDS))
    for command, proc in zip(COMMANDS, procs):
        assert proc.returncode == 0 and "usage: python -m" in proc.stdout, command
        imported = {line.split("|")[-1].strip().split(".")[0]
                    for line in proc.stderr.splitlines() if line.startswith("import time:")}
        assert not imported & {"tensorflow", "keras", "numpy", "tensorflow_text"}, command
    pretrain = procs[COMMANDS.index(["kbert.tasks.pretrain"])].stdout
    assert "create_data" in pretrain and "unused by pretraining" not in pretrain
    assert "--export_dir" not in pretrain
    for flag in ("--do_lower_case", "--max_predictions_per_seq", "--masked_lm_prob",
                 "--do_whole_word_mask", "--optimizer", "--weight_decay",
                 "--gradient_accumulation_steps"):
        block = pretrain.split(flag, 1)[1].split("\n  --", 1)[0]
        assert len(block.split()) > 4, (flag, block)  # a help text, not just the metavar
    squad = procs[0].stdout
    assert "(default: None)" not in squad and "default 384; on the bundled sample 128" in squad
    export = procs[COMMANDS.index(["kbert.export"])].stdout
    for flag in ("--sampler", "--temperature", "--top_p"):
        assert len(export.split(flag, 1)[1].split("\n  --", 1)[0].split()) > 4, flag


@pytest.mark.parametrize("command, flags, line", [
    (["kbert.tasks.glue", "--task", "sst2"], ["--train_batch_size", "0"],
     "error: --train_batch_size 0: must be at least 1"),
    (["kbert.tasks.squad"], ["--num_train_epochs", "0"],
     "error: --num_train_epochs 0.0: must be more than 0"),
    (["kbert.tasks.ner"], ["--lora_rank", "2"],
     "error: --lora_rank 2: adapts a pretrained encoder; give --init_from"),
    (["kbert.tasks.pretrain", "--model", "bert"], ["--steps_per_loop", "6",
                                                   "--steps_per_execution", "4"],
     "error: --steps_per_loop 6: must be a multiple of --steps_per_execution 4 (Keras runs "
     "whole executions)"),
])
def test_a_wrong_training_value_is_answered_before_tensorflow_is_imported(
        tmp_path, command, flags, line):
    """Batch sizes, steps, epochs, LoRA and evaluation settings wrong by their value
    alone are refused right after parsing (6 s of TensorFlow import before), and no
    output folder is made."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", *command, *flags,
                           "--output_dir", str(out)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == line, proc.stderr
    imported = {row.split("|")[-1].strip().split(".")[0]
                for row in proc.stderr.splitlines() if row.startswith("import time:")}
    assert not imported & {"tensorflow", "keras", "numpy"}, imported
    assert not out.exists()


def test_a_clone_folder_named_kbert_is_named_when_it_shadows_the_package(tmp_path):
    """#50: a script run from the folder above a clone named `kbert` imported the clone
    folder as an empty namespace package (`module 'kbert' has no attribute
    'BertEncoder'`); now the clone's package is used and one line says so."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.symlink(root, tmp_path / "kbert")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import kbert, kbert.tasks.squad; print(kbert.BertEncoder.__name__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "BertEncoder"
    assert out.stderr.strip().splitlines()[0] == (  # TensorFlow's start-up lines follow
        f"kbert: 'import kbert' found the clone folder {tmp_path / 'kbert'}; using the "
        "package inside it")
