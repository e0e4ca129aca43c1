"""SavedModels for TF Serving: raw strings in, answers out, tokenization in-graph.

    from kbert.export import export_squad
    export_squad(model, tokenizer, "serving/squad/1")

`python -m kbert.export --model_dir DIR --task squad --export_dir BASE/NAME/VERSION`
exports a folder written by a kbert task; `python -m kbert.export check DIR` checks an
export against the stock tensorflow_model_server.
"""

from kbert._lazy import lazy_package

# Imported on first use (kbert._lazy): the command lines answer --help before
# TensorFlow is imported.
_EXPORTS = {
    "DEFAULT_SERVING_VERSION": "kbert.export.ops",
    "SERVING_VERSIONS": "kbert.export.ops",
    "UnsupportedOpError": "kbert.export.ops",
    "check_ops": "kbert.export.ops",
    "export_classifier": "kbert.export.saved_model",
    "export_elmo": "kbert.export.elmo_graph",
    "export_embeddings": "kbert.export.saved_model",
    "export_generate": "kbert.export.generate_graph",
    "export_ner": "kbert.export.ner_graph",
    "export_squad": "kbert.export.saved_model",
    "missing_ops": "kbert.export.ops",
    "read_warmup_requests": "kbert.export.warmup",
    "saved_model_ops": "kbert.export.ops",
    "serving_ops": "kbert.export.ops",
    "write_warmup_requests": "kbert.export.warmup",
}
lazy_package(__name__, _EXPORTS)
