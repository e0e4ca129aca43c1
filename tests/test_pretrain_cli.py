"""`python -m kbert.tasks.pretrain --model bert|gpt|elmo`: BERT from create_data records
and on the bundled corpus (dynamic masking), its masked-LM accuracy rising, a killed run
resumed to bit-identical weights, GPT and ELMo on text, and the folders the task commands
read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import kbert
from kbert.tasks.pretrain import __main__ as cli
from ner_fixtures import make_sentences


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Generated sentences (people, places, organizations), six a document."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    with open(path, "w", encoding="utf-8") as f:
        for i, (words, _) in enumerate(make_sentences(3000, seed=3)):
            f.write(" ".join(words) + "\n" + ("\n" if i % 6 == 5 else ""))
    return str(path)


BERT_SMALL = ["--preset", "tiny", "--vocab_size", "400", "--max_seq_length", "32",
              "--max_predictions_per_seq", "5", "--num_warmup_steps", "40",
              "--learning_rate", "5e-3", "--steps_per_loop", "100"]


@pytest.mark.e2e
def test_bert_on_the_bundled_corpus_learns_the_masked_lm(tmp_path):
    """No data flags: the bundled corpus (the SQuAD sample's domain), masks per batch."""
    out = tmp_path / "out"
    assert cli.main(["--model", "bert", "--output_dir", str(out), "--corpus_paragraphs",
                     "1000", "--num_train_steps", "400", *BERT_SMALL]) == 0
    assert (out / "corpus.txt").exists()
    results = json.loads((out / "train_results.json").read_text())
    # From about 0.3 (the frequent words) in the first steps; 0.68 in runs here.
    assert results["masked_lm_accuracy"] >= 0.55, results
    assert results["next_sentence_accuracy"] >= 0.5
    model = kbert.BertPretrainer.from_pretrained(out / "model")
    encoder = kbert.BertEncoder.from_pretrained(out / "model")  # what --init_from reads
    tokenizer = kbert.BertTokenizer.from_pretrained(out / "model")
    assert encoder.config.vocab_size == tokenizer.vocab_size == model.encoder.config.vocab_size


@pytest.mark.e2e
def test_few_steps_warm_up_by_proportion_and_a_rerun_keeps_the_results(tmp_path, capsys):
    """20 steps with no --num_warmup_steps: --warmup_proportion (0.1) of them, not
    run_pretraining.py's 10000 (which was refused). A rerun of the finished run trains
    nothing and keeps train_results.json (it printed {} and emptied it)."""
    out = tmp_path / "out"
    flags = ["--model", "bert", "--output_dir", str(out), "--corpus_paragraphs", "60",
             "--num_train_steps", "20", "--preset", "tiny", "--vocab_size", "300",
             "--max_seq_length", "32", "--max_predictions_per_seq", "5",
             "--steps_per_loop", "10"]
    assert cli.main(flags) == 0
    first = (out / "train_results.json").read_text()
    assert set(json.loads(first)) >= {"masked_lm_accuracy", "masked_lm_loss"}
    capsys.readouterr()
    assert cli.main(flags) == 0
    assert (out / "train_results.json").read_text() == first
    printed = capsys.readouterr().out
    assert "pretrain bert: {}" not in printed and "masked_lm_loss" in printed
    # Another learning rate: refused, naming the default the run used (it said 'None').
    with pytest.raises(SystemExit) as err:
        cli.main(flags + ["--learning_rate", "0.01"])
    assert err.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --output_dir {out} holds a run started with other flags: --learning_rate "
        "0.01 (was 0.001 by default). Give the same flags to resume it, another "
        "--output_dir, or --overwrite_output_dir to start over")


@pytest.mark.e2e
def test_bert_from_create_data_records(corpus, tmp_path):
    from kbert import build_vocab

    lines = [line for line in open(corpus, encoding="utf-8") if line.strip()]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in build_vocab(lines, 300, min_count=1)))
    records = [str(tmp_path / f"train-{i}.tfrecord") for i in range(2)]
    assert cli.main(["create_data", "--input_file", corpus, "--output_file", ",".join(records),
                     "--vocab_file", str(vocab), "--max_seq_length", "32",
                     "--max_predictions_per_seq", "5", "--dupe_factor", "2"]) == 0
    out = tmp_path / "out"
    assert cli.main(["--model", "bert", "--input_file", str(tmp_path / "train-*.tfrecord"),
                     "--vocab_file", str(vocab), "--output_dir", str(out), "--preset", "tiny",
                     "--num_train_steps", "60", "--num_warmup_steps", "6",
                     "--learning_rate", "5e-3", "--steps_per_loop", "30"]) == 0
    assert set(json.loads((out / "train_results.json").read_text())) >= {
        "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
        "next_sentence_loss"}
    assert kbert.BertTokenizer.from_pretrained(out / "model").vocabulary == \
        vocab.read_text().split("\n")[:-1]


@pytest.mark.e2e
@pytest.mark.subprocess
def test_killed_pretraining_resumes_to_the_same_weights(tmp_path):
    from safetensors.numpy import load_file

    def command(out):  # the bundled corpus
        return [sys.executable, "-m", "kbert.tasks.pretrain", "--model", "bert",
                "--corpus_paragraphs", "300", "--output_dir", str(out),
                "--num_train_steps", "120", *[a if a != "100" else "30" for a in BERT_SMALL]]

    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    whole = subprocess.run(command(tmp_path / "whole"), capture_output=True, text=True,
                           timeout=600, env=env)
    assert whole.returncode == 0, whole.stderr[-2000:]
    out = tmp_path / "cut"
    proc = subprocess.Popen(command(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    index = out / "checkpoints" / "checkpoint"
    deadline = time.time() + 300
    while not index.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert index.exists() and proc.poll() is None, "no checkpoint before the run ended"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not (out / "model").exists()
    resumed = subprocess.run(command(out), capture_output=True, text=True, timeout=600,
                             env=env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed from" in resumed.stderr
    for name in ("model.safetensors", "pretraining_heads.safetensors"):
        want, got = load_file(tmp_path / "whole" / "model" / name), load_file(out / "model" / name)
        assert want.keys() == got.keys()
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.e2e
def test_gpt_and_elmo_pretrain_on_text(corpus, tmp_path):
    from gpt_fixtures import word_tokenizer

    words = sorted({w for line in open(corpus, encoding="utf-8") for w in line.split()})
    tokenizer = word_tokenizer(words)
    kbert.GPTDecoder(kbert.GPTConfig.preset(
        "tiny", vocab_size=tokenizer.vocab_size, end_token_id=tokenizer.end_token_id)
    ).save_pretrained(tmp_path / "gpt", tokenizer=tokenizer)
    assert cli.main(["--model", "gpt", "--init_from", str(tmp_path / "gpt"), "--text_file",
                     corpus, "--output_dir", str(tmp_path / "gpt-out"), "--max_seq_length",
                     "32", "--num_train_steps", "60", "--num_warmup_steps", "6",
                     "--learning_rate", "3e-3", "--steps_per_loop", "30"]) == 0
    gpt = json.loads((tmp_path / "gpt-out" / "train_results.json").read_text())
    assert gpt["perplexity"] < tokenizer.vocab_size / 4, gpt
    kbert.GPTLanguageModel.from_pretrained(tmp_path / "gpt-out" / "model")
    assert cli.main(["--model", "elmo", "--text_file", corpus, "--preset", "tiny",
                     "--output_dir", str(tmp_path / "elmo-out"), "--max_seq_length", "20",
                     "--num_train_steps", "100", "--num_warmup_steps", "10",
                     "--learning_rate", "3e-3", "--steps_per_loop", "50",
                     "--num_sampled", "64"]) == 0
    elmo = json.loads((tmp_path / "elmo-out" / "train_results.json").read_text())
    assert elmo["perplexity"] < 100, elmo  # about the vocabulary size (97 words) untrained
    kbert.ELMo.from_pretrained(tmp_path / "elmo-out" / "model")


@pytest.mark.parametrize("flags, message", [
    (["--model", "bert", "--input_file", "x", "--text_file", "y"],
     "--input_file and --text_file: give one of them"),
    (["--model", "gpt", "--text_file", "x"], "--model gpt needs --init_from a gpt folder"),
    (["--model", "roberta", "--text_file", "x"],
     "--model roberta needs --init_from a roberta folder"),
    (["--model", "elmo", "--input_file", "x"],
     "--input_file: create_data records are read by bert; --model elmo reads --text_file"),
    (["--model", "xlnet"], "--model xlnet: unknown model family 'xlnet'"),
    (["--model", "bert", "--text_file", "x", "--num_train_steps", "0"],
     "--num_train_steps 0: must be at least 1"),
    (["--model", "bert", "--num_train_steps", "20", "--num_warmup_steps", "30"],
     "--num_warmup_steps 30: must be between 0 and --num_train_steps 20"),
    (["--model", "bert", "--num_train_steps", "20", "--warmup_proportion", "1.5"],
     "--warmup_proportion 1.5: must be in [0, 1]"),
])
def test_bad_flags_are_one_line(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as err:
        cli.main([*flags, "--output_dir", str(tmp_path / "out")])
    text = capsys.readouterr().err.strip()
    assert err.value.code == 2 and text.startswith(f"error: {message}"), text
    assert not (tmp_path / "out").exists()
