"""GPT-1's tokenizer in-graph: BERT's basic tokenization (lower case, accents
stripped, punctuation and CJK characters apart), then a character-level BPE whose
word-final symbols end in `</w>`, as Hugging Face's `OpenAIGPTTokenizer` computes it
without ftfy and spaCy (OpenAI's original code cleaned text with ftfy and split it with
spaCy; Hugging Face falls back to BERT's basic tokenizer, and so does kbert).

The basic tokenization is `BertTokenizer`'s, which follows Google's `tokenization.py`;
Hugging Face's Rust `BertNormalizer` differs from it on private-use code points, which it
deletes (see docs/fidelity.md). Symbols that are not in the vocabulary become `<unk>`.
"""

from __future__ import annotations

import os

import tensorflow as tf

from kbert import hub
from kbert.io import read_json
from kbert.tokenizers.base import Held, Tokenizer
from kbert.tokenizers.bert import BertTokenizer
from kbert.tokenizers.bpe import HeldBpe, MergeTable, bpe_assets, merge_rounds
from kbert.tokenizers.task_tokens import TaskTokens, read_pair_format
from kbert.tokenizers.packing import pack_decoder

WORD_END = "</w>"


class GPT1Tokenizer(HeldBpe, TaskTokens, Tokenizer):
    """GPT-1's BPE (see the module docstring).

    Args:
        vocabulary: token -> id (`vocab.json`: 40,478 tokens for openai-gpt), or its path.
        merges: pairs in rank order (`merges.txt`), or its path.
        unk_token: the id of symbols outside the vocabulary.
        seq_length: length `__call__` packs to.
        pair_format: with the task tokens in the vocabulary (`with_task_tokens`; ids
            40,478 to 40,480 for openai-gpt, as OpenAI's finetune-transformer-lm appends
            them), how `__call__` packs pairs: "entailment" or "similarity"
            (`kbert.tokenizers.task_tokens.TaskTokens`).
    """

    family = "gpt"
    tasks = frozenset({"glue", "pretrain"})

    def __init__(self, vocabulary, merges, unk_token: str = "<unk>", seq_length: int = 512,
                 pair_format: str = "entailment", name: str | None = None):
        super().__init__(name=name)
        self.hold(vocabulary, merges)
        if unk_token not in self._vocabulary:
            raise ValueError(f"GPT1Tokenizer vocabulary lacks the unknown token {unk_token!r}")
        self.unk_token = unk_token
        self.unk_id = self._vocabulary[unk_token]
        self.seq_length = int(seq_length)
        self.end_token_id = None
        self._set_task_tokens(self._vocabulary, pair_format)
        self._basic = BertTokenizer(["[UNK]", "[CLS]", "[SEP]"], lowercase=True)
        ordered = sorted(self._vocabulary.items(), key=lambda kv: kv[1])
        self._merge_table = MergeTable(self._vocabulary, self._merges)
        strings = [""] * (max(self._vocabulary.values()) + 1)
        for token, i in ordered:
            strings[i] = token
        self._id_to_token = tf.constant(strings)
        self._eager = Held(tokenize=tf.function(
            self._tokenize, input_signature=[tf.TensorSpec([None], tf.string)],
            autograph=False))

    @property
    def vocab_size(self) -> int:
        return len(self._vocabulary)

    @property
    def pad_id(self) -> int:
        return self.unk_id

    def _tokenize(self, texts):
        words, _, _ = self._basic.split_words(texts)  # (B, (W)), lower-cased
        # Each distinct word is merged once, then gathered back to every word.
        distinct, index = tf.unique(words.flat_values)  # (U,), (W,)
        chars = tf.strings.unicode_split(distinct, "UTF-8")  # (U, (C))
        flat = chars.flat_values
        last = tf.not_equal(chars.value_rowids(),
                            tf.concat([chars.value_rowids()[1:], [-1]], 0))
        symbols = tf.where(last, tf.strings.join([flat, WORD_END]), flat)
        table = self._merge_table
        merged = merge_rounds(table, chars.value_rowids(), table.symbol_ids.lookup(symbols),
                              tf.shape(distinct, tf.int64)[0])
        # Symbols outside the vocabulary (never in a merge, or made only by merges) are
        # the unknown token.
        flat = merged.flat_values
        flat = tf.where((flat < 0) | (flat >= table.vocab_end), self.unk_id, flat)
        ids = tf.gather(merged.with_flat_values(flat), index)
        return tf.RaggedTensor.from_row_splits(ids, words.row_splits,
                                               validate=False).merge_dims(1, 2)

    def detokenize(self, ids) -> tf.Tensor:
        """Tokens joined, `</w>` read as a space (the lower-cased, split text)."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        tokens = tf.gather(self._id_to_token, tf.cast(ids, tf.int32))
        text = tf.strings.reduce_join(tokens, axis=-1)
        return tf.strings.strip(tf.strings.regex_replace(text, "</w>", " "))

    def __call__(self, texts, texts_b=None, seq_length: int | None = None) -> dict:
        """`token_ids` and `padding_mask`, int32 [batch, seq_length], right-padded and cut
        to `seq_length` tokens. With the task tokens (`with_task_tokens`), the GPT
        paper's fine-tuning formats, pairs cut longest-first."""
        seq_length = int(seq_length or self.seq_length)
        texts = self.as_batch(texts)
        self._check_pair_call(texts_b, seq_length)
        if self.task_token_ids is not None:
            texts_b = None if texts_b is None else self.as_batch(texts_b, "texts_b")
            return self._encode_task(texts, texts_b, seq_length)
        return pack_decoder(self.tokenize(texts), seq_length, pad_id=self.pad_id)

    def _with_vocabulary(self, vocabulary, pair_format) -> "GPT1Tokenizer":
        return GPT1Tokenizer(vocabulary, self._merges, unk_token=self.unk_token,
                             seq_length=self.seq_length, pair_format=pair_format)

    @staticmethod
    def folder_has_files(path) -> bool:
        path = os.fspath(path)
        return os.path.exists(os.path.join(path, "vocab.json")) and os.path.exists(
            os.path.join(path, "merges.txt"))

    @classmethod
    def from_pretrained(cls, path, **kwargs) -> "GPT1Tokenizer":
        """A Hugging Face `openai-gpt` folder (`vocab.json`, `merges.txt`)."""
        path = hub.resolve(path)
        if not cls.folder_has_files(path):
            raise FileNotFoundError(f"{path}: no vocab.json + merges.txt")
        file = os.path.join(path, "tokenizer_config.json")
        saved = cls.saved_seq_length(read_json(file)) if os.path.exists(file) else {}
        return cls(os.path.join(path, "vocab.json"), os.path.join(path, "merges.txt"),
                   **{**read_pair_format(path), **saved, **kwargs})

    def assets(self) -> dict[str, str]:
        return bpe_assets(self._vocabulary, self._merges)

    def config(self) -> dict:
        return {"tokenizer_class": "GPT1Tokenizer", "unk_token": self.unk_token,
                "model_max_length": self.seq_length, "pair_format": self.pair_format}
