"""The command lines as users meet them: flags checked before any work or file, one
`error:` line with exit status 2 (flags) or 1 (data), no output folder left by a failed
run, run_squad.py's flags with their meanings."""

import json
import os
import subprocess
import sys

import pytest

import kbert
from kbert.tasks.glue import __main__ as glue_cli
from kbert.tasks.squad import __main__ as squad_cli
from kbert.tasks.squad.sample import make_sample
from tests.conftest import TINY_VOCAB

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fails(main, argv, capsys, status):
    with pytest.raises(SystemExit) as err:
        main(argv)
    assert err.value.code == status, (err.value.code, capsys.readouterr())
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert lines and "Traceback" not in "\n".join(lines)
    # kbert's checks print one "error: ..." line; argparse's own (a value of the wrong
    # type) print the usage, then "prog: error: ...".
    assert lines[-1].startswith("error: ") or (
        lines[0].startswith("usage:") and ": error: argument " in lines[-1]), lines
    return lines[-1]


@pytest.fixture
def tiny_folder(tmp_path):
    """A kbert BERT folder with 64 positions and its vocabulary."""
    tokenizer = kbert.BertTokenizer(TINY_VOCAB)
    encoder = kbert.BertEncoder(kbert.BertConfig.preset("tiny", vocab_size=len(TINY_VOCAB)))
    encoder.save_pretrained(tmp_path / "tiny", tokenizer=tokenizer)
    return str(tmp_path / "tiny")


@pytest.mark.parametrize("flags, message", [
    (["--train_batch_size", "0"], "error: --train_batch_size 0: must be at least 1"),
    (["--predict_batch_size", "-1"], "error: --predict_batch_size -1: must be at least 1"),
    (["--num_train_epochs", "0"], "error: --num_train_epochs 0.0: must be more than 0"),
    (["--max_seq_length", "2"], "error: --max_seq_length 2: leaves no room"),
    (["--export_dir", "SERVING/mrpc"], "error: --export_dir SERVING/mrpc: must end in a "
                                       "version number"),
    # Found before training, not after it (it was '[Errno 2]' once the model was trained).
    (["--export_dir", "/proc/kbert/exp/1"], "error: --export_dir /proc/kbert/exp/1: cannot "
                                            "write in /proc ("),
    (["--export_dir", "FILE/exp/1"], "error: --export_dir FILE/exp/1: FILE is a file, not a "
                                     "folder"),
    (["--quantize", "int8"], "error: --quantize int8: sets the SavedModel's weights; give "
                             "--export_dir too"),
    (["--dtype", "bfloat16"], "error: --dtype bfloat16: sets the SavedModel's weights; give "
                              "--export_dir too"),
    (["--export_dir", "SERVING/mrpc/1", "--quantize", "int8", "--dtype", "bfloat16"],
     "error: --quantize int8 and --dtype bfloat16: give one of them"),
])
def test_glue_flags_are_checked_before_any_work(tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    (tmp_path / "file").write_text("")
    paths = {"SERVING": str(tmp_path / "serving"), "FILE": str(tmp_path / "file")}
    for key, value in paths.items():
        flags = [f.replace(key, value) for f in flags]
        message = message.replace(key, value)
    line = _fails(glue_cli.main, ["--task", "mrpc", "--data_dir", str(tmp_path),
                                  "--output_dir", str(out), *flags], capsys, 2)
    assert line.startswith(message), line
    assert not out.exists()


@pytest.fixture
def gpt_folder(tmp_path):
    """A kbert GPT-2 folder with a word-level BPE tokenizer."""
    from gpt_fixtures import word_tokenizer

    tokenizer = word_tokenizer(["the", "cat", "sat", "on", "mat"])
    kbert.GPTDecoder(kbert.GPTConfig.preset(
        "tiny", vocab_size=tokenizer.vocab_size, end_token_id=tokenizer.end_token_id)
    ).save_pretrained(tmp_path / "gpt", tokenizer=tokenizer)
    return str(tmp_path / "gpt")


def test_squad_and_ner_refuse_a_family_that_cannot_do_them(tmp_path, capsys, gpt_folder):
    """GPT's byte-level BPE gives no character offsets (SQuAD) nor word alignment (NER):
    one error line naming the family, exit 2, no output folder (before: a traceback
    and an output folder holding only kbert_run.json)."""
    from kbert.tasks.ner import __main__ as ner_cli

    out = tmp_path / "out"
    line = _fails(squad_cli.main, ["--init_from", gpt_folder, "--output_dir", str(out)],
                  capsys, 2)
    assert line.startswith(f"error: --init_from {gpt_folder} holds a gpt model: kbert runs "
                           "squad on models whose tokenizer gives character offsets (bart, bert")
    assert line.endswith("; gpt runs glue, pretrain, seq2seq")
    assert not out.exists()
    conll = tmp_path / "eng.train"
    conll.write_text("-DOCSTART- -X- -X- O\n\nthe DT O O\ncat NN O B-PER\n")
    line = _fails(ner_cli.main, ["--init_from", gpt_folder, "--train_file", str(conll),
                                 "--output_dir", str(out)], capsys, 2)
    assert line.startswith(f"error: --init_from {gpt_folder} holds a gpt model: kbert runs "
                           "ner on models whose tokenizer gives words aligned")
    assert not out.exists()
    # --model gpt for SQuAD: the same answer, from the registry; an unknown family named.
    line = _fails(squad_cli.main, ["--model", "gpt", "--output_dir", str(out)], capsys, 2)
    assert line.startswith("error: --model gpt: kbert runs squad on models whose tokenizer "
                           "gives character offsets (bart, bert")
    assert line.endswith("; gpt runs glue, pretrain, seq2seq")
    line = _fails(squad_cli.main, ["--model", "xlnet", "--output_dir", str(out)], capsys, 2)
    assert line == ("error: --model xlnet: not a model family; choose from bart, bert, elmo, "
                    "gpt, roberta, t5")
    assert not out.exists()


def test_a_folder_of_another_family_is_named_by_the_loaders(tmp_path, gpt_folder,
                                                           tiny_folder):
    """BertEncoder.from_pretrained(<a GPT folder>) listed 'Unknown BertConfig field(s)'."""
    with pytest.raises(ValueError, match=r"holds a gpt model, not a bert one; load it with "
                                         r"GPTDecoder.from_pretrained$"):
        kbert.BertEncoder.from_pretrained(gpt_folder)
    with pytest.raises(ValueError, match=r"holds a bert model, not a gpt one; load it with "
                                         r"BertEncoder.from_pretrained$"):
        kbert.GPTLanguageModel.from_pretrained(tiny_folder)
    with pytest.raises(ValueError, match=r"holds a bert model, not an elmo one"):
        kbert.ELMo.from_pretrained(tiny_folder)


def test_lm_generate_with_no_prompts_returns_none(gpt_folder):
    lm = kbert.GPTLanguageModel.from_pretrained(gpt_folder)
    assert lm.generate([]) == [] and lm.generate([], max_new_tokens=3) == []


def test_missing_and_empty_data_files_are_named(tmp_path, capsys):
    from kbert.tasks.ner import __main__ as ner_cli

    out = tmp_path / "out"
    line = _fails(squad_cli.main, ["--train_file", str(tmp_path / "nope.json"),
                                   "--predict_file", str(tmp_path / "nope.json"),
                                   "--output_dir", str(out)], capsys, 2)
    assert line == f"error: --train_file {tmp_path / 'nope.json'}: no such file"
    line = _fails(ner_cli.main, ["--train_file", str(tmp_path / "eng.train"),
                                 "--output_dir", str(out)], capsys, 2)
    assert line == f"error: --train_file {tmp_path / 'eng.train'}: no such file"
    empty = tmp_path / "empty.json"
    empty.write_text('{"version": "1.1", "data": []}')
    line = _fails(squad_cli.main, ["--train_file", str(empty), "--predict_file", str(empty),
                                   "--output_dir", str(out)], capsys, 1)
    assert line == f"error: --train_file {empty}: no questions to train on"
    assert not out.exists()


def test_sequence_length_is_checked_against_the_model(tmp_path, capsys, tiny_folder):
    out = tmp_path / "out"
    line = _fails(squad_cli.main, ["--init_from", tiny_folder, "--max_seq_length", "600",
                                   "--output_dir", str(out)], capsys, 2)
    assert line == f"error: --max_seq_length 600: the model in --init_from {tiny_folder} " \
                   "has 64 positions"
    line = _fails(squad_cli.main, ["--init_from", str(tmp_path / "nope"),
                                   "--output_dir", str(out)], capsys, 2)
    assert line.endswith(f"error: argument --init_from: {tmp_path / 'nope'}: no such model "
                         "folder, and not a Hugging Face Hub repo id (org/name[@revision])")
    assert not out.exists()


def test_existing_export_version_is_refused_unless_overwrite(tmp_path, capsys):
    (tmp_path / "serving" / "mrpc" / "3").mkdir(parents=True)
    argv = ["--task", "mrpc", "--data_dir", str(tmp_path / "nodata"), "--output_dir",
            str(tmp_path / "out"), "--export_dir", str(tmp_path / "serving" / "mrpc" / "3")]
    line = _fails(glue_cli.main, argv, capsys, 2)
    assert "exists already" in line and "--overwrite" in line
    # With --overwrite the export is allowed; the run then fails on the missing data,
    # with one line naming it (exit 1), and leaves no output folder.
    line = _fails(glue_cli.main, argv + ["--overwrite"], capsys, 1)
    assert "nodata" in line and not (tmp_path / "out").exists()


def _squad_files(tmp_path, version_2):
    data = make_sample(30, 0, version_2)
    train = dict(data, data=data["data"][5:])
    dev = dict(data, data=data["data"][:5])
    for name, d in (("train.json", train), ("dev.json", dev)):
        (tmp_path / name).write_text(json.dumps(d))
    return str(tmp_path / "train.json"), str(tmp_path / "dev.json")


def test_squad_v2_data_without_the_flag_is_an_error(tmp_path, capsys):
    train, dev = _squad_files(tmp_path, version_2=True)
    out = tmp_path / "out"
    line = _fails(squad_cli.main, ["--train_file", train, "--predict_file", dev,
                                   "--output_dir", str(out)], capsys, 1)
    assert line.startswith(f"error: {train}: SQuAD v2.0 data (") and \
        line.endswith("pass --version_2_with_negative")
    assert not out.exists()


def test_run_squad_flag_combinations(tmp_path, capsys):
    train, dev = _squad_files(tmp_path, version_2=False)
    line = _fails(squad_cli.main, ["--do_train=false", "--do_predict", "false",
                                   "--output_dir", str(tmp_path / "o")], capsys, 2)
    assert line == "error: at least one of --do_train and --do_predict must be true"
    line = _fails(squad_cli.main, ["--vocab_file", train, "--output_dir", str(tmp_path / "o")],
                  capsys, 2)
    assert line == "error: --vocab_file needs --bert_config_file, --init_checkpoint too"
    line = _fails(squad_cli.main, ["--do_train", "--train_file", train, "--do_lower_case=maybe",
                                   "--output_dir", str(tmp_path / "o")], capsys, 2)
    assert line.endswith("error: argument --do_lower_case: expected true or false, got 'maybe'")


@pytest.mark.e2e
def test_run_squad_flags_train_then_predict(tmp_path, capsys):
    """Google's --vocab_file/--bert_config_file/--init_checkpoint, then --do_train
    alone (the model stays in --output_dir) and --do_predict alone (it is read back)."""
    from tests.test_checkpoints import _write_google_checkpoint

    encoder = kbert.BertEncoder(kbert.BertConfig(
        vocab_size=len(TINY_VOCAB), hidden_size=32, num_layers=2, num_heads=4,
        intermediate_size=37, max_position_embeddings=128, hidden_act="gelu_tanh"))
    google = tmp_path / "google"
    _write_google_checkpoint(encoder, google)
    (google / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    os.rename(google / "vocab.txt", tmp_path / "my_vocab.txt")  # not beside the checkpoint
    train, dev = _squad_files(tmp_path, version_2=False)
    out = tmp_path / "out"
    common = ["--vocab_file", str(tmp_path / "my_vocab.txt"), "--bert_config_file",
              str(google / "bert_config.json"), "--init_checkpoint",
              str(google / "bert_model.ckpt"), "--do_lower_case=true",
              "--max_seq_length", "96", "--doc_stride", "48", "--output_dir", str(out),
              "--export_dir", "none", "--train_batch_size", "8", "--num_train_epochs", "1"]
    assert squad_cli.main(["--do_train", "--train_file", train, *common]) == 0
    assert "trained; the model is in" in capsys.readouterr().out
    assert (out / "model.keras").exists() and not (out / "predictions.json").exists()
    assert squad_cli.main(["--do_predict", "--predict_file", dev, "--output_dir", str(out),
                           "--export_dir", "none", "--max_seq_length", "96",
                           "--doc_stride", "48"]) == 0
    assert "SQuAD v1.1: EM" in capsys.readouterr().out
    predictions = json.loads((out / "predictions.json").read_text())
    dev_ids = [qa["id"] for a in json.loads(open(dev).read())["data"]
               for p in a["paragraphs"] for qa in p["qas"]]
    assert sorted(predictions) == sorted(dev_ids)


def _glue_argv(data, out, *extra):
    return ["--task", "sst2", "--data_dir", data, "--output_dir", str(out),
            "--num_train_epochs", "1", "--train_batch_size", "4", "--steps_per_loop", "2",
            "--max_seq_length", "16", "--vocab_size", "60", "--do_predict", *extra]


@pytest.mark.e2e
@pytest.mark.subprocess
def test_rerun_resumes_refuses_other_settings_and_starts_over(tmp_path):
    from glue_fixtures import write_task

    data = write_task(str(tmp_path), "sst2", {"train.tsv": 12, "dev.tsv": 4, "test.tsv": 3})
    out = tmp_path / "out"
    assert glue_cli.main(_glue_argv(data, out)) == 0
    recorded = json.loads((out / "kbert_run.json").read_text())
    assert recorded["learning_rate"] == 2e-5 and "export_dir" not in recorded
    # A finished run keeps its last checkpoint only; the model file holds no optimizer.
    # One epoch of 12 examples in batches of 4: 3 steps, the last loop of 1 (#50: the
    # steps were rounded up to whole loops of 2, 4 steps).
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index"]
    import zipfile

    import h5py

    with zipfile.ZipFile(out / "model.keras") as z, z.open("model.weights.h5") as f:
        with h5py.File(f) as h5:
            assert "optimizer" not in h5
    assert glue_cli.main(_glue_argv(data, out)) == 0  # the same flags: complete already

    # As the user's shell runs them: other flags refused, naming them, nothing changed;
    # --overwrite_output_dir starts over.
    def command(*extra):
        return subprocess.run([sys.executable, "-m", "kbert.tasks.glue",
                               *_glue_argv(data, out, *extra)], capture_output=True,
                              text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT})

    before = {p.name: p.stat().st_mtime_ns for p in out.rglob("*")}
    refused = command("--learning_rate", "3e-5")
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"error: --output_dir {out} holds a run started with other flags: --learning_rate "
        "3e-05 (was 2e-05). Give the same flags to resume it, another --output_dir, or "
        "--overwrite_output_dir to start over"]
    assert {p.name: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    again = command("--learning_rate", "3e-5", "--overwrite_output_dir")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed from" not in again.stderr and "step 1/3" in again.stderr
    assert json.loads((out / "kbert_run.json").read_text())["learning_rate"] == 3e-5


@pytest.mark.e2e
@pytest.mark.subprocess
def test_ctrl_c_then_the_same_command_resumes_to_the_same_predictions(tmp_path):
    import signal
    import time

    from glue_fixtures import write_task

    data = write_task(str(tmp_path), "sst2", {"train.tsv": 1600, "dev.tsv": 20, "test.tsv": 20})

    def command(out):
        return [
            sys.executable, "-m", "kbert.tasks.glue", "--task", "sst2", "--data_dir", data,
            "--output_dir", str(out), "--num_train_epochs", "2", "--train_batch_size", "4",
            "--steps_per_loop", "20", "--max_seq_length", "16", "--vocab_size", "60",
            "--do_predict"]

    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    whole = subprocess.run(command(tmp_path / "whole"), capture_output=True, text=True,
                           timeout=600, env=env)
    assert whole.returncode == 0, whole.stderr[-2000:]

    out = tmp_path / "cut"
    # The command as a terminal's foreground job runs it: SIGINT at its default. A shell
    # starts a background job (`make test &`) with SIGINT ignored, and a child inherits
    # the ignoring, so Python would install no KeyboardInterrupt handler and the Ctrl-C
    # below would do nothing: the cause of this test's failures in such runs.
    proc = subprocess.Popen(command(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    index = out / "checkpoints" / "checkpoint"
    deadline = time.time() + 300
    while not index.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert index.exists() and proc.poll() is None, "no checkpoint before the run ended"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1] == (
        f"interrupted: the last checkpoint is in {out / 'checkpoints'}; run the same "
        "command again to resume from it")
    assert "Traceback" not in err

    resumed = subprocess.run(command(out), capture_output=True, text=True, timeout=600,
                             env=env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed from" in resumed.stderr
    for name in ("SST-2.tsv", "eval_results.json"):
        assert (out / name).read_text() == (tmp_path / "whole" / name).read_text(), name


@pytest.mark.e2e
def test_progress_counts_epochs_of_the_training_data(tmp_path, caplog):
    import logging

    from glue_fixtures import write_task

    data = write_task(str(tmp_path), "sst2", {"train.tsv": 40, "dev.tsv": 4, "test.tsv": 3})
    with caplog.at_level(logging.INFO, logger="kbert.training.loop"):
        # 40 examples, batch 4: 10 steps an epoch, 3 epochs, checkpoint loops of 5 steps.
        assert glue_cli.main(["--task", "sst2", "--data_dir", data, "--output_dir",
                              str(tmp_path / "out"), "--num_train_epochs", "3",
                              "--train_batch_size", "4", "--steps_per_loop", "5",
                              "--max_seq_length", "16", "--vocab_size", "60"]) == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch ")]
    assert lines[0].startswith("epoch 0.10/3  step 1/30  loss ")
    assert lines[-1].startswith("epoch 3.00/3  step 30/30  loss ")
    assert all(" lr " in x and "examples/s" in x and "ETA" in x for x in lines)
    assert len(lines) == 30  # one line a step: ten an epoch at 10 steps an epoch


@pytest.mark.e2e
@pytest.mark.subprocess
@pytest.mark.parametrize("mask", [0o022, 0o027], ids=["umask022", "umask027"])
def test_every_file_a_command_writes_honours_the_umask(tmp_path, mask):
    import stat

    from glue_fixtures import write_task

    data = write_task(str(tmp_path), "sst2", {"train.tsv": 12, "dev.tsv": 4, "test.tsv": 3})
    out, export = tmp_path / "out", tmp_path / "serving" / "sst2" / "1"
    proc = subprocess.run(
        [sys.executable, "-m", "kbert.tasks.glue", *_glue_argv(data, out),
         "--export_dir", str(export)], capture_output=True, text=True, timeout=600,
        preexec_fn=lambda: os.umask(mask), env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.returncode == 0, proc.stderr[-2000:]
    checked = 0
    for root in (out, tmp_path / "serving"):
        for folder, dirs, files in os.walk(root):
            for name in dirs + files + ([""] if folder == str(root) else []):
                path = os.path.join(folder, name)
                want = (0o777 if os.path.isdir(path) else 0o666) & ~mask
                assert stat.S_IMODE(os.stat(path).st_mode) == want, path
                checked += 1
    assert checked > 20 and (export / "saved_model.pb").exists()


def test_a_run_that_failed_before_training_is_not_a_run_to_resume(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()  # the user's folder: kept
    argv = ["--task", "sst2", "--data_dir", str(tmp_path / "typo"), "--output_dir", str(out)]
    _fails(glue_cli.main, argv, capsys, 1)
    # Corrected flags are not "other settings" of a run that never trained.
    _fails(glue_cli.main, argv[:3] + [str(tmp_path / "typo2")] + argv[4:], capsys, 1)
    assert out.exists()
