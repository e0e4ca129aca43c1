"""SavedModels for TF Serving that take raw strings and answer in human terms.

Each exporter wraps a Keras model and its `BertTokenizer` in a `tf.Module` whose
`serving_default` signature takes `tf.string [batch]` inputs, tokenizes in-graph and
returns dense tensors (see the signatures in the README). The export is written to a
temporary folder beside `export_dir`, checked against the ops of the target
`tensorflow_model_server`, and only then renamed into place.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import keras
import tensorflow as tf

from kbert.export import ops as ops_lib
from kbert.export.squad_graph import squad_answers, squad_windows
from kbert.export.warmup import write_warmup_requests
from kbert.io import atomic_directory

# Inputs every warmup file carries: accents, CJK, emoji, empty and long texts.
SAMPLE_TEXTS = ["Crème brûlée in Zürich was très bien.", "北京是中国的首都。", "🙂 ok!", "",
                "A long text that runs past the model's sequence length. " * 40]
SAMPLE_QUESTIONS = [("Where was the crème brûlée?", "Crème brûlée in Zürich was très bien."),
                    ("首都是哪里?", "北京是中国的首都。"), ("", ""),
                    ("Which word repeats?", "The long context repeats itself. " * 60)]


def _model_name(export_dir: str) -> str:
    """NAME of EXPORT_BASE/NAME/VERSION (TF Serving's layout); the folder name otherwise."""
    path = os.path.abspath(export_dir)
    parent, leaf = os.path.split(path)
    return os.path.basename(parent) if leaf.isdigit() else leaf


def _outputs(model, inputs, name: str):
    out = model(inputs, training=False)
    if isinstance(out, dict):
        return tf.cast(out[name], tf.float32)
    return tf.cast(out, tf.float32)


class _ServingModule(tf.Module):
    def __init__(self, model, tokenizer, vocab_file):
        super().__init__(name="kbert_serving")
        self.model = model
        self.tokenizer = tokenizer
        self.vocab = tf.saved_model.Asset(vocab_file)  # copied into assets/


def _save(module: _ServingModule, signature, export_dir: str, warmup: list[dict],
          serving_version: str) -> str:
    """tf.saved_model.save + warmup requests + op check, atomically."""
    export_dir = os.fspath(export_dir)
    with atomic_directory(export_dir) as tmp:
        try:
            tf.saved_model.save(module, tmp, signatures={"serving_default": signature})
        finally:
            shutil.rmtree(os.path.dirname(module.vocab.asset_path.numpy().decode()),
                          ignore_errors=True)
        write_warmup_requests(tmp, _model_name(export_dir), warmup)
        try:
            ops_lib.check_ops(tmp, serving_version)
        except ops_lib.UnsupportedOpError as e:
            raise ops_lib.UnsupportedOpError(str(e).replace(tmp, export_dir)) from None
    return export_dir


def _prepare(tokenizer):
    """Writes the vocabulary to a temporary file for the asset (it is copied on save)."""
    tmp = tempfile.mkdtemp(prefix="kbert-vocab-")
    path = os.path.join(tmp, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokenizer.vocabulary))
    return path


def _check_seq_length(model, seq_length: int):
    encoder = _find_encoder(model)
    limit = encoder.config.max_position_embeddings if encoder is not None else None
    if limit is not None and seq_length > limit:
        raise ValueError(f"seq_length={seq_length} exceeds the model's "
                         f"max_position_embeddings={limit}")


def _find_encoder(model):
    from kbert.models.bert.encoder import BertEncoder

    if isinstance(model, BertEncoder):
        return model
    return next((layer for layer in getattr(model, "layers", [])
                 if isinstance(layer, BertEncoder)), None)


def export_classifier(model: keras.Model, tokenizer, export_dir: str, labels=None, *,
                      pair: bool = False, seq_length: int = 128, regression: bool = False,
                      serving_version: str = ops_lib.DEFAULT_SERVING_VERSION) -> str:
    """Exports a sentence (or sentence-pair) classifier or regressor.

    Args:
        model: Keras model, encoder inputs -> logits [batch, len(labels)] (or a dict
            with "logits"); for `regression`, -> [batch] or [batch, 1] (or "score").
        labels: label names, in logit order (classification).
        pair: the signature takes `text` and `text_b`.

    Signature: `text` (+ `text_b`) tf.string [batch] -> `probabilities` float32
    [batch, n], `label` tf.string [batch], `label_id` int64 [batch]; regression:
    `score` float32 [batch]. Texts longer than `seq_length` tokens are cut
    (longest-first for pairs), as in training.
    """
    if not regression and not labels:
        raise ValueError("export_classifier: give the label names (labels=[...])")
    _check_seq_length(model, seq_length)
    module = _ServingModule(model, tokenizer, _prepare(tokenizer))
    if not regression:
        module.labels = tf.constant([str(label) for label in labels])

    def serve(text, text_b=None):
        inputs = tokenizer.pack(tokenizer._tokenize_with_offsets(text)[0],
                                None if text_b is None else
                                tokenizer._tokenize_with_offsets(text_b)[0], seq_length)
        if regression:
            score = _outputs(model, inputs, "score")
            return {"score": tf.reshape(score, [-1])}
        probabilities = tf.nn.softmax(_outputs(model, inputs, "logits"), axis=-1)
        label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int64)
        return {"probabilities": probabilities, "label_id": label_id,
                "label": tf.gather(module.labels, label_id)}

    spec = tf.TensorSpec([None], tf.string)
    if pair:
        signature = tf.function(lambda text, text_b: serve(text, text_b),
                                input_signature=[spec, spec])
        warmup = [{"text": [a], "text_b": [b]} for a, b in SAMPLE_QUESTIONS]
        warmup.append({"text": SAMPLE_TEXTS, "text_b": SAMPLE_TEXTS[::-1]})
    else:
        signature = tf.function(lambda text: serve(text), input_signature=[spec])
        warmup = [{"text": [t]} for t in SAMPLE_TEXTS] + [{"text": SAMPLE_TEXTS}]
    module.serve = signature
    return _save(module, signature, export_dir, warmup, serving_version)


def export_embeddings(encoder, tokenizer, export_dir: str, *, seq_length: int = 128,
                      serving_version: str = ops_lib.DEFAULT_SERVING_VERSION) -> str:
    """Exports a BertEncoder: `text` -> `pooled_output` [b, h], `sequence_output`
    [b, seq_length, h] (float32) and `padding_mask` int32 [b, seq_length]."""
    _check_seq_length(encoder, seq_length)
    module = _ServingModule(encoder, tokenizer, _prepare(tokenizer))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        inputs = tokenizer.pack(tokenizer._tokenize_with_offsets(text)[0], None, seq_length)
        out = encoder(inputs, training=False)
        return {"pooled_output": tf.cast(out["pooled_output"], tf.float32),
                "sequence_output": tf.cast(out["sequence_output"], tf.float32),
                "padding_mask": inputs["padding_mask"]}

    module.serve = serve
    warmup = [{"text": [t]} for t in SAMPLE_TEXTS] + [{"text": SAMPLE_TEXTS}]
    return _save(module, serve, export_dir, warmup, serving_version)


def export_squad(model: keras.Model, tokenizer, export_dir: str, *, max_seq_length: int = 384,
                 doc_stride: int = 128, max_query_length: int = 64, n_best_size: int = 20,
                 max_answer_length: int = 30, version_2_with_negative: bool = False,
                 null_score_diff_threshold: float = 0.0,
                 serving_version: str = ops_lib.DEFAULT_SERVING_VERSION) -> str:
    """Exports a SQuAD span model (encoder inputs -> "start_logits", "end_logits").

    Signature: `question`, `context` tf.string [batch] -> `answer` tf.string [batch],
    `score` float32 [batch] (start + end logit of the answer), `start_char`,
    `end_char` int64 [batch], code-point offsets with
    `answer == context[start_char:end_char]` (-1 and "" when there is no answer); v2.0
    adds `has_answer` bool [batch]. Windows, span search and offsets run in-graph with
    the same settings and results as `kbert.tasks.squad`. Where `kbert.tasks.squad`
    refuses a question too long to leave room for context, the SavedModel cuts it to
    `max_seq_length - 4` tokens instead.
    """
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for a question "
                         "and context")
    _check_seq_length(model, max_seq_length)
    module = _ServingModule(model, tokenizer, _prepare(tokenizer))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def serve(question, context):
        inputs, info = squad_windows(tokenizer, question, context, max_seq_length,
                                     doc_stride, max_query_length)
        out = model(inputs, training=False)
        return squad_answers(out["start_logits"], out["end_logits"], info, context,
                             n_best_size=n_best_size, max_answer_length=max_answer_length,
                             version_2_with_negative=version_2_with_negative,
                             null_score_diff_threshold=null_score_diff_threshold)

    module.serve = serve
    warmup = [{"question": [q], "context": [c]} for q, c in SAMPLE_QUESTIONS]
    warmup.append({"question": [q for q, _ in SAMPLE_QUESTIONS],
                   "context": [c for _, c in SAMPLE_QUESTIONS]})
    return _save(module, serve, export_dir, warmup, serving_version)
