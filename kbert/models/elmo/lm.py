"""Training ELMo's biLM as bilm-tf trains it, with `model.fit`.

Each sentence is read with its boundary words: `<S> w1 .. wn </S>`. The forward LM's
state at position t (t = 0..n) predicts the word at t + 1; the backward LM's state at
t (t = 1..n + 1) predicts the word at t - 1. Both directions share one softmax over a
word vocabulary (bilm-tf's `softmax/W` [V, P] and `softmax/b` [V], with its initializer).
The loss is the mean of the two directions' mean negative log-likelihoods per word, as
bilm-tf's `0.5 * (forward + backward)`. In training, a vocabulary larger than
`num_sampled` uses sampled softmax (`tf.nn.sampled_softmax_loss`, log-uniform sampling,
which assumes the vocabulary is sorted by frequency, as bilm-tf's vocabulary files are);
evaluation always uses the full softmax, so `model.evaluate`'s `perplexity` is the exact
perplexity exp(mean NLL of both directions). Dropout is bilm-tf's: on every LSTM's input
(in `ELMo.run_lms`) and on the top layer's outputs.

bilm-tf trained on a continuous stream cut into 20-word windows with the LSTM states
carried across batches; here each sentence (or a window of `max_words` words of a long
one) is a sequence of its own.
"""

from __future__ import annotations

import collections
import logging
import os

import keras
import numpy as np
import tensorflow as tf

from kbert.models.base import Wrapper
from kbert.models.elmo.bilm import ELMo
from kbert.models.metrics import TotalOverCount
from kbert.tokenizers.elmo import BOS_WORD, EOS_WORD

logger = logging.getLogger(__name__)

UNK_WORD = "<UNK>"
SPECIALS = (EOS_WORD, BOS_WORD, UNK_WORD)  # the first lines of bilm-tf's vocabulary files


class WordVocabulary:
    """bilm-tf's word vocabulary: one word a line, `</S>`, `<S>`, `<UNK>` among them
    (first, in the files this class writes), then the words by descending frequency."""

    def __init__(self, words: list[str], source: str = "the vocabulary"):
        index = {}
        for line, word in enumerate(words, 1):
            if not word or any(c.isspace() for c in word):
                raise ValueError(f"{source}, line {line}: {word!r} is not a word (empty or "
                                 "with whitespace)")
            if word in index:
                raise ValueError(f"{source}, line {line}: {word!r} repeats line "
                                 f"{index[word] + 1}")
            index[word] = line - 1
        missing = [w for w in SPECIALS if w not in index]
        if missing:
            raise ValueError(f"{source}: missing the special word(s) {missing}")
        self.words, self.index = list(words), index

    @property
    def size(self) -> int:
        return len(self.words)

    bos_id = property(lambda self: self.index[BOS_WORD])
    eos_id = property(lambda self: self.index[EOS_WORD])
    unk_id = property(lambda self: self.index[UNK_WORD])

    @classmethod
    def build(cls, texts, max_size: int | None = None, min_count: int = 1
              ) -> "WordVocabulary":
        """From whitespace-split texts: the specials, then words seen `min_count` times
        or more, by descending count (ties in first-seen order), at most `max_size`
        words in all."""
        counts = collections.Counter(w for t in texts for w in t.split())
        for w in SPECIALS:
            counts.pop(w, None)
        words = [w for w, n in counts.most_common() if n >= min_count]
        if max_size is not None:
            words = words[:max(0, max_size - len(SPECIALS))]
        return cls(list(SPECIALS) + words)

    @classmethod
    def read(cls, path: str) -> "WordVocabulary":
        with open(path, encoding="utf-8") as f:
            return cls([line.rstrip("\n") for line in f], source=path)

    def write(self, path: str) -> None:
        from kbert.io import atomic_file

        with atomic_file(path) as f:
            f.write("".join(w + "\n" for w in self.words))

    def table(self) -> tf.lookup.StaticHashTable:
        """word -> id (`<UNK>`'s for unknown words). Make it eagerly, outside the graphs
        that use it."""
        return tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(self.words),
                                                tf.range(self.size, dtype=tf.int32)),
            default_value=self.unk_id)


def split_windows(texts, max_words: int) -> list[str]:
    """Sentences of more than `max_words` words -> consecutive windows of that many
    (logged: each window is then read as a sentence); empty lines are left out."""
    out, long = [], 0
    for text in texts:
        words = text.split()
        if not words:
            continue
        long += len(words) > max_words
        out.extend(" ".join(words[i:i + max_words]) for i in range(0, len(words), max_words))
    if long:
        logger.warning("%d sentences longer than %d words were split into windows", long,
                       max_words)
    return out


def bilm_dataset(texts, tokenizer, vocab: WordVocabulary, batch_size: int,
                 max_words: int = 50, shuffle: bool = True, seed: int = 0,
                 repeat: bool = False) -> tf.data.Dataset:
    """Sentences -> batches of ({"char_ids", "padding_mask"}, {"word_ids"}), padded to
    the longest sentence of each batch (`word_ids` -1 on padding)."""
    texts = split_windows(texts, max_words)
    if not texts:
        raise ValueError("bilm_dataset: no sentence with words")
    ds = tf.data.Dataset.from_tensor_slices(tf.constant(texts))
    if shuffle:
        ds = ds.shuffle(len(texts), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()

    table = vocab.table()

    def encode(batch):
        words = tokenizer.split(batch)
        x = tokenizer(words)
        ids = tf.ragged.map_flat_values(table.lookup, words).to_tensor(-1)
        return x, {"word_ids": ids}

    return ds.batch(batch_size).map(encode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE)


@keras.saving.register_keras_serializable(package="kbert")
class ELMoLanguageModel(Wrapper, keras.Model):
    """ELMo's biLM with its training softmax (see the module docstring).

    Inputs: `ELMoCharTokenizer`'s dict; targets `{"word_ids": int [B, W]}` (-1 on
    padding), as `bilm_dataset` makes them. `model.compile(optimizer)` with no loss:
    the loss is the model's own. Metrics: `perplexity`, `forward_perplexity`,
    `backward_perplexity` (from the sampled loss in training, as bilm-tf reports it;
    exact in evaluation).

    Args:
        elmo: the `ELMo` to train (stateless).
        vocab_size: words in the softmax. bos_id, eos_id: the ids of `<S>` and `</S>`.
        num_sampled: negative samples per batch for sampled softmax in training (bilm-tf
            used 8192); 0, or a vocabulary no larger, trains with the full softmax.
    """

    def __init__(self, elmo: ELMo | dict, vocab_size: int, bos_id: int, eos_id: int,
                 num_sampled: int = 8192, **kwargs):
        super().__init__(**kwargs)
        if isinstance(elmo, dict):  # an ELMoConfig's fields
            elmo = ELMo(elmo)
        if elmo.stateful:
            raise ValueError("ELMoLanguageModel trains a stateless ELMo (stateful=False)")
        self.elmo = elmo
        self.vocab_size, self.bos_id, self.eos_id = int(vocab_size), int(bos_id), int(eos_id)
        self.num_sampled = int(num_sampled)
        self.output_dropout = keras.layers.Dropout(elmo.config.dropout, name="output_dropout")
        self.perplexity = TotalOverCount("perplexity", exp=True)
        self.forward_perplexity = TotalOverCount("forward_perplexity", exp=True)
        self.backward_perplexity = TotalOverCount("backward_perplexity", exp=True)

    def build(self, input_shape=None):
        c = self.elmo.config
        dim = min(c.projection_dim, c.lstm_dim)
        self.softmax_w = self.add_weight(
            name="softmax_W", shape=(self.vocab_size, dim), dtype="float32",
            autocast=False, initializer=keras.initializers.RandomNormal(0.0, 1.0 / np.sqrt(dim)))
        self.softmax_b = self.add_weight(name="softmax_b", shape=(self.vocab_size,),
                                         dtype="float32", initializer="zeros", autocast=False)
        self.elmo.ensure_built()
        self.built = True

    @property
    def metrics(self):
        mine = [self.perplexity, self.forward_perplexity, self.backward_perplexity]
        return [m for m in super().metrics if all(m is not n for n in mine)] + mine

    def call(self, inputs, training=None):
        """-> `forward`, `backward`: the top layer's states [B, T = W + 2, P] (with the
        boundary positions), `mask` bool [B, T]."""
        run = self.elmo.run_lms(inputs, training=training)
        return {"forward": self.output_dropout(run["forward"][-1], training=training),
                "backward": self.output_dropout(run["backward"][-1], training=training),
                "mask": run["mask"]}

    def logits(self, states):
        """Full-softmax scores [..., V] of states [..., P]."""
        return tf.matmul(tf.cast(states, tf.float32), self.softmax_w,
                         transpose_b=True) + self.softmax_b

    def targets(self, word_ids, mask):
        """Each direction's target ids [B, T] and where they count (bool [B, T])."""
        word_ids = tf.cast(word_ids, tf.int32)
        lengths = tf.reduce_sum(tf.cast(word_ids >= 0, tf.int32), axis=1)
        b, t = tf.shape(mask)[0], tf.shape(mask)[1]
        positions = tf.range(t)[None, :]
        pad = tf.fill([b, t - tf.shape(word_ids)[1] - 1], -1)
        # The sequence s_0 = <S>, s_1..s_n = words, s_{n+1} = </S>: [B, T].
        seq = tf.concat([tf.fill([b, 1], self.bos_id), word_ids, pad], axis=1)
        seq = tf.where(tf.equal(positions, (lengths + 1)[:, None]), self.eos_id, seq)
        forward = tf.concat([seq[:, 1:], tf.fill([b, 1], -1)], axis=1)  # s_{t+1}
        backward = tf.concat([tf.fill([b, 1], -1), seq[:, :-1]], axis=1)  # s_{t-1}
        last = lengths[:, None]
        return ((forward, positions <= last), (backward, (positions >= 1) & (
            positions <= last + 1)))

    def _nll(self, states, labels, valid, training):
        """Summed NLL over the valid positions, and their count."""
        p = tf.shape(states)[-1]
        h = tf.reshape(tf.cast(states, tf.float32), [-1, p])
        labels = tf.reshape(tf.where(valid, labels, 0), [-1])
        weight = tf.reshape(tf.cast(valid, tf.float32), [-1])
        if training and 0 < self.num_sampled < self.vocab_size:
            nll = tf.nn.sampled_softmax_loss(
                weights=self.softmax_w, biases=self.softmax_b,
                labels=tf.cast(labels[:, None], tf.int64), inputs=h,
                num_sampled=self.num_sampled, num_classes=self.vocab_size)
        else:
            nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                 logits=self.logits(h))
        return tf.reduce_sum(nll * weight), tf.reduce_sum(weight)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        (fwd, fwd_valid), (bwd, bwd_valid) = self.targets(y["word_ids"], y_pred["mask"])
        f_sum, count = self._nll(y_pred["forward"], fwd, fwd_valid, training)
        b_sum, _ = self._nll(y_pred["backward"], bwd, bwd_valid, training)
        self.forward_perplexity.update_state(f_sum, count)
        self.backward_perplexity.update_state(b_sum, count)
        self.perplexity.update_state(0.5 * (f_sum + b_sum), count)
        loss = 0.5 * (f_sum + b_sum) / tf.maximum(count, 1.0)
        if self.losses:
            loss += tf.add_n([tf.cast(v, tf.float32) for v in self.losses])
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        return loss / replicas if replicas > 1 else loss

    wrapped_key = "elmo"  # serialization (`Wrapper`): the biLM, whole

    def serialized_options(self) -> dict:
        return {"vocab_size": self.vocab_size, "bos_id": self.bos_id, "eos_id": self.eos_id,
                "num_sampled": self.num_sampled}

    def save_pretrained(self, path) -> None:
        """The biLM in bilm-tf's layout (`options.json`, `weights.hdf5`), as bilm-tf's
        `dump_weights` writes it: without the training softmax."""
        self.elmo.save_pretrained(os.fspath(path))
