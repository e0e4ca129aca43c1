"""`python -m kbert.tasks.ner --model elmo`: a biLM trained by the package on a generated
corpus, frozen, its layers mixed by ScalarMix under a BiLSTM tagger, on the synthetic
CoNLL task of the NER tests; the word windows; the flags ELMo refuses."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

import kbert
from kbert.models.elmo.lm import ELMoLanguageModel, WordVocabulary, bilm_dataset
from kbert.tasks.ner import __main__ as cli
from kbert.models.elmo.hooks import word_windows
from ner_fixtures import make_sentences, write_conll


def test_word_windows_cut_long_sentences_and_map_words_back():
    w = word_windows([["a", "b", "c"], ["d"], []], 2, [["O", "B-X", "I-X"], ["O"], []],
                     ["O", "B-X", "I-X"])
    assert w.words == [["a", "b"], ["c"], ["d"], []]
    assert w.labels.tolist() == [[0, 1], [2, -1], [0, -1], [-1, -1]]
    assert w.padding_mask.tolist() == [[1, 1], [1, 0], [1, 0], [0, 0]]
    assert [x.tolist() for x in w.word_window] == [[0, 0, 1], [2], []]
    assert [x.tolist() for x in w.word_position] == [[0, 1, 0], [0], []]
    tok = kbert.ELMoCharTokenizer(8)
    x, y = next(iter(w.dataset(tok).batch(4)))
    want = tok(["a b", "c", "d", ""])
    assert x["char_ids"].shape == (4, 2, 8)
    np.testing.assert_array_equal(x["char_ids"][:, :1], want["char_ids"][:, :1])
    np.testing.assert_array_equal(x["padding_mask"], w.padding_mask)
    with pytest.raises(ValueError, match=r"sentence 0, word 1 \('b'\): tag 'B-Y'"):
        word_windows([["a", "b"]], 4, [["O", "B-Y"]], ["O"])


@pytest.fixture(scope="module")
def bilm_folder(tmp_path_factory):
    """A biLM trained by the package on generated sentences of the NER task's domain
    (other sentences than the NER files')."""
    folder = tmp_path_factory.mktemp("bilm") / "elmo"
    texts = [" ".join(words) for words, _ in make_sentences(3000, seed=7)]
    vocab = WordVocabulary.build(texts)
    keras.utils.set_random_seed(0)
    lm = ELMoLanguageModel(
        kbert.ELMo(kbert.ELMoConfig.preset("tiny", lstm_dim=64, projection_dim=32,
                                           max_characters_per_token=16)),
        vocab.size, vocab.bos_id, vocab.eos_id, num_sampled=32)
    lm.compile(optimizer=keras.optimizers.Adam(3e-3))
    tok = kbert.ELMoCharTokenizer(16)
    dev = bilm_dataset([" ".join(w) for w, _ in make_sentences(200, seed=8)], tok, vocab, 50,
                       shuffle=False)
    before = lm.evaluate(dev, verbose=0, return_dict=True)["perplexity"]
    lm.fit(bilm_dataset(texts, tok, vocab, 32), epochs=3, verbose=0)
    after = lm.evaluate(dev, verbose=0, return_dict=True)["perplexity"]
    assert after < before / 4, (before, after)  # it learned the corpus
    lm.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def untrained_folder(tmp_path_factory):
    """An ELMo folder written without training (the flag checks read only its files)."""
    from tests.conftest import write_untrained_elmo

    return write_untrained_elmo(tmp_path_factory.mktemp("untrained") / "elmo")


@pytest.mark.e2e
def test_ner_command_with_a_package_trained_bilm(bilm_folder, tmp_path):
    from kbert.export.folder import load_task_folder
    from kbert.tasks.ner.run import predict_tags
    from kbert.tasks.ner.data import read_conll

    train = write_conll(str(tmp_path / "eng.train"), make_sentences(1500, seed=0))
    dev = write_conll(str(tmp_path / "eng.testa"), make_sentences(200, seed=1))
    out = tmp_path / "out"
    assert cli.main(["--model", "elmo", "--init_from", str(bilm_folder), "--train_file", train,
                     "--dev_file", dev, "--output_dir", str(out), "--max_seq_length", "32",
                     "--num_train_epochs", "6", "--lstm_units", "64", "--learning_rate", "3e-3",
                     "--steps_per_loop", "100"]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert results["eval_f1"] >= 90, results
    task, model, tokenizer, settings = load_task_folder(str(out))
    assert task == "ner" and type(tokenizer).__name__ == "ELMoCharTokenizer"
    elmo = next(layer for layer in model.layers if isinstance(layer, kbert.ELMo))
    assert not elmo.trainable  # feature-based: the biLM stays as trained
    reloaded = kbert.ELMo.from_pretrained(bilm_folder)
    for got, want in zip(elmo.get_weights(), reloaded.get_weights()):
        np.testing.assert_array_equal(got, want)
    sentences = read_conll(dev)[:20]
    tags = predict_tags(model, tokenizer, sentences, settings["labels"], 32)
    predicted = (out / "dev_predictions.txt").read_text(encoding="utf-8").split("\n\n")
    assert [[line.split(" ")[2] for line in block.split("\n")] for block in predicted[:20]] \
        == tags


@pytest.mark.parametrize("flags, message", [
    (["--mode", "finetune"], "--mode finetune: elmo is used feature-based"),
    (["--export_dir", "x/1"], "--export_dir: the ner SavedModel takes bart, bert"),
])
def test_flags_elmo_refuses(untrained_folder, tmp_path, capsys, flags, message):
    train = write_conll(str(tmp_path / "eng.train"), make_sentences(10, seed=0))
    with pytest.raises(SystemExit) as err:
        cli.main(["--model", "elmo", "--init_from", str(untrained_folder), "--train_file", train,
                  "--output_dir", str(tmp_path / "out"), *flags])
    assert err.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_elmo_needs_a_folder(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        cli.main(["--model", "elmo", "--train_file", "x", "--output_dir",
                  str(tmp_path / "out")])
    assert err.value.code == 2
    assert "--model elmo needs --init_from a elmo folder" in capsys.readouterr().err
