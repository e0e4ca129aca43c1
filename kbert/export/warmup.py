"""`assets.extra/tf_serving_warmup_requests`: PredictionLog records that TF Serving
replays when it loads a model, so that the first user request is not the slow one."""

from __future__ import annotations

import os

import tensorflow as tf

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_RECORDS = 1000  # TF Serving reads at most this many


def write_warmup_requests(export_dir: str, model_name: str, requests: list[dict],
                          signatures: list[str] | None = None) -> str:
    """Writes one PredictRequest per dict (input name -> list of str) to `export_dir`,
    each for `serving_default` or for the signature of the same index in `signatures`."""
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
            request.model_spec.signature_name = (signatures[i] if signatures
                                                 else "serving_default")
            for key, values in inputs.items():
                request.inputs[key].CopyFrom(
                    tf.make_tensor_proto([v.encode("utf-8") for v in values], tf.string))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(export_dir: str, with_signatures: bool = False) -> list:
    """The warmup requests of an export: input name -> list of bytes, per request (with
    `with_signatures`, (signature name, that dict) pairs)."""
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(export_dir, WARMUP_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{export_dir}: no {WARMUP_FILE}")
    out = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog.FromString(record)
        request = log.predict_log.request
        inputs = {k: [bytes(v) for v in tf.make_ndarray(t).tolist()]
                  for k, t in request.inputs.items()}
        out.append((request.model_spec.signature_name or "serving_default", inputs)
                   if with_signatures else inputs)
    return out
