"""The `elmo` SavedModel: raw sentences in, ELMo's layers out, as TF-Hub's ELMo module
gives them.

Signature `serving_default`: `text` tf.string [batch] (split on whitespace) ->
- `word_emb` [b, words, P]: the character-CNN token embeddings;
- `lstm_outputs1`, `lstm_outputs2` [b, words, 2P]: the first and second biLSTM layers
  (forward and backward states concatenated);
- `elmo` [b, words, 2P]: the scalar mix of the three layers (the token layer doubled, as
  in `hidden_states`), with the export's `ScalarMix` weights (equal weights and gamma 1
  unless a trained mix is given);
- `default` [b, 2P]: the mean of `elmo` over each text's words;
- `sequence_len` int32 [b]: words per text.
Positions past a text's words are 0. A text without words gives `sequence_len` 0, zero
rows and a zero `default`.

Signature `token_ids`, for clients that make the character ids themselves:
`char_ids` int32 [b, words, 50] and `padding_mask` int32 [b, words], as
`ELMoCharTokenizer` makes them -> the same outputs.
"""

from __future__ import annotations

import tensorflow as tf

from kbert.export import guards
from kbert.export import ops as ops_lib
from kbert.export.base import SAMPLE_TEXTS, ServingModule, save_export
from kbert.layers import ScalarMix

# ELMo's default limit on a request's text (`guards`: rows x longest text's bytes):
# about 10,000 English words. Every word goes through the character CNN and both
# biLSTM layers, whose states are kept for the outputs, so a word costs far more than a
# byte of a windowed encoder's text; the serving docs give the measured peak memory.
ELMO_MAX_REQUEST_BYTES = 1 << 16


def elmo_outputs(model, tokenizer, mix, text):
    """The signature's dict for tf.string `text` [b] (eager or in a graph)."""
    return layer_outputs(model, mix, tokenizer(text))


def layer_outputs(model, mix, inputs):
    """The signature's dict for the tokenizer's `inputs` (`char_ids`, `padding_mask`)."""
    out = model(inputs, training=False)
    layers = out["hidden_states"]
    mask = tf.cast(out["padding_mask"], tf.float32)
    projection = layers[0].shape[-1] // 2
    elmo = tf.cast(mix(layers, padding_mask=mask), tf.float32) * mask[:, :, None]
    count = tf.reduce_sum(mask, axis=1, keepdims=True)
    result = {"word_emb": tf.cast(layers[0][:, :, :projection], tf.float32),
              "elmo": elmo,
              "default": tf.reduce_sum(elmo, axis=1) / tf.maximum(count, 1.0),
              "sequence_len": tf.cast(tf.reduce_sum(mask, axis=1), tf.int32)}
    for i, layer in enumerate(layers[1:], 1):
        result[f"lstm_outputs{i}"] = tf.cast(layer, tf.float32)
    return result


def export_elmo(model, tokenizer, export_dir: str, mix: ScalarMix | None = None, *,
                serving_version: str = ops_lib.DEFAULT_SERVING_VERSION,
                max_request_bytes: int = ELMO_MAX_REQUEST_BYTES) -> str:
    """Exports a stateless `ELMo` with its `ELMoCharTokenizer` (see the module
    docstring)."""
    if model.stateful:
        raise ValueError("export a stateless ELMo (stateful=False): a served model must "
                         "not carry states from one request into another")
    if model.token_table is not None:
        raise ValueError("export a character-mode ELMo: the elmo signature reads any "
                         "word; a token-mode ELMo knows only its word list")
    if mix is None:
        mix = ScalarMix(model.num_layers + 1, name="elmo_mix")
        mix([tf.zeros([1, 1, model.hidden_size])] * (model.num_layers + 1))
    module = ServingModule(model, tokenizer, mix)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def serve(text):
        return elmo_outputs(model, tokenizer, mix, text)

    warmup = [{"text": [t]} for t in SAMPLE_TEXTS] + [{"text": SAMPLE_TEXTS}]
    return save_export(module, serve, export_dir, warmup, serving_version,
                       max_request_bytes=max_request_bytes,
                       raw_outputs=lambda inputs: layer_outputs(model, mix, inputs))
