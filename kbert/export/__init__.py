"""SavedModels for TF Serving: raw strings in, answers out, tokenization in-graph.

    from kbert.export import export_squad
    export_squad(model, tokenizer, "serving/squad/1")

`python -m kbert.export --model_dir DIR --task squad --export_dir BASE/NAME/VERSION`
exports a folder written by a kbert task; `python -m kbert.export check DIR` checks an
export against the stock tensorflow_model_server.
"""

from kbert.export.ops import (DEFAULT_SERVING_VERSION, SERVING_VERSIONS, UnsupportedOpError,
                              check_ops, missing_ops, saved_model_ops, serving_ops)
from kbert.export.elmo_graph import export_elmo
from kbert.export.generate_graph import export_generate
from kbert.export.ner_graph import export_ner
from kbert.export.saved_model import export_classifier, export_embeddings, export_squad
from kbert.export.warmup import read_warmup_requests, write_warmup_requests

__all__ = ["DEFAULT_SERVING_VERSION", "SERVING_VERSIONS", "UnsupportedOpError", "check_ops",
           "export_classifier", "export_elmo", "export_embeddings", "export_generate",
           "export_ner", "export_squad", "missing_ops", "read_warmup_requests",
           "saved_model_ops", "serving_ops", "write_warmup_requests"]
