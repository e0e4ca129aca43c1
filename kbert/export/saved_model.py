"""SavedModels for TF Serving that take raw strings and answer in human terms.

Each exporter wraps a Keras model and its tokenizer in a `tf.Module` whose
`serving_default` signature takes `tf.string [batch]` inputs, tokenizes in-graph and
returns dense tensors (see the signatures in the README). The export is written to a
temporary folder beside `export_dir`, checked against the ops of the target
`tensorflow_model_server`, and only then renamed into place.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from kbert.export import guards
from kbert.export import ops as ops_lib
from kbert.export.base import (CLASSIFY_METHOD, REGRESS_METHOD, SAMPLE_QUESTIONS,
                               SAMPLE_TEXTS, ServingModule, check_seq_length,
                               float_output, save_export)
from kbert.export.squad_graph import squad_answers, squad_windows
from kbert.training.distribute import trim_padding as trim_inputs


def export_classifier(model: keras.Model, tokenizer, export_dir: str, labels=None, *,
                      pair: bool = False, seq_length: int = 128, regression: bool = False,
                      trim_padding: int = 8,
                      serving_version: str = ops_lib.DEFAULT_SERVING_VERSION,
                      max_request_bytes: int = guards.MAX_REQUEST_BYTES) -> str:
    """Exports a sentence (or sentence-pair) classifier or regressor.

    Args:
        model: Keras model, encoder inputs -> logits [batch, len(labels)] (or a dict
            with "logits"); for `regression`, -> [batch] or [batch, 1] (or "score").
        labels: label names, in logit order (classification).
        pair: the signature takes `text` and `text_b`.
        trim_padding: a request's texts run padded to the longest of them rounded up
            to a multiple of this (at most `seq_length`; `kbert.training.trim_padding`),
            not to `seq_length`: the model's time grows with the length it runs at.
            The answers are the same (padding is masked); 0 pads to `seq_length`.

    Signature `serving_default`: `text` (+ `text_b`) tf.string [batch] ->
    `probabilities` float32 [batch, n], `label` tf.string [batch], `label_id` int64
    [batch]; regression: `score` float32 [batch]. Texts longer than `seq_length` tokens
    are cut (longest-first for pairs), as in training.

    Signature `classify` (method `tensorflow/serving/classify`, TF Serving's Classify
    API): `inputs` serialized `tf.Example`s [batch] with a bytes feature `text` (+
    `text_b`) -> `classes` tf.string [batch, n] (the label names) and `scores` float32
    [batch, n] (the probabilities). Regression: `regress` (method
    `tensorflow/serving/regress`): `inputs` -> `outputs` float32 [batch].
    """
    if not regression and not labels:
        raise ValueError("export_classifier: give the label names (labels=[...])")
    check_seq_length(model, seq_length)
    module = ServingModule(model, tokenizer)
    if not regression:
        module.labels = tf.constant([str(label) for label in labels])

    def serve(text, text_b=None):
        if text_b is not None:  # one clear error instead of one deep in ragged code
            same = tf.debugging.assert_equal(
                tf.shape(text)[0], tf.shape(text_b)[0],
                message="text and text_b must have the same batch size")
            with tf.control_dependencies([same]):
                text, text_b = tf.identity(text), tf.identity(text_b)
        inputs = tokenizer(text, text_b, seq_length=seq_length)
        if trim_padding and "padding_mask" in inputs:
            inputs = trim_inputs(inputs, trim_padding)
        if regression:
            score = float_output(model, inputs, "score")
            return {"score": tf.reshape(score, [-1])}
        probabilities = tf.nn.softmax(float_output(model, inputs, "logits"), axis=-1)
        label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int64)
        return {"probabilities": probabilities, "label_id": label_id,
                "label": tf.gather(module.labels, label_id)}

    spec = tf.TensorSpec([None], tf.string)
    if pair:
        signature = tf.function(lambda text, text_b: serve(text, text_b),
                                input_signature=[spec, spec], autograph=False)
        warmup = [{"text": [a], "text_b": [b]} for a, b in SAMPLE_QUESTIONS]
        warmup.append({"text": SAMPLE_TEXTS, "text_b": SAMPLE_TEXTS[::-1]})
    else:
        signature = tf.function(lambda text: serve(text), input_signature=[spec],
                                autograph=False)
        warmup = [{"text": [t]} for t in SAMPLE_TEXTS] + [{"text": SAMPLE_TEXTS}]
    # Classify/Regress call serving_default's traced function: one tokenizer and model
    # graph in the export for both, traced once.
    from_examples = _example_signature(signature.get_concrete_function(), pair, regression,
                                       module)
    name, method = ("regress", REGRESS_METHOD) if regression else ("classify",
                                                                   CLASSIFY_METHOD)
    output = "score" if regression else "logits"
    examples = _examples_request(warmup[-1])
    return save_export(module, signature, export_dir, warmup, serving_version,
                       max_request_bytes=max_request_bytes,
                       extra_warmup=[(name, examples)],
                       extra_signatures={name: from_examples},
                       method_names={name: method},
                       raw_outputs=lambda x: {output: float_output(model, x, output)},
                       raw_input_names=list(tokenizer(["a"], ["b"] if pair else None,
                                                      seq_length=seq_length)))


def _examples_request(request: dict) -> dict:
    """The Classify / Regress signature's request for the texts of a serving_default
    request: their serialized tf.Examples, as {"b64": ...} values."""
    import base64

    rows = zip(*request.values())
    examples = [tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode("utf-8")]))
        for name, text in zip(request, row)})).SerializeToString() for row in rows]
    return {"inputs": [{"b64": base64.b64encode(e).decode("ascii")} for e in examples]}


def _example_signature(serve, pair: bool, regression: bool, module):
    """The Classify / Regress signature: serialized tf.Examples -> the answer of `serve`
    (serving_default's concrete function)."""
    features = {"text": tf.io.FixedLenFeature([], tf.string)}
    if pair:
        features["text_b"] = tf.io.FixedLenFeature([], tf.string)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")],
                 autograph=False)
    def from_examples(inputs):
        parsed = tf.io.parse_example(inputs, features)
        out = serve(parsed["text"], parsed["text_b"]) if pair else serve(parsed["text"])
        if regression:
            return {"outputs": out["score"]}
        rows = tf.shape(inputs)[0]
        return {"classes": tf.tile(module.labels[None, :], [rows, 1]),
                "scores": out["probabilities"]}

    return from_examples


def export_embeddings(encoder, tokenizer, export_dir: str, *, seq_length: int = 128,
                      serving_version: str = ops_lib.DEFAULT_SERVING_VERSION,
                      max_request_bytes: int = guards.MAX_REQUEST_BYTES) -> str:
    """Exports an encoder of any family (the model interface): `text` ->
    `pooled_output` [b, h] (the family's sentence vector), `sequence_output`
    [b, seq_length, h] (float32) and `padding_mask` int32 [b, seq_length]."""
    check_seq_length(encoder, seq_length)
    module = ServingModule(encoder, tokenizer)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def serve(text):
        out = encoder.features(tokenizer(text, seq_length=seq_length), training=False)
        return {"pooled_output": tf.cast(out["pooled_output"], tf.float32),
                "sequence_output": tf.cast(out["sequence_output"], tf.float32),
                "padding_mask": tf.cast(out["padding_mask"], tf.int32)}

    warmup = [{"text": [t]} for t in SAMPLE_TEXTS] + [{"text": SAMPLE_TEXTS}]

    def raw(inputs):
        out = encoder.features(inputs, training=False)
        return {"pooled_output": out["pooled_output"],
                "sequence_output": out["sequence_output"]}

    return save_export(module, serve, export_dir, warmup, serving_version,
                       max_request_bytes=max_request_bytes, raw_outputs=raw)


def export_squad(model: keras.Model, tokenizer, export_dir: str, *, max_seq_length: int = 384,
                 doc_stride: int = 128, max_query_length: int = 64, n_best_size: int = 20,
                 max_answer_length: int = 30, version_2_with_negative: bool = False,
                 null_score_diff_threshold: float = 0.0,
                 serving_version: str = ops_lib.DEFAULT_SERVING_VERSION,
                 max_request_bytes: int = guards.MAX_REQUEST_BYTES) -> str:
    """Exports a SQuAD span model (encoder inputs -> "start_logits", "end_logits").

    Signature: `question`, `context` tf.string [batch] -> `answer` tf.string [batch],
    `score` float32 [batch] (start + end logit of the answer), `start_char`,
    `end_char` int64 [batch], code-point offsets with
    `answer == context[start_char:end_char]` (-1 and "" when there is no answer); v2.0
    adds `has_answer` bool [batch]. Windows, span search and offsets run in-graph with
    the same settings and results as `kbert.tasks.squad`. A question too long to leave
    room for context is cut to `max_seq_length` less the packer's special tokens and one
    context token, as `kbert.tasks.squad` cuts it.
    """
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for a question "
                         "and context")
    check_seq_length(model, max_seq_length)
    module = ServingModule(model, tokenizer)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2, autograph=False)
    def serve(question, context):
        inputs, info = squad_windows(tokenizer, question, context, max_seq_length,
                                     doc_stride, max_query_length)
        out = model(inputs, training=False)
        return squad_answers(out["start_logits"], out["end_logits"], info, context,
                             n_best_size=n_best_size, max_answer_length=max_answer_length,
                             version_2_with_negative=version_2_with_negative,
                             null_score_diff_threshold=null_score_diff_threshold)

    warmup = [{"question": [q], "context": [c]} for q, c in SAMPLE_QUESTIONS]
    warmup.append({"question": [q for q, _ in SAMPLE_QUESTIONS],
                   "context": [c for _, c in SAMPLE_QUESTIONS]})

    def raw(inputs):
        out = model(inputs, training=False)
        return {"start_logits": out["start_logits"], "end_logits": out["end_logits"]}

    return save_export(module, serve, export_dir, warmup, serving_version,
                       max_request_bytes=max_request_bytes, raw_outputs=raw)
