"""toyfam's tokenizer: words and punctuation marks (with their byte offsets), each
hashed to one of `buckets` ids after the four specials; BERT's pair layout."""

import tensorflow as tf
import tensorflow_text as tf_text

from kbert.tokenizers import packing
from kbert.tokenizers.base import Tokenizer

PAD, CLS, SEP, UNK = 0, 1, 2, 3


class ToyTokenizer(Tokenizer):
    family = "toyfam"
    tasks = frozenset({"glue", "squad"})
    exports = frozenset({"classifier", "embeddings", "squad"})

    def __init__(self, buckets: int = 1024, seq_length: int = 128, lowercase: bool = True):
        super().__init__(name="toy_tokenizer")
        self.buckets, self.seq_length, self.lowercase = int(buckets), int(seq_length), lowercase

    @property
    def vocab_size(self) -> int:
        return self.buckets + 4

    @property
    def supports_pairs(self) -> bool:
        return True

    pad_id, cls_id, sep_id, unk_id = PAD, CLS, SEP, UNK

    def tokenize_with_offsets(self, texts):
        words, starts, ends = tf_text.regex_split_with_offsets(
            self.as_batch(texts), r"\s+|[^\w\s]", r"[^\w\s]")
        if self.lowercase:
            words = tf.strings.lower(words)
        ids = tf.strings.to_hash_bucket_fast(words, self.buckets) + 4
        return ids, starts, ends

    def tokenize(self, texts):
        return self.tokenize_with_offsets(texts)[0]

    def pack_segments(self, segments, seq_length=None):
        return packing.pack_segments(
            segments, self.seq_length if seq_length is None else seq_length,
            start=(CLS,), between=(SEP,), end=(SEP,), pad_id=PAD)

    def __call__(self, texts, texts_b=None, seq_length=None):
        segments = [self.tokenize(texts)]
        if texts_b is not None:
            segments.append(self.tokenize(texts_b))
        return self.pack_segments(segments, seq_length)[0]

    def config(self):
        return {"tokenizer_class": "ToyTokenizer", "buckets": self.buckets,
                "seq_length": self.seq_length, "lowercase": self.lowercase}

    @classmethod
    def from_pretrained(cls, path, seq_length=None, lowercase=None, **_):
        import os

        from kbert.io import read_json

        d = read_json(os.path.join(path, "tokenizer_config.json"))
        return cls(d["buckets"], seq_length or d["seq_length"],
                   d["lowercase"] if lowercase is None else lowercase)
