"""`python -m kbert.export check DIR`: would the stock tensorflow_model_server serve it?

Lists the signatures, checks every op type against the target server's, and replays
the warmup requests in a fresh Python process that imports only `tensorflow` and
`tensorflow_text`: nothing of kbert, Keras or the training code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from kbert.export import ops as ops_lib

# Runs in the fresh process. Inputs: export dir, requests JSON, output JSON.
_FRESH = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the text ops, as the server links them)

before = set(sys.modules)  # tensorflow_text itself imports tf.keras

export_dir, requests_file, out_file = sys.argv[1:4]
with open(requests_file, encoding="utf-8") as f:
    requests = json.load(f)
fn = tf.saved_model.load(export_dir).signatures["serving_default"]
results = []
for request in requests:
    out = fn(**{k: tf.constant(v, tf.string) for k, v in request.items()})
    item = {}
    for k, v in out.items():
        v = v.numpy()
        item[k] = {"dtype": str(v.dtype), "shape": list(v.shape),
                   "value": [x.decode("utf-8", "replace") if isinstance(x, bytes) else x
                             for x in v.reshape(-1).tolist()]}
    results.append(item)
loaded = sorted(m for m in set(sys.modules) - before
                if m.split(".")[0] in ("kbert", "keras", "keras_hub", "torch", "transformers"))
assert not any(m.split(".")[0] == "kbert" for m in sys.modules)
with open(out_file, "w", encoding="utf-8") as f:
    json.dump({"results": results, "modules": loaded}, f)
"""


def run_fresh(export_dir: str, requests: list[dict], timeout: float = 600) -> dict:
    """Calls `serving_default` on each request (input name -> list of str) in a fresh
    process. Returns {"results": [{output: {"dtype", "shape", "value" (flat list)}}],
    "modules": [kbert/keras/torch modules that loading and calling the model imported]}."""
    with tempfile.TemporaryDirectory(prefix="kbert-check-") as tmp:
        req, out = os.path.join(tmp, "requests.json"), os.path.join(tmp, "out.json")
        with open(req, "w", encoding="utf-8") as f:
            json.dump(requests, f, ensure_ascii=False)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        proc = subprocess.run([sys.executable, "-c", _FRESH, os.path.abspath(export_dir), req,
                               out], capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=tmp)
        if proc.returncode != 0:
            raise RuntimeError(f"{export_dir}: the fresh process failed "
                               f"(exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def signatures(export_dir: str) -> dict:
    """Signature name -> {"inputs": {name: (dtype, shape)}, "outputs": {...}}."""
    from kbert import internals

    sm = internals.read_saved_model_proto(os.path.join(export_dir, "saved_model.pb"))

    def describe(tensors):
        return {name: (internals.dtype_name(t.dtype),
                       [d.size if d.size >= 0 else None for d in t.tensor_shape.dim])
                for name, t in sorted(tensors.items())}

    return {name: {"inputs": describe(sig.inputs), "outputs": describe(sig.outputs)}
            for meta in sm.meta_graphs for name, sig in meta.signature_def.items()
            if not name.startswith("__")}


def check(export_dir: str, serving_version: str = ops_lib.DEFAULT_SERVING_VERSION,
          out=print) -> bool:
    """Prints the report; returns whether the export passes."""
    from kbert.export.warmup import read_warmup_requests

    ok = True
    sigs = signatures(export_dir)
    out(f"{export_dir}")
    for name, sig in sigs.items():
        out(f"  signature {name}:")
        for kind in ("inputs", "outputs"):
            for t, (dtype, shape) in sig[kind].items():
                out(f"    {kind[:-1]:6s} {t}: {dtype} {shape}")
    if "serving_default" not in sigs:
        out("  ERROR: no serving_default signature")
        ok = False
    used = ops_lib.saved_model_ops(export_dir)
    missing = ops_lib.missing_ops(export_dir, serving_version)
    warning = ops_lib.older_server_warning(export_dir, serving_version)
    if warning:
        out(f"  WARNING: {warning}")
    out(f"  {len(used)} op types; tensorflow_model_server {serving_version} has "
        f"{len(used) - len(missing)} of them")
    for op in sorted(used):
        out(f"    {'MISSING ' if op in missing else ''}{op}")
    if missing:
        ok = False
        out(f"  ERROR: op(s) missing from the stock server {serving_version}: "
            f"{', '.join(sorted(missing))}")
    try:
        requests = [{k: [v.decode("utf-8") for v in vals] for k, vals in r.items()}
                    for r in read_warmup_requests(export_dir)]
    except FileNotFoundError as e:
        out(f"  ERROR: {e}")
        return False
    try:
        report = run_fresh(export_dir, requests)
    except RuntimeError as e:
        out(f"  ERROR: {e}")
        return False
    for request, result in zip(requests, report["results"]):
        batch = len(next(iter(request.values())))
        shapes = ", ".join(f"{k} {v['shape']}" for k, v in sorted(result.items()))
        out(f"  warmup request, batch {batch}: {shapes}")
    if report["modules"]:
        ok = False
        out(f"  ERROR: the fresh process loaded {report['modules']}")
    out(f"  {'OK' if ok else 'FAILED'}: {len(requests)} warmup requests answered in a fresh "
        "process with only tensorflow and tensorflow_text imported")
    return ok
