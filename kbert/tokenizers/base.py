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
    SavedModel (the tables built from it are). The compiled functions of eager calls
    (`self._eager`) are held so too: a `tf.function` attribute of a tracked object is
    traced again by `tf.saved_model.save` and written into every export, which never
    calls it (its signatures trace the graph code itself)."""

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
        """int RaggedTensor [batch_size, (tokens)] of ids, no special tokens. Default: the
        subclass's graph code `_tokenize(texts)`, an eager call through its compiled
        function `self._eager.tokenize` (one call instead of dozens of eager ops)."""
        texts = self.as_batch(texts)
        if tf.executing_eagerly():
            return self._eager.tokenize(texts)
        return self._tokenize(texts)

    def tokenize_with_offsets(self, texts):
        """(ids, starts, ends): RaggedTensors [batch_size, (tokens)], byte offsets of each
        token in the UTF-8 input."""
        raise NotImplementedError(f"{type(self).__name__} gives no offsets")

    def detokenize(self, ids) -> tf.Tensor:
        """tf.string [batch_size] from ids [batch_size, (tokens)]."""
        raise NotImplementedError

    # The packer and the tokens the span, word and fill-mask tasks and their exports use
    # (`tasks` says which a tokenizer supports).
    def pack_segments(self, segments, seq_length: int | None = None):
        """(inputs, layout) for 1 or 2 segments of ids (RaggedTensors [batch, (tokens)]),
        in the family's layout and truncation (`kbert.tokenizers.packing.pack_segments`):
        the model's input dict, and `segment_start`, `segment_length` [batch, segments],
        `special_mask` [batch, seq_length], `null_position` [batch]."""
        raise NotImplementedError(f"{type(self).__name__} has no packer")

    def tokenize_words(self, words) -> tf.RaggedTensor:
        """Ids of words tokenized one by one, as a word of a pre-split sentence (NER's
        words): int RaggedTensor [words, (tokens)]. Default: `tokenize`; a tokenizer
        whose tokens carry the space before a word (byte-level BPE) tokenizes each as if
        a space came before it, as Hugging Face's `is_split_into_words=True` with
        `add_prefix_space=True` does."""
        return self.tokenize(words)

    def split_words(self, texts):
        """tf.string [batch] -> (words, starts, ends), RaggedTensors [batch, (words)]:
        the words the tokenizer tokenizes apart (NER aligns tags with them) and their
        byte offsets in the input."""
        raise NotImplementedError(f"{type(self).__name__} does not split words")

    # Whether `tokenize` reads special-token strings written in a text as those tokens.
    special_tokens_in_text: bool = False

    def token_strings(self) -> list[str]:
        """The text each id stands for, by id (what the fill_mask export returns)."""
        raise NotImplementedError(f"{type(self).__name__} lists no token strings")

    # The masked-LM token as written in a text (`[MASK]`, `<mask>`) and its id, and the
    # unknown token's id; None where the tokenizer has none.
    mask_token: str | None = None
    mask_id: int | None = None
    unk_id: int | None = None

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

    @staticmethod
    def saved_seq_length(config: dict) -> dict:
        """{"seq_length": n} of a `tokenizer_config.json`'s `model_max_length` (the
        length it was saved with), or {} where it records none (Hugging Face writes a
        huge number for "no limit")."""
        length = config.get("model_max_length") if isinstance(config, dict) else None
        if isinstance(length, int) and not isinstance(length, bool) and 0 < length < 10 ** 6:
            return {"seq_length": length}
        return {}

    def fit_positions(self, positions: int | None, model: str) -> None:
        """Cuts `seq_length` to a model's `positions`, with a warning naming both, where
        it is longer (a tokenizer saved for a longer model would fail at the first call
        instead)."""
        if positions is not None and getattr(self, "seq_length", 0) > positions:
            import logging

            logging.getLogger("kbert").warning(
                "%s: the tokenizer's length %d is longer than the model's %d positions; "
                "it packs to %d", model, self.seq_length, positions, positions)
            self.seq_length = int(positions)

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
