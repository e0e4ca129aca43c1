"""Dynamic masking for a masked LM, in-graph: new masks for every batch (RoBERTa's
way), instead of the fixed masks BERT's `create_data` writes. BERT's WordPiece
vocabulary (`DynamicMasking(vocabulary)`) and any tokenizer with a mask token
(`DynamicMasking.for_tokenizer`, RoBERTa's) use it.

Per row, of the selectable tokens (real tokens that are not special: [CLS], [SEP],
[PAD], [MASK], [UNK] are never chosen), `round(rate * n)` (at least one, at most
`max_predictions`) are chosen at random, as Google's `create_pretraining_data.py`
counts them; with `whole_word`, a word's `##` pieces are chosen together and a word that would
go over the count is skipped for the next ones, as in Google's script. The chosen tokens' new values come from
tensorflow-text's `MaskValuesChooser`: 80% `[MASK]`, 10% a random vocabulary id, 10%
unchanged. The outputs are the features `BertPretrainer` reads:
`masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` ([B, max_predictions],
ascending positions, weight 0 on the padding predictions).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class DynamicMasking:
    """Callable on a batch dict with `token_ids` and `padding_mask` [B, S] (other keys
    pass through); returns it with the masked `token_ids` and the three masked-LM
    features.

    Args:
        vocabulary: the WordPiece vocabulary (its `##` pieces mark word continuations;
            [PAD], [UNK], [CLS], [SEP], [MASK] are the special tokens).
        max_predictions: predictions a row, at most (`max_predictions_per_seq`).
        rate: the share of selectable tokens to predict (0.15).
        whole_word: choose whole words.
        seed: an op seed for the random draws (with a global seed, a fixed sequence).
    """

    def __init__(self, vocabulary: list[str] | None, max_predictions: int = 20,
                 rate: float = 0.15, whole_word: bool = False, seed: int | None = None, *,
                 mask_id: int | None = None, special_ids=(), vocab_size: int | None = None):
        import tensorflow_text as tf_text

        if vocabulary is not None:
            if "[MASK]" not in vocabulary:
                raise ValueError("dynamic masking: the vocabulary has no [MASK] token")
            vocab_size, mask_id = len(vocabulary), vocabulary.index("[MASK]")
            special_ids = [vocabulary.index(t) for t in SPECIAL_TOKENS if t in vocabulary]
            continuation = np.array([t.startswith("##") for t in vocabulary])
        else:
            if mask_id is None or vocab_size is None:
                raise ValueError("dynamic masking: give a WordPiece vocabulary, or mask_id "
                                 "and vocab_size")
            if whole_word:
                raise ValueError("whole-word masking needs a WordPiece vocabulary (its ## "
                                 "pieces)")
            continuation = np.zeros(vocab_size, bool)
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"masked_lm_prob={rate}: must be in (0, 1]")
        self.vocab_size, self.mask_id = int(vocab_size), int(mask_id)
        self.max_predictions, self.rate = int(max_predictions), float(rate)
        self.whole_word, self.seed = bool(whole_word), seed
        self.special_ids = tf.constant(sorted(set(special_ids) | {self.mask_id}), tf.int32)
        self.continuation = tf.constant(continuation)
        self.chooser = tf_text.MaskValuesChooser(self.vocab_size, self.mask_id, 0.8, 0.1)

    @classmethod
    def for_tokenizer(cls, tokenizer, max_predictions: int = 20, rate: float = 0.15,
                      seed: int | None = None) -> "DynamicMasking":
        """Masking for a tokenizer with a mask token and special ids (`cls_id`,
        `sep_id`, `pad_id`, `unk_id`, `mask_id`): never chosen; random replacements
        drawn from the whole vocabulary."""
        specials = [getattr(tokenizer, name) for name in ("cls_id", "sep_id", "pad_id",
                                                           "unk_id")]
        return cls(None, max_predictions, rate, seed=seed, mask_id=tokenizer.mask_id,
                   special_ids=specials, vocab_size=tokenizer.vocab_size)

    def select(self, token_ids, padding_mask):
        """bool [B, S]: the positions chosen for prediction."""
        ids = tf.cast(token_ids, tf.int32)
        b, s = tf.shape(ids)[0], tf.shape(ids)[1]
        real = tf.cast(padding_mask, tf.bool)
        special = tf.reduce_any(ids[:, :, None] == self.special_ids[None, None, :], axis=-1)
        selectable = real & ~special
        count = tf.reduce_sum(tf.cast(selectable, tf.float32), axis=1)
        budget = tf.maximum(tf.round(count * self.rate), tf.minimum(count, 1.0))
        budget = tf.cast(tf.minimum(budget, float(self.max_predictions)), tf.int32)  # (B,)
        scores = tf.random.uniform([b, s], seed=self.seed)
        if self.whole_word:
            # A word: a selectable token that is not a ## piece, or is one right after a
            # token that is not selectable (as Google's code, which only asks whether a
            # candidate exists), and the ## pieces after it. Its pieces take its score.
            piece = tf.gather(self.continuation, ids)
            start = selectable & ~(piece & _after(selectable))
            word = tf.cumsum(tf.cast(start, tf.int32), axis=1)  # (B, S), 1-based in a row
            segment = word + tf.range(b)[:, None] * (s + 1)
            segments = b * (s + 1)
            word_score = tf.math.unsorted_segment_max(tf.where(start, scores, -1.0), segment,
                                                      segments)
            scores = tf.gather(word_score, segment)
            length = tf.gather(tf.math.unsorted_segment_sum(
                tf.cast(selectable, tf.int32), segment, segments), segment)
            first = tf.gather(tf.math.unsorted_segment_min(
                tf.where(selectable, tf.range(s)[None, :] + 0 * segment, s), segment,
                segments), segment)
            rank = tf.range(s)[None, :] - first  # the piece's place in its word
        else:
            length, rank = tf.ones_like(ids), tf.zeros_like(ids)
        scores = tf.where(selectable, scores, -1.0)
        # Tokens by descending score (a word's pieces stay together, in order). Walk
        # them once, as Google's loop: a word is kept when all its pieces fit what is
        # left of the budget, else skipped for the next ones.
        order = tf.argsort(scores, axis=1, direction="DESCENDING", stable=True)
        ranked = tf.transpose(tf.gather(selectable, order, batch_dims=1))  # (S, B)
        ranks = tf.transpose(tf.gather(rank, order, batch_dims=1))
        lengths = tf.transpose(tf.gather(length, order, batch_dims=1))

        def step(state, x):
            count, keeping = state
            real, piece_rank, word_length = x
            first = real & tf.equal(piece_rank, 0)
            fits = count + word_length <= budget
            keeping = tf.where(first, fits, keeping) & real
            count = count + tf.where(first & fits, word_length, 0)
            return count, keeping

        _, kept = tf.scan(step, (ranked, ranks, lengths),
                          initializer=(tf.zeros([b], tf.int32), tf.zeros([b], tf.bool)))
        keep = tf.transpose(kept)
        return tf.gather(keep, tf.argsort(order, axis=1), batch_dims=1)

    def __call__(self, features: dict) -> dict:
        ids = tf.cast(features["token_ids"], tf.int32)
        chosen = self.select(ids, features["padding_mask"])
        values = self.chooser.get_mask_values(tf.RaggedTensor.from_tensor(ids))
        new_ids = tf.where(chosen, tf.cast(values.to_tensor(), tf.int32), ids)
        seq = tf.shape(ids)[1]
        positions = tf.argsort(tf.where(chosen, tf.range(seq)[None, :], seq + tf.range(seq)),
                               axis=1)[:, :self.max_predictions]
        short = self.max_predictions - tf.shape(positions)[1]  # rows shorter than P
        positions = tf.pad(positions, [[0, 0], [0, short]])
        chosen = tf.pad(chosen, [[0, 0], [0, short]])
        weights = tf.gather(chosen, positions, batch_dims=1)
        positions = tf.where(weights, positions, 0)
        out = dict(features)
        out["token_ids"] = new_ids
        out["masked_lm_positions"] = positions
        out["masked_lm_ids"] = tf.where(weights, tf.gather(ids, positions, batch_dims=1), 0)
        out["masked_lm_weights"] = tf.cast(weights, tf.float32)
        return out


def _after(mask):
    """mask shifted right by one (False at position 0): "the previous token is in"."""
    return tf.concat([tf.zeros_like(mask[:, :1]), mask[:, :-1]], axis=1)
