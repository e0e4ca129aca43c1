"""NER as TF graph ops: raw text -> words -> windows -> tags -> entities with spans.

The same steps as `kbert.tasks.ner.predict_entities`: the tokenizer's word split with
byte offsets, WordPiece per word ([UNK] for a word with none), consecutive windows of
`seq_length` less the packer's special tokens pieces, the tag of each word's first piece, conlleval's chunk rules,
and byte -> code-point offsets, so that `text[start_char:end_char] == entity_text`.
"""

from __future__ import annotations

import tensorflow as tf

from kbert.export import guards
from kbert.export import ops as ops_lib
from kbert.export.base import SAMPLE_TEXTS, ServingModule, check_seq_length, save_export
from kbert.tokenizers.strings import byte_slices, char_offsets

_PREFIX = {"O": 0, "B": 1, "I": 2, "E": 3, "S": 4}


def ner_windows(tokenizer, text, seq_length: int):
    """Encoder inputs [num_windows, seq_length] and, per word, its first piece's
    window row and position, and its byte span (RaggedTensors [batch, (words)])."""
    _, w_start, w_end = tokenizer.split_words(text)
    n_words = w_start.row_lengths()
    surface = byte_slices(text, w_start.value_rowids(), w_start.flat_values,
                          w_end.flat_values)
    pieces = tf.cast(tokenizer.tokenize_words(surface), tf.int64)  # [words, (pieces)]
    n = tf.shape(surface, out_type=tf.int64)[0]
    unk = tf.RaggedTensor.from_row_lengths(
        tf.fill([n], tf.constant(tokenizer.unk_id, tf.int64)), tf.ones([n], tf.int64),
        validate=False)
    pick = tf.where(pieces.row_lengths() > 0, tf.range(n), tf.range(n) + n)
    pieces = tf.gather(tf.concat([pieces, unk], axis=0), pick)
    per_text = w_start.with_flat_values(pieces).merge_dims(1, 2)  # [batch, (pieces)]
    word_first = (tf.cumsum(pieces.row_lengths(), exclusive=True)
                  - tf.repeat(per_text.row_starts(), n_words))
    width = seq_length - tokenizer.special_tokens[0]
    n_pieces = per_text.row_lengths()
    n_windows = tf.maximum((n_pieces + width - 1) // width, 1)
    example = tf.repeat(tf.range(tf.shape(text, out_type=tf.int64)[0]), n_windows)
    start = tf.ragged.range(n_windows).flat_values * width
    length = tf.clip_by_value(tf.gather(n_pieces, example) - start, 0, width)
    first = tf.gather(per_text.row_starts(), example) + start
    slices = tf.gather(per_text.flat_values, tf.ragged.range(first, first + length))
    inputs, layout = tokenizer.pack_segments([slices], seq_length)
    word_row = tf.repeat(tf.cumsum(n_windows, exclusive=True), n_words) + word_first // width
    # A word's first piece sits where the packer put the window's pieces, plus its place.
    word_pos = word_first % width + tf.gather(layout["segment_start"][:, 0], word_row)
    info = {"word_row": word_row, "word_pos": word_pos, "byte_start": w_start,
            "byte_end": w_end}
    return inputs, info


def ner_entities(tag_ids, info, text, labels: list[str]) -> dict:
    """Words' tags (from per-position ids [num_windows, seq]) -> conlleval chunks ->
    padded entity tensors."""
    types = sorted({label[2:] for label in labels if label != "O"})
    prefixes = tf.constant([0 if label == "O" else _PREFIX[label[0]] for label in labels],
                           tf.int32)
    kinds = tf.constant([-1 if label == "O" else types.index(label[2:]) for label in labels],
                        tf.int32)
    tag = tf.gather_nd(tag_ids, tf.stack([info["word_row"], info["word_pos"]], axis=1))
    prefix, kind = tf.gather(prefixes, tag), tf.gather(kinds, tag)
    rows = info["byte_start"].row_lengths()
    is_first = tf.ragged.range(rows).flat_values == 0
    prev_prefix = tf.where(is_first, 0, tf.concat([[0], prefix[:-1]], 0))
    prev_kind = tf.where(is_first, -1, tf.concat([[-1], kind[:-1]], 0))
    o, b, i, e, s = 0, 1, 2, 3, 4
    starts = (prefix == b) | (prefix == s) | (
        ((prefix == i) | (prefix == e))
        & ((prev_prefix == o) | (prev_prefix == e) | (prev_prefix == s) | (prev_kind != kind)))
    # Every non-O word that does not open a chunk continues the open one (conlleval).
    n_chunks = tf.reduce_sum(tf.cast(starts, tf.int64))
    seg = tf.where(prefix != o, tf.cumsum(tf.cast(starts, tf.int64)) - 1, n_chunks)
    first_byte = tf.math.unsorted_segment_min(info["byte_start"].flat_values, seg,
                                              n_chunks + 1)[:n_chunks]
    last_byte = tf.math.unsorted_segment_max(info["byte_end"].flat_values, seg,
                                             n_chunks + 1)[:n_chunks]
    batch = tf.shape(text, out_type=tf.int64)[0]
    chunk_row = tf.boolean_mask(tf.repeat(tf.range(batch), rows), starts)
    # Each text read once (not copied per entity): memory linear in the text.
    entity_text = byte_slices(text, chunk_row, first_byte, last_byte)
    entity_type = tf.gather(tf.constant(types + [""]), tf.boolean_mask(kind, starts))
    start_char = char_offsets(text, chunk_row, first_byte)
    end_char = char_offsets(text, chunk_row, last_byte)

    def pad(values, default):
        return tf.RaggedTensor.from_value_rowids(values, chunk_row, nrows=batch,
                                                 validate=False).to_tensor(default)

    return {"entity_text": pad(entity_text, ""), "entity_type": pad(entity_type, ""),
            "start_char": pad(start_char, tf.constant(-1, tf.int64)),
            "end_char": pad(end_char, tf.constant(-1, tf.int64)),
            "num_entities": tf.math.bincount(chunk_row, minlength=batch, maxlength=batch,
                                             dtype=tf.int64)}


def export_ner(model, tokenizer, export_dir: str, labels, *, seq_length: int = 128,
               serving_version: str = ops_lib.DEFAULT_SERVING_VERSION,
               max_request_bytes: int = guards.MAX_REQUEST_BYTES, **_) -> str:
    """Exports a token classifier (encoder inputs -> "logits" [b, s, num_labels]).

    Signature: `text` tf.string [batch] -> `entity_text`, `entity_type` tf.string
    [batch, k], `start_char`, `end_char` int64 [batch, k] (code points:
    `text[start_char:end_char] == entity_text`), `num_entities` int64 [batch]; k is the
    most entities of any text in the batch, the others padded with "" and -1.
    """
    labels = [str(label) for label in labels]
    if seq_length < 3:
        raise ValueError(f"seq_length={seq_length} leaves no room for words")
    check_seq_length(model, seq_length)
    module = ServingModule(model, tokenizer)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def serve(text):
        inputs, info = ner_windows(tokenizer, text, seq_length)
        logits = model(inputs, training=False)["logits"]
        return ner_entities(tf.argmax(logits, axis=-1, output_type=tf.int32), info, text,
                            labels)

    warmup = [{"text": [t]} for t in SAMPLE_TEXTS] + [{"text": SAMPLE_TEXTS}]
    return save_export(module, serve, export_dir, warmup, serving_version,
                       max_request_bytes=max_request_bytes,
                       raw_outputs=lambda x: {"logits": model(x, training=False)["logits"]})
