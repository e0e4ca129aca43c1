"""Raw text -> entities with character spans, in Python (what the `ner` SavedModel
computes in-graph): the tokenizer's word split, windows, first-piece tags, conlleval
chunks, and code-point offsets into the input text."""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from kbert.tasks.common import char_offset_table
from kbert.tasks.ner.evaluate import chunks
from kbert.tasks.ner.features import convert_sentences, word_predictions


@dataclasses.dataclass
class Entity:
    text: str
    type: str
    start_char: int
    end_char: int


def split_text(tokenizer, texts: list[str]):
    """Each text's words (the tokenizer's BasicTokenizer split, original surface form)
    and their code-point spans."""
    _, starts, ends = tokenizer.split_words(tf.constant(texts))
    out = []
    for text, s, e in zip(texts, starts.to_list(), ends.to_list()):
        raw = text.encode("utf-8")
        char_of = char_offset_table(text)
        out.append([(raw[a:b].decode("utf-8"), int(char_of[a]), int(char_of[b]))
                    for a, b in zip(s, e)])
    return out


def predict_entities(model, tokenizer, texts: list[str], labels: list[str],
                     max_seq_length: int = 128, batch_size: int = 64) -> list[list[Entity]]:
    """Entities of each text: `text[e.start_char:e.end_char] == e.text`."""
    words = split_text(tokenizer, texts)
    features = convert_sentences([[w for w, _, _ in ws] for ws in words], tokenizer,
                                 max_seq_length)
    logits = model.predict(features.inputs(), batch_size=batch_size, verbose=0)["logits"]
    tags = word_predictions(features, np.argmax(logits, axis=-1), labels)
    out = []
    for text, ws, ts in zip(texts, words, tags):
        found = []
        for kind, i, j in chunks(ts):
            start, end = ws[i][1], ws[j][2]
            found.append(Entity(text[start:end], kind, start, end))
        out.append(found)
    return out
