"""`python -m kbert.tasks.glue --model elmo`: a frozen biLM, ScalarMix, BiLSTM and max/mean
pooling; pairs as [u, v, |u - v|, u * v]. The synthetic similarity task is learned with a
biLM the package trained; single-sentence tasks run and predict; the heads' pieces
against NumPy."""

from __future__ import annotations

import json
import random

import keras
import numpy as np
import pytest

import kbert
from glue_fixtures import COLORS, synthetic_similarity, write_task
from kbert.models.elmo.lm import ELMoLanguageModel, WordVocabulary, bilm_dataset
from kbert.tasks.glue import __main__ as cli
from kbert.models.elmo.hooks import MaskedPooling, PairFeatures, encode_texts
from kbert.tasks.glue.tasks import get_task


@pytest.fixture(scope="module")
def bilm_folder(tmp_path_factory):
    rng = random.Random(3)
    texts = [" ".join(rng.sample(COLORS, 3)) for _ in range(2000)]
    vocab = WordVocabulary.build(texts)
    keras.utils.set_random_seed(0)
    lm = ELMoLanguageModel(
        kbert.ELMo(kbert.ELMoConfig.preset("tiny", lstm_dim=32, projection_dim=16)),
        vocab.size, vocab.bos_id, vocab.eos_id, num_sampled=0)
    lm.compile(optimizer=keras.optimizers.Adam(3e-3))
    lm.fit(bilm_dataset(texts, kbert.ELMoCharTokenizer(12), vocab, 32), epochs=1, verbose=0)
    folder = tmp_path_factory.mktemp("bilm") / "elmo"
    lm.save_pretrained(folder)
    return folder


def test_pooling_and_pair_features_equal_numpy():
    x = np.random.RandomState(0).normal(size=(3, 4, 5)).astype("float32")
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], "int32")
    got = MaskedPooling()(x, mask).numpy()
    for row in range(2):
        real = x[row][mask[row] == 1]
        np.testing.assert_allclose(got[row], np.concatenate([real.max(0), real.mean(0)]),
                                   rtol=1e-6)
    assert not got[2].any()  # no words: zeros
    u, v = x[:, 0], x[:, 1]
    np.testing.assert_allclose(PairFeatures()(u, v).numpy(),
                               np.concatenate([u, v, np.abs(u - v), u * v], -1), rtol=1e-6)


def test_texts_are_cut_to_the_word_limit_with_a_warning(caplog):
    from kbert.tasks.glue.data import GlueExample as InputExample  # noqa: N813

    examples = [InputExample("0", "a b c", "d", "1"), InputExample("1", "a", "b c d e", "0")]
    x = encode_texts(get_task("mrpc"), examples, 3)
    assert x["padding_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert x["padding_mask_b"].tolist() == [[1, 0, 0], [1, 1, 1]]
    assert "1 of 2 examples have a sentence longer than max_seq_length=3 words" in caplog.text


@pytest.mark.e2e
def test_glue_command_learns_the_similarity_task_with_elmo(bilm_folder, tmp_path):
    """STS-B layout: the score counts the warm colors of both sentences, a sum of what
    each sentence's vector holds (a set comparison, as the paraphrase task needs, wants
    the cross-sentence attention this head leaves out: it is learned slowly)."""
    from kbert.export.folder import load_task_folder
    from kbert.tasks.glue.data import GlueExample
    from kbert.tasks.glue.run import encode, predict

    folder = synthetic_similarity(str(tmp_path), n_train=2000, n_dev=200)
    out = tmp_path / "out"
    assert cli.main(["--task", "stsb", "--model", "elmo", "--init_from", str(bilm_folder),
                     "--data_dir", folder, "--output_dir", str(out), "--max_seq_length", "8",
                     "--num_train_epochs", "10", "--learning_rate", "1e-2", "--lstm_units",
                     "32", "--steps_per_loop", "100", "--do_predict"]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert results["eval_pearson"] >= 0.9, results
    task, model, tokenizer, settings = load_task_folder(str(out))
    assert type(tokenizer).__name__ == "ELMoCharTokenizer" and settings["pair"]
    pairs = [GlueExample("0", "red pink gold", "gold red pink", None),
             GlueExample("1", "blue gray white", "black green blue", None)]
    stsb = get_task("stsb")
    high, low = predict(model, stsb, encode(stsb, tokenizer, pairs, 8), 2, 0, tokenizer, 8)
    assert high > 3.5 and low < 1.5, (high, low)  # 5 and 0
    assert len((out / "STS-B.tsv").read_text().splitlines()) == 41


@pytest.mark.e2e
def test_single_sentence_task_runs_and_predicts(bilm_folder, tmp_path, capsys):
    folder = write_task(str(tmp_path), "sst2", {"train.tsv": 40, "dev.tsv": 10, "test.tsv": 7})
    out = tmp_path / "out"
    assert cli.main(["--task", "sst2", "--model", "elmo", "--init_from", str(bilm_folder),
                     "--data_dir", folder, "--output_dir", str(out), "--max_seq_length", "6",
                     "--num_train_epochs", "1", "--lstm_units", "8", "--do_predict"]) == 0
    rows = (out / "SST-2.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction" and len(rows) == 8
    assert set(json.loads((out / "eval_results.json").read_text())) == {
        "eval_accuracy", "eval_split", "epoch", "step"}
    # The task folder loads in a process that imported nothing of the ELMo heads (it
    # failed with "Could not locate class 'MaskedPooling'"), and the export command
    # refuses it with one line (exit 2) instead of a Keras traceback.
    import subprocess
    import sys

    load = ("import sys; from kbert.export.folder import load_task_folder; "
            "task, model, tok, _ = load_task_folder(sys.argv[1]); "
            "print(task, type(tok).__name__, model.count_params() > 0)")
    proc = subprocess.run([sys.executable, "-c", load, str(out)], capture_output=True,
                          text=True, timeout=300)
    assert proc.stdout.split() == ["classifier", "ELMoCharTokenizer", "True"], proc.stderr
    from kbert.export.__main__ import main as export_main
    from tests.conftest import run_cli

    code, _, stderr = run_cli(export_main, ["--model_dir", out, "--task", "classifier",
                                            "--export_dir", tmp_path / "serving" / "1"],
                              capsys)
    lines = stderr.strip().splitlines()
    assert code == 2 and lines[-1].startswith(
        f"error: --model_dir {out}: the elmo model of this classifier folder cannot be "
        "exported as --task classifier; elmo models export elmo"), stderr[-2000:]
    assert "Traceback" not in stderr and not (tmp_path / "serving").exists()


def test_elmo_refuses_export(tmp_path, capsys):
    """Refused before any work: an untrained folder is enough (no training here)."""
    from tests.conftest import write_untrained_elmo

    folder = write_untrained_elmo(tmp_path / "elmo")
    with pytest.raises(SystemExit) as err:
        cli.main(["--task", "sst2", "--model", "elmo", "--init_from", str(folder),
                  "--data_dir", str(tmp_path), "--output_dir", str(tmp_path / "out"),
                  "--export_dir", str(tmp_path / "serving" / "1")])
    assert err.value.code == 2
    err = capsys.readouterr().err
    assert "--export_dir: the classifier SavedModel takes bart, bert, gpt, roberta" in err
    assert "models; elmo exports elmo (the run writes the task folder, model.keras)" in err
