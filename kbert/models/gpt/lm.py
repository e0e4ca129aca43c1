"""Language-model training for GPT: next-token examples, the loss on real tokens only,
and perplexity.

    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset("gpt2"))
    data = lm_dataset(texts, tokenizer, seq_length=1024, batch_size=8)
    training.compile_model(lm, training.create_optimizer(...), lm_loss(),
                           metrics=[Perplexity()])
    training.fit(lm, data.repeat(), total_steps)

Labels are the inputs shifted by one; positions whose next token is padding carry the
label -1, which the loss and the metric leave out (the loss is the mean over real
next tokens, as GPT-2's training computes it).
"""

from __future__ import annotations

import tensorflow as tf

# The loss and the metric are the families' shared ones (T5's decoder uses them too).
from kbert.models.metrics import IGNORED, LMLoss, Perplexity, lm_loss  # noqa: F401


def lm_examples(token_ids, padding_mask):
    """[B, T + 1] ids and mask -> (inputs [B, T], labels [B, T]): the label of
    position t is the token at t + 1, or -1 where that is padding."""
    ids = tf.convert_to_tensor(token_ids)
    mask = tf.cast(tf.convert_to_tensor(padding_mask), ids.dtype)
    inputs = {"token_ids": tf.cast(ids[:, :-1], tf.int32),
              "padding_mask": tf.cast(mask[:, :-1], tf.int32)}
    labels = tf.where(tf.cast(mask[:, 1:], tf.bool) & tf.cast(mask[:, :-1], tf.bool),
                      ids[:, 1:], tf.cast(IGNORED, ids.dtype))
    return inputs, {"logits": tf.cast(labels, tf.int32)}


def lm_dataset(texts, tokenizer, seq_length: int, batch_size: int,
               end_token_id: int | None = -1, drop_remainder: bool = True) -> tf.data.Dataset:
    """A stream of text -> batches of next-token examples, as GPT-2 trains: every text
    tokenized, followed by the end token, all concatenated, cut into blocks of
    `seq_length + 1` tokens (inputs and labels overlap by all but one token).

    Args:
        texts: a list of strings or a `tf.data.Dataset` of scalar strings.
        tokenizer: a `GPTTokenizer` (anything with `tokenize` and `end_token_id`).
        end_token_id: the token after each text (-1: the tokenizer's; None: none).
    """
    if end_token_id == -1:
        end_token_id = tokenizer.end_token_id
    if not isinstance(texts, tf.data.Dataset):
        texts = tf.data.Dataset.from_tensor_slices(tf.constant(list(texts), tf.string))

    def tokens(batch):
        ids = tf.cast(tokenizer.tokenize(batch), tf.int32)
        if end_token_id is not None:
            end = tf.fill([ids.nrows(), 1], tf.constant(end_token_id, tf.int32))
            ids = tf.concat([ids, tf.RaggedTensor.from_tensor(end)], axis=1)
        return ids.flat_values

    stream = texts.batch(256).map(tokens).unbatch()
    blocks = stream.batch(seq_length + 1, drop_remainder=True)
    data = blocks.batch(batch_size, drop_remainder=drop_remainder)
    return data.map(lambda ids: lm_examples(ids, tf.ones_like(ids)),
                    num_parallel_calls=tf.data.AUTOTUNE)
