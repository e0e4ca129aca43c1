"""A TF Serving `--batching_parameters_file` tuned for an export on this machine.

`python -m kbert.export check` times the export's `serving_default` on its own warmup
request at batch sizes 1, 2, 4, ... (a few calls each, in this process, through
`tf.saved_model.load`) and writes a `BatchingParameters` text proto (the message of
TF Serving's `session_bundle_config.proto`):

- `max_batch_size`: the batch size after which doubling no longer buys 10% more
  examples/s (on a 2-core CPU often small: the cores are busy at batch 1 already);
- `batch_timeout_micros`: a quarter of a batch-1 call, at least 100 us: a lone request
  waits at most that long for others to join it;
- `allowed_batch_sizes`: the swept sizes up to `max_batch_size` (fewer shapes to run);
- `num_batch_threads`: the CPUs; `max_enqueued_batches`: 100;
- `pad_variable_length_inputs`: true (the `token_ids` signatures take [batch, seq]).

Serve with `tensorflow_model_server --enable_batching --batching_parameters_file=FILE`.
"""

from __future__ import annotations

import os
import statistics
import time

GAIN = 1.10  # doubling the batch must buy this much throughput to be worth it
SIZES = (1, 2, 4, 8, 16, 32, 64)
BUDGET_S = 20.0  # the sweep stops at the first size past this much time


def sweep(export_dir: str, request: dict, sizes=SIZES, calls: int = 3,
          budget_s: float = BUDGET_S, signature: str = "serving_default") -> dict[int, float]:
    """{batch size: median seconds of a `signature` call} for `request`'s rows repeated
    to each size; stops early once `budget_s` is spent."""
    import tensorflow as tf

    serve = tf.saved_model.load(export_dir).signatures[signature]
    rows = len(next(iter(request.values())))
    times, start = {}, time.perf_counter()
    for size in sizes:
        batch = {k: tf.constant([v[i % rows] for i in range(size)])
                 for k, v in request.items()}
        serve(**batch)  # traced / warmed
        runs = []
        for _ in range(calls):
            t = time.perf_counter()
            serve(**batch)
            runs.append(time.perf_counter() - t)
        times[size] = statistics.median(runs)
        if time.perf_counter() - start > budget_s:
            break
    return times


def choose(times: dict[int, float], cpus: int | None = None) -> dict:
    """The BatchingParameters fields for a sweep's `times` (see the module docstring)."""
    sizes = sorted(times)
    best = sizes[0]
    for small, big in zip(sizes, sizes[1:]):
        gain = (times[small] / small) / (times[big] / big)
        if gain < GAIN:
            break
        best = big
    return {"max_batch_size": best,
            "batch_timeout_micros": max(100, int(times[sizes[0]] * 1e6 / 4)),
            "max_enqueued_batches": 100,
            "num_batch_threads": cpus or os.cpu_count() or 1,
            "allowed_batch_sizes": [s for s in sizes if s <= best],
            "pad_variable_length_inputs": True}


def to_text(params: dict) -> str:
    """The text proto TF Serving reads with --batching_parameters_file."""
    lines = [f"{name} {{ value: {params[name]} }}" for name in (
        "max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
        "num_batch_threads")]
    lines += [f"allowed_batch_sizes: {s}" for s in params["allowed_batch_sizes"]]
    lines.append(f"pad_variable_length_inputs: {str(params['pad_variable_length_inputs']).lower()}")
    return "\n".join(lines) + "\n"


def default_path(export_dir: str) -> str:
    """EXPORT_BASE/NAME/batching_parameters.txt: beside the version folders (TF Serving
    loads only the numbered ones)."""
    return os.path.join(os.path.dirname(os.path.abspath(export_dir)),
                        "batching_parameters.txt")


def tune(export_dir: str, path: str | None = None):
    """Sweeps the export on its largest warmup request and writes the parameters to
    `path` (default `default_path`), atomically: -> (path, signature swept, times,
    params). serving_default's requests; a SavedModel of several heads warms each head's
    signature instead (serving_default is the first head's), so the first of those."""
    from kbert.export.warmup import read_warmup_requests
    from kbert.io import atomic_file

    warmup = read_warmup_requests(export_dir, with_signatures=True)
    names = [name for name, _ in warmup]
    signature = "serving_default" if "serving_default" in names else names[0]
    request = max((r for name, r in warmup if name == signature),
                  key=lambda r: len(next(iter(r.values()))))
    times = sweep(export_dir, request, signature=signature)
    params = choose(times)
    path = path or default_path(export_dir)
    with atomic_file(path) as f:
        f.write(to_text(params))
    return path, signature, times, params
