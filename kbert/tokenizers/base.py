"""The base of kbert's in-graph tokenizers (WordPiece, byte-level BPE, characters).

Every tokenizer takes `tf.string [batch]` and works eagerly, in `tf.data` and inside
exported SavedModels. Tokenizing (text -> ids) is apart from packing (ids -> the
model's fixed-length input dict, `kbert.tokenizers.packing`).
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from kbert.io import atomic_file


class Held:
    """Python containers kept on a tokenizer (a `tf.Module`) outside TensorFlow's object
    tracking: a 50,000-entry vocabulary dict assigned to a tf.Module attribute is wrapped
    entry by entry (about a second for GPT-2's), and nothing of it is saved by a
    SavedModel (the tables built from it are)."""

    def __init__(self, **values):
        self.__dict__.update(values)


class Tokenizer(tf.Module):
    """Interface of kbert's tokenizers.

    Subclasses implement `tokenize`, `detokenize`, `__call__` (tokenize and pack into
    the model's inputs), `vocab_size`, `assets` and `config`; `tokenize_with_offsets`
    where the model's tasks need character spans.

    `tasks`: the task commands a model with this tokenizer can run (SQuAD needs
    character offsets; NER needs words aligned with tokens); a command refuses a folder
    whose tokenizer does not list its task, with one line, before any work.
    `exports`: the SavedModel signatures (`python -m kbert.export --task`) whose in-graph
    input preparation works with this tokenizer.
    `family`: the registry name of the model family the tokenizer belongs to.
    `special_tokens`: how many special tokens `__call__` adds to one text and to a pair
    (the command lines check `--max_seq_length` leaves room for a token besides them).
    """

    family: str = ""
    tasks: frozenset = frozenset({"glue"})
    exports: frozenset = frozenset({"classifier", "embeddings"})
    special_tokens: tuple[int, int] = (2, 3)

    def tokenize(self, texts) -> tf.RaggedTensor:
        """int RaggedTensor [batch_size, (tokens)] of ids, no special tokens."""
        raise NotImplementedError

    def tokenize_with_offsets(self, texts):
        """(ids, starts, ends): RaggedTensors [batch_size, (tokens)], byte offsets of each
        token in the UTF-8 input."""
        raise NotImplementedError(f"{type(self).__name__} gives no offsets")

    def detokenize(self, ids) -> tf.Tensor:
        """tf.string [batch_size] from ids [batch_size, (tokens)]."""
        raise NotImplementedError

    def __call__(self, texts, texts_b=None, seq_length: int | None = None) -> dict:
        """The model's input dict for a batch of texts (and second texts of pairs)."""
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    @property
    def supports_pairs(self) -> bool:
        """Whether `__call__` takes `texts_b`."""
        return False

    def assets(self) -> dict[str, str]:
        """File name -> text: the files that define the tokenizer (WordPiece
        `vocab.txt`; BPE `vocab.json` and `merges.txt`; none for characters). Written
        by `save_pretrained` and into a SavedModel's `assets/`."""
        return {}

    def config(self) -> dict:
        """Settings written to `tokenizer_config.json` besides the assets."""
        return {"tokenizer_class": type(self).__name__}

    def save_pretrained(self, path: str | os.PathLike) -> None:
        """Writes `assets()` and `tokenizer_config.json` into `path`, each atomically."""
        path = os.fspath(path)
        for name, text in self.assets().items():
            with atomic_file(os.path.join(path, name)) as f:
                f.write(text)
        with atomic_file(os.path.join(path, "tokenizer_config.json")) as f:
            json.dump(self.config(), f, indent=2)

    @staticmethod
    def as_batch(texts, name: str = "texts") -> tf.Tensor:
        """A 1-D tf.string Tensor [batch] from a list of str or a Tensor."""
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank != 1:
            raise ValueError(f"{name}: a tokenizer takes a batch, a 1-D tf.string tensor "
                             f"[batch], got shape {texts.shape}")
        return texts
