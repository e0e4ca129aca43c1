"""The `fill_mask` SavedModel: text with `[MASK]` in, the likeliest tokens for each
mask out (a `BertPretrainer`'s masked-LM head), for TF Serving.

The literal `[MASK]` in a text becomes the mask token; the text around it is tokenized
with the model's WordPiece tokenizer in the graph, packed as `[CLS] text [SEP]` and cut
to `seq_length` tokens (a mask cut off is not predicted).

Signature `serving_default`: `text` tf.string [batch] ->
- `tokens` tf.string [batch, masks, top_k]: the top tokens of each mask, likeliest first
  (WordPiece strings, `##` pieces as such);
- `probabilities` float32 [batch, masks, top_k]: their softmax probabilities;
- `mask_count` int32 [batch]: the masks predicted in each text. `masks` is the largest
  count in the batch; the rows of texts with fewer are "" and 0.
"""

from __future__ import annotations

import tensorflow as tf

from kbert.export import ops as ops_lib
from kbert.export.base import ServingModule, save_export

MASK = "[MASK]"
SAMPLES = ["The capital of France is [MASK].", "[MASK] [MASK] ran to the park.",
           "No mask here.", ""]


def fill_mask_inputs(tokenizer, text, seq_length: int) -> dict:
    """Texts -> the pretrainer's inputs, `masked_lm_positions` [b, masks] (0-padded)
    and the mask count of each text."""
    mask_id = tokenizer.mask_id
    pieces = tf.strings.split(text, MASK)  # [b, (p)]: masks sit between pieces
    ids = tf.cast(tokenizer.tokenize(pieces.flat_values), tf.int32)  # [P, (t)]
    last = tf.equal(tf.range(tf.size(pieces.flat_values, tf.int64))[:, None] + 1,
                    tf.gather(pieces.row_limits(), pieces.value_rowids())[:, None])[:, 0]
    mask_col = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(~last, tf.int32))], mask_id),
        tf.cast(~last, tf.int64))
    with_masks = tf.concat([ids, mask_col], axis=1)  # [P, (t + 1 for non-last)]
    grouped = tf.RaggedTensor.from_row_splits(with_masks, pieces.row_splits)
    tokens = grouped.merge_dims(1, 2)  # [b, (T)]
    packed = tokenizer.pack(tokens, seq_length=seq_length)
    is_mask = tf.equal(packed["token_ids"], mask_id) & tf.cast(packed["padding_mask"], tf.bool)
    positions = tf.ragged.boolean_mask(
        tf.broadcast_to(tf.range(seq_length)[None, :], tf.shape(is_mask)), is_mask)
    return {**packed, "masked_lm_positions": positions.to_tensor(0),
            "mask_count": tf.cast(positions.row_lengths(), tf.int32)}


def export_fill_mask(pretrainer, tokenizer, export_dir: str, *, top_k: int = 5,
                     seq_length: int = 128,
                     serving_version: str = ops_lib.DEFAULT_SERVING_VERSION) -> str:
    """Exports a `BertPretrainer` with its `BertTokenizer` (see the module docstring)."""
    limit = pretrainer.encoder.config.max_position_embeddings
    if not 3 <= seq_length <= limit:
        raise ValueError(f"seq_length={seq_length}: must be between 3 and {limit}")
    vocab = tokenizer.vocabulary
    if MASK not in vocab:
        raise ValueError("the fill_mask export needs a [MASK] token in the vocabulary")
    if not 1 <= top_k <= len(vocab):
        raise ValueError(f"top_k={top_k}: must be between 1 and {len(vocab)}")
    module = ServingModule(pretrainer, tokenizer)
    module.vocabulary = tf.constant(vocab)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        x = fill_mask_inputs(tokenizer, text, seq_length)
        count = x.pop("mask_count")
        logits = pretrainer(x, training=False)["mlm_logits"]  # [b, masks, V]
        probabilities, ids = tf.math.top_k(tf.nn.softmax(tf.cast(logits, tf.float32)), top_k)
        real = tf.range(tf.shape(ids)[1])[None, :] < count[:, None]  # [b, masks]
        tokens = tf.where(real[:, :, None], tf.gather(module.vocabulary, ids), "")
        probabilities = tf.where(real[:, :, None], probabilities, 0.0)
        return {"tokens": tokens, "probabilities": probabilities, "mask_count": count}

    module.serve = serve
    warmup = [{"text": [t]} for t in SAMPLES] + [{"text": SAMPLES}]
    return save_export(module, serve, export_dir, warmup, serving_version)
