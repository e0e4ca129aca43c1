"""kbert's BART pretraining noise (`kbert.models.bart.pretraining`) against fairseq's own,
run: `DenoisingDataset` of fairseq 0.12.2 (`tests/references.fairseq_denoising`) with
bart.large's noise settings but kbert's (Poisson lambda 3, the paper's, and spans over
tokens: fairseq's `mask_whole_words` None) on the same 10,000 documents. The two draw
from different generators (numpy's and torch's), so the test compares distributions:
the share of tokens deleted, masks per document, the span lengths (the deleted runs),
insertions, random tokens in masks' places, and the sentence permutation, each equal
within sampling error. Each document is made of ids that appear once and increase, so
that what happened to every token can be read off the noised ids."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kbert.models.bart.pretraining import denoising_example

pytestmark = pytest.mark.parity

VOCAB, BOS, PAD, EOS, MASK = 50000, 0, 1, 2, 49999
FULL_STOP = 13  # fairseq finds sentences by GPT-2's "." (`vocab.index("13")`)
DOCUMENTS = 10_000


class _Dictionary:
    """What `DenoisingDataset` asks of a fairseq `Dictionary`."""

    def __len__(self):
        return VOCAB

    def bos(self):
        return BOS

    def pad(self):
        return PAD

    def eos(self):
        return EOS

    def index(self, symbol):
        assert symbol == "13"
        return FULL_STOP


def _documents(full_stops: bool) -> list[list[np.ndarray]]:
    """DOCUMENTS documents of 2-5 sentences of 5-19 tokens, ids 100, 101, ... in each (a
    sentence ending with the full stop where `full_stops`)."""
    rng = np.random.default_rng(7)
    docs = []
    for _ in range(DOCUMENTS):
        sentences, first = [], 100
        for _ in range(int(rng.integers(2, 6))):
            size = int(rng.integers(5, 20))
            ids = np.arange(first, first + size, dtype=np.int64)
            if full_stops:
                ids[-1] = FULL_STOP
            sentences.append(ids)
            first += size
        docs.append(sentences)
    return docs


def _noised(docs, mask: float, random_ratio: float, permute: bool):
    """(fairseq's sources, kbert's sources), <s> and </s> taken off, for `docs`."""
    import torch

    from tests.references import fairseq_denoising

    items = [torch.tensor(np.concatenate([[BOS], *sentences, [EOS]])) for sentences in docs]
    args = SimpleNamespace(  # bart.large's, but lambda 3 and spans over tokens
        mask=mask, mask_random=random_ratio, insert=0.0, rotate=0.0,
        permute_sentences=1.0 if permute else 0.0, bpe="gpt2", replace_length=1,
        mask_length="span-poisson", poisson_lambda=3.0)
    torch.manual_seed(0)
    dataset = fairseq_denoising().DenoisingDataset(
        items, np.array([len(i) for i in items]), _Dictionary(), MASK, None, False, 0, args)
    theirs = [dataset[i]["source"].numpy()[1:-1] for i in range(len(items))]
    tokenizer = SimpleNamespace(mask_id=MASK, vocab_size=VOCAB, cls_id=BOS, sep_id=EOS)
    ours = [denoising_example([s.astype(np.int32) for s in sentences],
                              np.random.default_rng([0, n]), tokenizer, mask_ratio=mask,
                              poisson_lambda=3.0, random_ratio=random_ratio,
                              permute=permute)[0][1:-1]
            for n, sentences in enumerate(docs)]
    return theirs, ours


def _read(noised: list[np.ndarray], docs) -> dict:
    """Per document: the share of its tokens deleted, its masks (and random tokens in a
    mask's place), its insertions (masks where nothing was deleted); the lengths of all
    deleted runs. The ids of a document appear once and increase: what is kept keeps their
order, and a deletion is always stood for by a mask."""
    deleted, masks, inserts, randoms, runs = [], [], [], [], []
    for out, sentences in zip(noised, docs):
        original = np.concatenate(sentences)
        where = {int(t): i for i, t in enumerate(original)}
        n_deleted = n_masks = n_inserts = n_random = 0
        done, pending = 0, 0  # the next original index; masks since the last kept id
        for t in [*out.tolist(), None]:
            index = len(original) if t is None else where.get(t, -1)
            # <mask>, or a random token in its place (one that is also an id of the
            # document (1 in 500 here) is told by its place: behind the last kept id, or
            # after a deletion that no mask stands for)
            if index < done or (index > done and not pending and t is not None):
                pending += 1
                n_masks += 1
                n_random += t != MASK
                continue
            gap = index - done
            if gap:
                runs.append(gap)
            elif pending:
                n_inserts += pending
            n_deleted += gap
            done, pending = index + 1, 0
        deleted.append(n_deleted / len(original))
        masks.append(n_masks)
        inserts.append(n_inserts)
        randoms.append(n_random)
    return {"deleted": np.array(deleted), "masks": np.array(masks),
            "inserts": np.array(inserts), "randoms": np.array(randoms),
            "runs": np.array(runs)}


def _same_mean(a: np.ndarray, b: np.ndarray, what: str) -> None:
    """The two means differ by less than 4 standard errors of their difference."""
    error = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) < 4 * error, (what, a.mean(), b.mean(), error)


def test_text_infilling_is_distributed_as_fairseqs():
    from scipy import stats

    docs = _documents(full_stops=False)
    theirs, ours = (_read(noised, docs) for noised in _noised(docs, 0.3, 0.1, False))
    for key in ("deleted", "masks", "inserts", "randoms"):
        _same_mean(theirs[key], ours[key], key)
        print(f"{key}: fairseq {theirs[key].mean():.4f}, kbert {ours[key].mean():.4f}")
    print(f"deleted runs: fairseq {len(theirs['runs'])} of mean length "
          f"{theirs['runs'].mean():.3f}, kbert {len(ours['runs'])} of {ours['runs'].mean():.3f}")
    # The deleted share is under 0.3: spans overlap, and 0-length ones delete nothing.
    assert 0.26 < theirs["deleted"].mean() < 0.3 and 0.26 < ours["deleted"].mean() < 0.3
    assert theirs["inserts"].mean() > 0.1 and theirs["randoms"].sum() > 0
    # The lengths of the deleted runs (each span's tokens but its first, which became the
    # mask; overlapping spans merged): the same histogram (chi-square, lengths 1-12).
    bins = np.arange(1, 14)
    counts = np.array([np.histogram(np.minimum(x["runs"], 12), bins)[0]
                       for x in (theirs, ours)])
    print(f"run lengths 1-12: chi-square p {stats.chi2_contingency(counts).pvalue:.2f}")
    assert stats.chi2_contingency(counts).pvalue > 1e-3, counts


def test_sentence_permutation_is_distributed_as_fairseqs():
    """`permute_sentences` 1.0 (bart.large's) against kbert's permutation: the share of
    sentences left in place and of documents left as they were, within sampling error
    (each a uniform permutation of the document's sentences)."""
    docs = _documents(full_stops=True)
    theirs, ours = _noised(docs, 0.0, 0.0, True)
    for got in (theirs, ours):
        assert [sorted(x.tolist()) for x in got] == [
            sorted(np.concatenate(d).tolist()) for d in docs]  # every token kept

    def in_place(noised):
        share, unchanged = [], []
        for out, sentences in zip(noised, docs):
            starts = np.cumsum([0] + [len(s) for s in sentences[:-1]])
            same = [np.array_equal(out[a:a + len(s)], s) for a, s in zip(starts, sentences)]
            share.append(np.mean(same))
            unchanged.append(all(same))
        return np.array(share), np.array(unchanged, float)

    (share_f, unchanged_f), (share_k, unchanged_k) = in_place(theirs), in_place(ours)
    _same_mean(share_f, share_k, "sentences in place")
    _same_mean(unchanged_f, unchanged_k, "documents unchanged")
    assert 0.25 < share_f.mean() < 0.45  # about the mean of 1/k over 2-5 sentences
