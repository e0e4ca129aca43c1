"""Dynamic masking in-graph: over 100k tokens the shares of chosen, [MASK], random and
kept tokens are within 1 point of 15% / 80 / 10 / 10; special tokens and padding are
never chosen; whole words are chosen whole; the outputs are BertPretrainer's features."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from kbert.tokenizers.masking import DynamicMasking

VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(2000)]
         + [f"##p{i}" for i in range(200)])
SPECIAL = {0, 1, 2, 3, 4}


def _batch(rng, rows=64, seq=128, pieces=False):
    ids = rng.integers(5, 2005, (rows, seq)).astype("int32")
    if pieces:
        ids = np.where(rng.random((rows, seq)) < 0.3, rng.integers(2005, 2205, (rows, seq)), ids)
    lengths = rng.integers(20, seq + 1, rows)
    mask = (np.arange(seq)[None] < lengths[:, None]).astype("int32")
    ids[:, 0] = 2
    ids[np.arange(rows), lengths - 1] = 3
    middle = lengths // 2
    ids[np.arange(rows), middle] = 3
    ids[rng.random((rows, seq)) < 0.01] = 1  # some [UNK]
    return ids * mask, mask


def test_statistics_over_100k_tokens():
    rng = np.random.default_rng(0)
    masking = DynamicMasking(VOCAB, max_predictions=40, seed=3)
    selectable = chosen = masked = kept = randomized = 0
    while selectable < 100_000:
        ids, mask = _batch(rng)
        out = masking({"token_ids": ids, "padding_mask": mask})
        pos, w = out["masked_lm_positions"].numpy(), out["masked_lm_weights"].numpy() > 0
        new = out["token_ids"].numpy()
        assert out["masked_lm_positions"].shape == (64, 40)
        for r in range(len(ids)):
            p = pos[r][w[r]]
            assert list(p) == sorted(p) and mask[r, p].all()
            assert not set(ids[r, p].tolist()) & SPECIAL  # never [CLS], [SEP], [UNK], padding
            np.testing.assert_array_equal(out["masked_lm_ids"].numpy()[r][w[r]], ids[r, p])
            untouched = np.setdiff1d(np.arange(ids.shape[1]), p)
            np.testing.assert_array_equal(new[r, untouched], ids[r, untouched])
            masked += int((new[r, p] == 4).sum())
            kept += int((new[r, p] == ids[r, p]).sum())
            randomized += int(((new[r, p] != 4) & (new[r, p] != ids[r, p])).sum())
        selectable += int(((mask > 0) & ~np.isin(ids, list(SPECIAL))).sum())
        chosen += int(w.sum())
    assert abs(chosen / selectable - 0.15) < 0.01, chosen / selectable
    # A random id can equal the original (1 in 2205): "kept" holds those few too.
    for share, want in ((masked, 0.8), (randomized, 0.1), (kept, 0.1)):
        assert abs(share / chosen - want) < 0.01, (share / chosen, want)


@pytest.mark.parametrize("seed", range(5))
def test_whole_words_are_chosen_whole(seed):
    rng = np.random.default_rng(seed)
    masking = DynamicMasking(VOCAB, max_predictions=20, whole_word=True, seed=seed)
    ids, mask = _batch(rng, rows=16, seq=48, pieces=True)
    out = masking({"token_ids": ids, "padding_mask": mask})
    w = out["masked_lm_weights"].numpy() > 0
    for r in range(len(ids)):
        chosen = set(out["masked_lm_positions"].numpy()[r][w[r]].tolist())
        n = int(((mask[r] > 0) & ~np.isin(ids[r], list(SPECIAL))).sum())
        assert 1 <= len(chosen) <= min(20, round(0.15 * n))
        words, current = [], []
        for i in range(int(mask[r].sum())):
            token = VOCAB[ids[r, i]]
            if ids[r, i] in SPECIAL:
                current = []
                continue
            if token.startswith("##") and current:
                current.append(i)
            else:
                current = [i]
                words.append(current)
        for word in words:
            assert set(word) <= chosen or not set(word) & chosen, (word, chosen)


def test_in_a_dataset_pipeline_and_no_mask_token():
    ids, mask = _batch(np.random.default_rng(1), rows=8, seq=32)
    masking = DynamicMasking(VOCAB, max_predictions=6, seed=5)
    ds = tf.data.Dataset.from_tensor_slices({"token_ids": ids, "padding_mask": mask,
                                             "segment_ids": np.zeros_like(ids)}).batch(4)
    # Masked after repeat (as the pretraining pipeline does): each epoch new masks.
    batches = [b["masked_lm_positions"].numpy() for b in ds.repeat(2).map(masking)]
    first, again = batches[:2], batches[2:]
    assert first[0].shape == (4, 6) and "segment_ids" in next(iter(ds.map(masking)))
    assert any((a != b).any() for a, b in zip(first, again))
    # The same seed, the same masks: a resumed run sees what it saw.
    replay = [b["masked_lm_positions"].numpy() for b in ds.repeat(2).map(masking)]
    assert all((a == b).all() for a, b in zip(batches, replay))
    with pytest.raises(ValueError, match="no \\[MASK\\] token"):
        DynamicMasking(["[PAD]", "[CLS]", "a"])
