"""`assets.extra/tf_serving_warmup_requests`: PredictionLog records that TF Serving
replays when it loads a model, so that the first user request is not the slow one."""

from __future__ import annotations

import os

import tensorflow as tf

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_RECORDS = 1000  # TF Serving reads at most this many


def request_bytes(values):
    """The bytes of a request's string values (nested lists kept): text as UTF-8,
    {"b64": ...} decoded, bytes as they are; other values unchanged."""
    import base64

    if isinstance(values, list):
        return [request_bytes(v) for v in values]
    if isinstance(values, dict) and set(values) == {"b64"}:
        return base64.b64decode(values["b64"])
    return values.encode("utf-8") if isinstance(values, str) else values


def _tensor_proto(values, dtype: str | None):
    """A request input's TensorProto: strings (text, or {"b64": ...} for bytes, as TF
    Serving's REST API carries them: serialized tf.Examples) or numbers (nested lists)
    of `dtype` (the signature's; without one, int32 for integers, float32 else)."""
    import numpy as np

    def first(v):
        return first(v[0]) if isinstance(v, list) and v else v

    leaf = first(values)
    if dtype == "string" or isinstance(leaf, (str, bytes, dict)):
        return tf.make_tensor_proto(request_bytes(values), tf.string)
    if dtype is None:
        dtype = "int32" if all(float(x).is_integer() for x in np.ravel(values)) else "float32"
    return tf.make_tensor_proto(np.asarray(values, dtype=tf.as_dtype(dtype).as_numpy_dtype))


def write_warmup_requests(export_dir: str, model_name: str, requests: list[dict],
                          signatures: list[str] | None = None,
                          dtypes: dict | None = None) -> str:
    """Writes one PredictRequest per dict (input name -> list of values: strings, or
    {"b64": ...} for bytes, or numbers, nested for a [batch, ...] input) to
    `export_dir`, each for `serving_default` or for the signature of the same index in
    `signatures`; `dtypes`: signature -> input -> dtype name, for numeric inputs (the
    SignatureDef's). TF Serving replays every record at load, through Predict (which
    runs any signature): each signature's graph is optimized then, not at its first
    request."""
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    if len(requests) > MAX_RECORDS:
        raise ValueError(f"{len(requests)} warmup requests: TF Serving reads at most "
                         f"{MAX_RECORDS}")
    path = os.path.join(export_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for i, inputs in enumerate(requests):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = model_name
            name = signatures[i] if signatures else "serving_default"
            request.model_spec.signature_name = name
            for key, values in inputs.items():
                request.inputs[key].CopyFrom(
                    _tensor_proto(values, (dtypes or {}).get(name, {}).get(key)))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(export_dir: str, with_signatures: bool = False) -> list:
    """The warmup requests of an export: input name -> list of bytes (a string input) or
    (nested) list of numbers, per request (with `with_signatures`, (signature name, that
    dict) pairs)."""
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(export_dir, WARMUP_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{export_dir}: no {WARMUP_FILE}")
    out = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog.FromString(record)
        request = log.predict_log.request
        inputs = {k: tf.make_ndarray(t).tolist() for k, t in request.inputs.items()}
        out.append((request.model_spec.signature_name or "serving_default", inputs)
                   if with_signatures else inputs)
    return out
