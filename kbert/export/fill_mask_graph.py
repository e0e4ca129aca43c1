"""The `fill_mask` SavedModel: text with the mask token (`tokenizer.mask_token`: BERT's
`[MASK]`, RoBERTa's `<mask>`) in, the likeliest tokens for each mask out (the family's
masked-LM model, `Family.masked_lm_class`), for TF Serving.

The mask token written in a text becomes the mask id (a tokenizer that reads special
tokens in text, `special_tokens_in_text`, does it itself; otherwise the text is cut at
each mask and the pieces tokenized apart); the ids are packed by the tokenizer's packer
(BERT: `[CLS] text [SEP]`) and cut to `seq_length` tokens (a mask cut off is not
predicted). The masked-LM model takes the packed inputs plus `masked_lm_positions` and
returns `mlm_logits` [batch, masks, vocab].

Signature `serving_default`: `text` tf.string [batch] ->
- `tokens` tf.string [batch, masks, top_k]: the top tokens of each mask, likeliest first
  (`tokenizer.token_strings()`: WordPiece pieces as such, `##` kept; byte-level BPE
  tokens as the text they stand for);
- `probabilities` float32 [batch, masks, top_k]: their softmax probabilities;
- `mask_count` int32 [batch]: the masks predicted in each text. `masks` is the largest
  count in the batch; the rows of texts with fewer are "" and 0.
"""

from __future__ import annotations

import tensorflow as tf

from kbert.export import guards
from kbert.export import ops as ops_lib
from kbert.export.base import ServingModule, save_export, token_ids_request

MASK = "[MASK]"  # in SAMPLES, replaced by the tokenizer's mask token
SAMPLES = ["The capital of France is [MASK].", "[MASK] [MASK] ran to the park.",
           "No mask here.", ""]


def fill_mask_inputs(tokenizer, text, seq_length: int) -> dict:
    """Texts -> the pretrainer's inputs, `masked_lm_positions` [b, masks] (0-padded)
    and the mask count of each text."""
    mask_id = tokenizer.mask_id
    if tokenizer.special_tokens_in_text:
        tokens = tf.cast(tokenizer.tokenize(text), tf.int32)  # [b, (T)], masks read
    else:
        pieces = tf.strings.split(text, tokenizer.mask_token)  # [b, (p)]: masks between
        ids = tf.cast(tokenizer.tokenize(pieces.flat_values), tf.int32)  # [P, (t)]
        last = tf.equal(tf.range(tf.size(pieces.flat_values, tf.int64))[:, None] + 1,
                        tf.gather(pieces.row_limits(), pieces.value_rowids())[:, None])[:, 0]
        mask_col = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(~last, tf.int32))], mask_id),
            tf.cast(~last, tf.int64), validate=False)
        with_masks = tf.concat([ids, mask_col], axis=1)  # [P, (t + 1 for non-last)]
        grouped = tf.RaggedTensor.from_row_splits(with_masks, pieces.row_splits, validate=False)
        tokens = grouped.merge_dims(1, 2)  # [b, (T)]
    packed, _ = tokenizer.pack_segments([tokens], seq_length)
    is_mask = tf.equal(packed["token_ids"], mask_id) & tf.cast(packed["padding_mask"], tf.bool)
    positions = tf.ragged.boolean_mask(
        tf.broadcast_to(tf.range(seq_length)[None, :], tf.shape(is_mask)), is_mask)
    return {**packed, "masked_lm_positions": positions.to_tensor(0),
            "mask_count": tf.cast(positions.row_lengths(), tf.int32)}


def export_fill_mask(pretrainer, tokenizer, export_dir: str, *, top_k: int = 5,
                     seq_length: int = 128,
                     serving_version: str = ops_lib.DEFAULT_SERVING_VERSION,
                     max_request_bytes: int = guards.MAX_REQUEST_BYTES) -> str:
    """Exports a masked-LM model with its tokenizer (see the module docstring)."""
    from kbert.models.interface import find_encoder

    limit = find_encoder(pretrainer).max_sequence_length
    lowest = tokenizer.special_tokens[0] + 1
    if not lowest <= seq_length <= limit:
        raise ValueError(f"seq_length={seq_length}: must be between {lowest} and {limit}")
    try:
        mask_id = tokenizer.mask_id
    except ValueError:  # a WordPiece vocabulary without [MASK]
        mask_id = None
    if mask_id is None or tokenizer.mask_token is None:
        raise ValueError(f"the fill_mask export needs a mask token in the vocabulary "
                         f"({type(tokenizer).__name__} has none)")
    vocab = tokenizer.token_strings()
    if not 1 <= top_k <= len(vocab):
        raise ValueError(f"top_k={top_k}: must be between 1 and {len(vocab)}")
    module = ServingModule(pretrainer, tokenizer)
    module.vocabulary = tf.constant(vocab)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def serve(text):
        x = fill_mask_inputs(tokenizer, text, seq_length)
        count = x.pop("mask_count")
        logits = pretrainer(x, training=False)["mlm_logits"]  # [b, masks, V]
        probabilities, ids = tf.math.top_k(tf.nn.softmax(tf.cast(logits, tf.float32)), top_k)
        real = tf.range(tf.shape(ids)[1])[None, :] < count[:, None]  # [b, masks]
        tokens = tf.where(real[:, :, None], tf.gather(module.vocabulary, ids), "")
        probabilities = tf.where(real[:, :, None], probabilities, 0.0)
        return {"tokens": tokens, "probabilities": probabilities, "mask_count": count}

    samples = [t.replace(MASK, tokenizer.mask_token) for t in SAMPLES]
    warmup = [{"text": [t]} for t in samples] + [{"text": samples}]
    # token_ids: the pretrainer's own inputs (with `masked_lm_positions` [b, masks]) in,
    # its masked-LM logits [b, masks, vocabulary] out
    names = [*tokenizer(["a"]).keys(), "masked_lm_positions"]
    ids = token_ids_request(tokenizer)  # warmed too: two samples, position 1 of each
    extra_warmup = [] if ids is None else [("token_ids", {**ids,
                                                          "masked_lm_positions": [[1], [1]]})]
    return save_export(module, serve, export_dir, warmup, serving_version,
                       max_request_bytes=max_request_bytes, extra_warmup=extra_warmup,
                       raw_outputs=lambda x: {"mlm_logits": pretrainer(
                           x, training=False)["mlm_logits"]},
                       raw_input_names=names)
