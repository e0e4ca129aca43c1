"""Training ELMo's biLM: the targets and loss of both directions against NumPy, the word
vocabulary, and `model.fit` on a generated corpus whose best perplexity is known (with
the default strategy and MirroredStrategy on two logical CPUs)."""

from __future__ import annotations

import math
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.models.elmo.lm import ELMoLanguageModel, WordVocabulary, bilm_dataset, split_windows

NOUNS = ["cat", "dog", "bird", "fish", "cow", "horse"]
VERBS = ["sees", "eats", "likes", "chases"]
# "the N V the N ." Each direction makes 7 predictions a sentence (the words, and </S>
# or <S>), three of them uncertain: a noun of 6 twice and a verb of 4.
BEST_PERPLEXITY = math.exp((2 * math.log(6) + math.log(4)) / 7)  # 2.034


def _sentences(n, seed=0):
    rng = random.Random(seed)
    return [f"the {rng.choice(NOUNS)} {rng.choice(VERBS)} the {rng.choice(NOUNS)} ."
            for _ in range(n)]


def _tiny(**overrides):
    return kbert.ELMoConfig.preset("tiny", **{"lstm_dim": 64, "projection_dim": 32,
                                              **overrides})


def test_loss_and_targets_equal_numpy():
    keras.utils.set_random_seed(1)
    vocab = WordVocabulary.build(["a b c", "b c"])
    tok = kbert.ELMoCharTokenizer(12)
    lm = ELMoLanguageModel(kbert.ELMo(_tiny(dropout=0.0)), vocab.size, vocab.bos_id,
                           vocab.eos_id, num_sampled=0)
    texts = ["a b zzz", "c"]  # zzz is unknown
    x, y = next(iter(bilm_dataset(texts, tok, vocab, 2, shuffle=False)))
    ids = vocab.index
    assert y["word_ids"].numpy().tolist() == [[ids["a"], ids["b"], vocab.unk_id],
                                              [ids["c"], -1, -1]]
    out = lm(x, training=False)
    w, b = lm.softmax_w.numpy(), lm.softmax_b.numpy()

    def nll(h, target):
        logits = h @ w.T + b
        return np.log(np.exp(logits).sum()) - logits[target]

    S, E = vocab.bos_id, vocab.eos_id
    # <S> a b zzz </S>: forward at 0..3 predicts a b zzz </S>; backward at 1..4, <S> a b zzz.
    rows = [[ids["a"], ids["b"], vocab.unk_id], [ids["c"]]]
    f_terms, b_terms = [], []
    for r, words in enumerate(rows):
        seq = [S] + words + [E]
        f, bw = out["forward"].numpy()[r], out["backward"].numpy()[r]
        f_terms += [nll(f[t], seq[t + 1]) for t in range(len(seq) - 1)]
        b_terms += [nll(bw[t], seq[t - 1]) for t in range(1, len(seq))]
    want = 0.5 * (np.mean(f_terms) + np.mean(b_terms))
    loss = lm.compute_loss(x, y, out, training=False)
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)
    np.testing.assert_allclose(float(lm.perplexity.result()), math.exp(want), rtol=1e-5)
    np.testing.assert_allclose(float(lm.forward_perplexity.result()),
                               math.exp(np.mean(f_terms)), rtol=1e-5)
    # Training with a vocabulary no larger than num_sampled: the same full softmax.
    lm.num_sampled = vocab.size
    np.testing.assert_allclose(float(lm.compute_loss(x, y, lm(x, training=True))), want,
                               rtol=1e-5)
    # The backward LM's states at the words are those of ELMo's hidden_states.
    hidden = lm.elmo(x)["hidden_states"][-1].numpy()
    p = hidden.shape[-1] // 2
    np.testing.assert_allclose(hidden[0, :, p:], out["backward"].numpy()[0, 1:4], atol=1e-6)


def test_word_vocabulary(tmp_path):
    vocab = WordVocabulary.build(["b a b", "c b a <S>"], max_size=5)
    assert vocab.words == ["</S>", "<S>", "<UNK>", "b", "a"]  # by count, then first seen
    vocab.write(tmp_path / "vocab.txt")
    assert WordVocabulary.read(tmp_path / "vocab.txt").words == vocab.words
    (tmp_path / "bad.txt").write_text("</S>\n<S>\n<UNK>\nx\nx\n")
    with pytest.raises(ValueError, match=r"bad.txt, line 5: 'x' repeats line 4"):
        WordVocabulary.read(tmp_path / "bad.txt")
    (tmp_path / "nounk.txt").write_text("</S>\n<S>\nx\n")
    with pytest.raises(ValueError, match=r"nounk.txt: missing the special word\(s\) \['<UNK>'\]"):
        WordVocabulary.read(tmp_path / "nounk.txt")


def test_long_sentences_are_split_with_a_warning(caplog):
    assert split_windows(["a b c d e", "", "f"], 2) == ["a b", "c d", "e", "f"]
    assert "1 sentences longer than 2 words were split" in caplog.text


def _train(strategy, epochs=4):
    texts = _sentences(3000)
    vocab = WordVocabulary.build(texts)
    tok = kbert.ELMoCharTokenizer(12)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        lm = ELMoLanguageModel(kbert.ELMo(_tiny()), vocab.size, vocab.bos_id, vocab.eos_id,
                               num_sampled=6)  # 6 of 16 words: sampled softmax in training
        lm.compile(optimizer=keras.optimizers.Adam(3e-3))
    dev = bilm_dataset(_sentences(300, seed=1), tok, vocab, 50, shuffle=False)
    before = lm.evaluate(dev, verbose=0, return_dict=True)
    lm.fit(bilm_dataset(texts, tok, vocab, 32), epochs=epochs, verbose=0)
    after = lm.evaluate(dev, verbose=0, return_dict=True)
    return lm, before, after


@pytest.mark.e2e
@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_bilm_learns_a_generated_corpus(strategy, tmp_path):
    from kbert import training

    chosen = (tf.distribute.get_strategy() if strategy == "default"
              else training.resolve_strategy("mirrored"))
    if strategy == "mirrored":
        assert chosen.num_replicas_in_sync == 2
    lm, before, after = _train(chosen)
    assert before["perplexity"] > 10  # about the vocabulary size (16) untrained
    # Evaluation uses the full softmax: it cannot beat the corpus's entropy.
    assert BEST_PERPLEXITY * 0.99 < after["perplexity"] < 1.05 * BEST_PERPLEXITY, after
    assert after["forward_perplexity"] < 1.05 * BEST_PERPLEXITY
    assert after["backward_perplexity"] < 1.05 * BEST_PERPLEXITY
    # The trained biLM is a bilm-tf folder (without the training softmax).
    lm.save_pretrained(tmp_path / "bilm")
    loaded = kbert.ELMo.from_pretrained(tmp_path / "bilm")
    x = kbert.ELMoCharTokenizer(12)(["the cat sees the dog ."])
    for got, want in zip(loaded(x)["hidden_states"], lm.elmo(x)["hidden_states"]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)


@pytest.mark.e2e
def test_docs_training_example_runs(tmp_path, monkeypatch):
    """docs/elmo.md's training example, run as written except for its size: the `tiny`
    preset for `small` and one epoch for ten, on the generated corpus."""
    import pathlib
    import re

    page = pathlib.Path(__file__).resolve().parents[1] / "docs" / "elmo.md"
    match = re.search(r"<!-- elmo-train-example -->\s*```python\n(.*?)```",
                      page.read_text(encoding="utf-8"), re.S)
    assert match, "docs/elmo.md lost its marked training example"
    code = match.group(1)
    assert 'preset("small")' in code and "epochs=10" in code
    code = code.replace('preset("small")', 'preset("tiny")').replace("epochs=10", "epochs=1")
    monkeypatch.chdir(tmp_path)
    scope = {"sentences": _sentences(4000), "dev_sentences": _sentences(100, seed=1)}
    exec(compile(code, str(page), "exec"), scope)
    # 15 words: about 15 untrained; 10.4 after this one epoch of 32 Adagrad steps.
    assert scope["dev"]["perplexity"] < 12, scope["dev"]
    loaded = kbert.ELMo.from_pretrained(tmp_path / "my-elmo")
    assert loaded.config.lstm_dim == kbert.ELMoConfig.preset("tiny").lstm_dim
