"""`python -m kbert.export check DIR`: would the stock tensorflow_model_server serve it?

Lists the signatures, checks every op type against the target server's, and replays
the warmup requests twice: through TensorFlow's C++ SavedModel loader, the one
`tensorflow_model_server` runs (`c_loader.py`: `TF_LoadSessionFromSavedModel` and
`Session::Run` by the SignatureDef's tensor names, in a process with no TensorFlow
Python), and through `tf.saved_model.load` in a fresh Python process that imports only
`tensorflow` and `tensorflow_text` (nothing of kbert, Keras or the training code). The
two must give the same answers.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Iterator

from kbert.export import ops as ops_lib

# Runs in the fresh process: `answer(export dir, requests JSON, output JSON, signature
# names)` for the four arguments, or with `--serve` for each line of its input (a JSON
# list of the four), printing a JSON line after each ("ok", or the failure's traceback).
_FRESH = r"""
import base64, gc, json, sys, traceback
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the text ops, as the server links them)

before = set(sys.modules)  # tensorflow_text itself imports tf.keras

def value(v):
    return base64.b64decode(v["b64"]) if isinstance(v, dict) else v

def answer(export_dir, requests_file, out_file, signature):
    with open(requests_file, encoding="utf-8") as f:
        requests = json.load(f)
    names = signature.split(",")  # one for all requests, or one per request
    loaded_signatures = tf.saved_model.load(export_dir).signatures
    results = []
    for n, request in enumerate(requests):
        fn = loaded_signatures[names[n % len(names)]]
        dtypes = {k: spec.dtype for k, spec in fn.structured_input_signature[1].items()}
        out = fn(**{k: tf.constant([value(x) for x in v], dtypes[k])
                    for k, v in request.items()})
        item = {}
        for k, v in out.items():
            v = v.numpy()
            item[k] = {"dtype": "string" if v.dtype == object else str(v.dtype),
                       "shape": list(v.shape),
                       "value": [x.decode("utf-8", "replace") if isinstance(x, bytes) else x
                                 for x in v.reshape(-1).tolist()]}
        results.append(item)
    loaded = sorted(m for m in set(sys.modules) - before
                    if m.split(".")[0] in ("kbert", "keras", "keras_hub", "torch",
                                           "transformers"))
    assert not any(m.split(".")[0] == "kbert" for m in sys.modules)
    with open(out_file, "w", encoding="utf-8") as f:
        json.dump({"results": results, "modules": loaded}, f)

if sys.argv[1:] == ["--serve"]:
    for line in sys.stdin:
        try:
            answer(*json.loads(line))
            status = "ok"
        except Exception:
            status = traceback.format_exc()
        gc.collect()  # the loaded export, before the next one
        print(json.dumps(status), flush=True)
else:
    answer(*sys.argv[1:5])
"""


C_LOADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "c_loader.py")
TOLERANCE = 1e-5  # numbers of the two loaders agree within this (absolute and relative)

# Inside `keep_served()`: {"also": requests the exporter also runs, "exports": export dir
# -> [(signature name, request, the C++ loader's result)]}.
_SERVED: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "kbert_served_warmup", default=None)


@contextlib.contextmanager
def keep_served(also: list = ()) -> Iterator[None]:
    """Inside, each export written keeps what TF Serving's C++ loader answered to its
    warmup requests before the export was moved into place, so that `check` of it
    right after (`python -m kbert.export`) compares those answers with the Python
    loader's instead of loading it in the C++ loader a second time. `also`: more
    requests for the exporter to run in that same load (not written as warmup), whose
    answers `served_results` and `check_served` then take (a task command's check of
    its export against the Python predictions): each a `serving_default` request, or a
    (signature name, request) pair. Nested, the inner one adds its requests to the
    outer's and keeps its answers for the outer too (a test around a task command
    that keeps its own)."""
    pairs = [item if isinstance(item, tuple) else ("serving_default", item) for item in also]
    outer = _SERVED.get()  # nested (a command run inside a test's): the outer's too
    token = _SERVED.set({
        "also": (outer["also"] if outer else []) + [(name, _plain(r)) for name, r in pairs],
        "exports": outer["exports"] if outer else {}})
    try:
        yield
    finally:
        _SERVED.reset(token)


def _plain(request: dict) -> dict:
    """`request` as JSON gives it back (lists, no tuples), for comparisons."""
    return json.loads(json.dumps(request))


def _same_bytes(request: dict) -> dict:
    """`_plain(request)` with every string as the {"b64": ...} of its bytes: text and
    {"b64": ...} of the same bytes are the same request (a warmup record read back
    holds bytes, the exporter's request text)."""
    from kbert.export.warmup import request_bytes

    def canonical(value):
        if isinstance(value, list):
            return [canonical(v) for v in value]
        if isinstance(value, bytes):
            return {"b64": base64.b64encode(value).decode("ascii")}
        return value

    return {k: canonical(request_bytes(v)) for k, v in _plain(request).items()}


def also_served() -> list[tuple[str, dict]]:
    """The (signature name, request) pairs `keep_served(also=...)` asks the exporter to
    run with its warmup."""
    return list((_SERVED.get() or {}).get("also", []))


def note_served(export_dir: str, names: list[str], requests: list[dict],
                results: list[dict]) -> None:
    """Called by the exporter: the C++ loader's `results` for `requests` (kept only
    inside `keep_served()`)."""
    kept = _SERVED.get()
    if kept is not None:
        kept["exports"][os.path.realpath(export_dir)] = [
            (name, _plain(request), result)
            for name, request, result in zip(names, requests, results)]


def _kept_results(export_dir: str, names: list[str], requests: list[dict]):
    """The C++ loader's answers kept for these very requests of this export, or None."""
    kept = (_SERVED.get() or {"exports": {}})["exports"].get(os.path.realpath(export_dir))
    if kept is None:
        return None
    answers: dict[str, list] = {}  # a request sent k times: its k answers, in order
    for name, request, result in kept:
        answers.setdefault(json.dumps([name, _same_bytes(request)], sort_keys=True),
                           []).append(result)
    seen: dict[str, int] = {}
    results = []
    for name, request in zip(names, requests):
        key = json.dumps([name, _same_bytes(request)], sort_keys=True)
        k = seen[key] = seen.get(key, -1) + 1
        results.append(answers[key][k] if k < len(answers.get(key, ())) else None)
    return None if any(r is None for r in results) else results


class ServingLoaderError(RuntimeError):
    """TF Serving's C++ loader could not load or run an export; the message is one line."""


def _fresh_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _signature_names(signature: str | list[str], requests: list[dict]) -> str:
    """The scripts' signature argument: one name for every request, or a list of one
    name per request (several signatures answered after one load)."""
    if isinstance(signature, str):
        return signature
    if len(signature) != len(requests):
        raise ValueError(f"{len(signature)} signature names for {len(requests)} requests")
    return ",".join(signature)


def _python_fresh(export_dir: str, requests: list[dict], timeout: float,
                  signature: str | list[str] = "serving_default") -> dict:
    with tempfile.TemporaryDirectory(prefix="kbert-check-") as tmp:
        req, out = os.path.join(tmp, "requests.json"), os.path.join(tmp, "out.json")
        with open(req, "w", encoding="utf-8") as f:
            json.dump(requests, f, ensure_ascii=False)
        args = [os.path.abspath(export_dir), req, out, _signature_names(signature, requests)]
        shared = _SHARED_PYTHON.get()
        if shared is not None:
            shared.answer(export_dir, args, timeout)
        else:
            proc = subprocess.run([sys.executable, "-c", _FRESH] + args, capture_output=True,
                                  text=True, timeout=timeout, env=_fresh_env(), cwd=tmp)
            if proc.returncode != 0:
                raise RuntimeError(f"{export_dir}: the fresh process failed "
                                   f"(exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        with open(out, encoding="utf-8") as f:
            return json.load(f)


class _PythonLoader:
    """One Python loader process (`_FRESH --serve`: only `tensorflow` and
    `tensorflow_text` imported) that answers export after export, started on first use
    and again after a failure or timeout; stderr goes to a file (TensorFlow's logs would
    fill a pipe)."""

    JOBS = 20  # a new process after this many exports: what loads leave behind is freed

    def __init__(self):
        self.proc = None
        self.jobs = 0
        self.home = tempfile.mkdtemp(prefix="kbert-python-loader-")  # its cwd: no kbert

    def _start(self) -> None:
        self.err = open(os.path.join(self.home, "stderr"), "w+", encoding="utf-8",
                        errors="replace")
        self.proc = subprocess.Popen([sys.executable, "-c", _FRESH, "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True, env=_fresh_env(),
                                     cwd=self.home)

    def answer(self, export_dir: str, args: list[str], timeout: float) -> None:
        import select

        if self.jobs >= self.JOBS or (self.proc is not None and self.proc.poll() is not None):
            self.stop()  # enough loads for one process, or it died
        if self.proc is None:
            self._start()
        self.jobs += 1
        start = os.fstat(self.err.fileno()).st_size  # this job's part of stderr
        self.proc.stdin.write(json.dumps(args) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:  # timed out, or the process died
            self.err.seek(start)
            stderr = self.err.read()[-3000:]
            self.stop()
            if not ready:
                raise subprocess.TimeoutExpired("python loader", timeout)
            raise RuntimeError(f"{export_dir}: the Python loader process failed:\n{stderr}")
        status = json.loads(line)
        if status != "ok":
            raise RuntimeError(f"{export_dir}: the Python loader failed:\n{status[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.err.close()
            self.proc = None
        self.jobs = 0

    def close(self) -> None:
        self.stop()
        import shutil

        shutil.rmtree(self.home, ignore_errors=True)


_SHARED_PYTHON: contextvars.ContextVar[_PythonLoader | None] = contextvars.ContextVar(
    "kbert_shared_python_loader", default=None)


@contextlib.contextmanager
def shared_python_loader() -> Iterator[None]:
    """Inside, the Python side of `run_fresh` and `check` (`tf.saved_model.load` with
    only `tensorflow` and `tensorflow_text` imported) runs in one process that loads
    export after export, instead of a new process per call: the same answers, without
    importing TensorFlow each time (about 5 s). For a test session (tests/conftest.py);
    the C++ loader keeps its process per export."""
    loader = _PythonLoader()
    token = _SHARED_PYTHON.set(loader)
    try:
        yield
    finally:
        _SHARED_PYTHON.reset(token)
        loader.close()


def loader_failure(export_dir: str, error: str) -> str:
    """One line for a C++ loader failure; a variable the restore op left unfilled is
    named with what it means."""
    missing = re.search(r"Could not find variable ([^\s.]+(?:\.[^\s.]+)*)\. ", error)
    if missing:
        return (f"{export_dir}: TF Serving's C++ loader cannot run this export: variable "
                f"{missing.group(1)!r} is not restored by the SavedModel's restore op "
                "(written by an older kbert, or by a tf.Module that holds a Keras 3 "
                "model: export it again with this kbert)")
    return f"{export_dir}: TF Serving's C++ loader failed: {error}"


def run_c_loader(export_dir: str, requests: list[dict],
                 signature: str | list[str] = "serving_default", timeout: float = 600,
                 each: bool = False, max_rss: int | None = None, threads: int = 1,
                 xla_cpu_compilation_enabled: bool | None = None) -> dict:
    """Runs `requests` as `tensorflow_model_server` does: TensorFlow's C++ SavedModel
    loader (`TF_LoadSessionFromSavedModel`) and `Session::Run` on the SignatureDef's
    tensor names, in a fresh process that imports no TensorFlow Python (`c_loader.py`,
    with tensorflow-text's op libraries loaded by `TF_LoadLibrary`). Returns
    {"results": [...], "signatures": {...}, "peak_rss": [...]} as `run_fresh`; raises
    ServingLoaderError with one line when loading or a request fails. `each`: a failed
    request gets {"error": one line} in `results` and the others still run. `max_rss`:
    the process is killed, and ServingLoaderError raised, once its resident memory
    passes this many bytes (a guard for requests meant to exhaust memory). `threads`:
    requests run that many at once on the one session. `xla_cpu_compilation_enabled`:
    the server's flag (off: XLA-compiled functions fail, as in a server without it);
    None: on where the export holds functions XLA compiles (`ops.needs_xla`)."""
    if xla_cpu_compilation_enabled is None:
        xla_cpu_compilation_enabled = ops_lib.needs_xla(export_dir)
    with tempfile.TemporaryDirectory(prefix="kbert-c-loader-") as tmp:
        req, out = os.path.join(tmp, "requests.json"), os.path.join(tmp, "out.json")
        with open(req, "w", encoding="utf-8") as f:
            json.dump(requests, f, ensure_ascii=False)
        argv = [sys.executable, C_LOADER, os.path.abspath(export_dir), req, out,
                "--signature", _signature_names(signature, requests)] + (
                    ["--each"] if each else []) + (
                    ["--threads", str(threads)] if threads > 1 else []) + (
                    ["--xla_cpu_compilation_enabled"] if xla_cpu_compilation_enabled else [])
        returncode, stderr = _run_guarded(argv, tmp, timeout, max_rss)
        if not os.path.exists(out):
            raise ServingLoaderError(f"{export_dir}: the C++ loader process failed (exit "
                                     f"{returncode}): {stderr.strip()[-500:]}")
        with open(out, encoding="utf-8") as f:
            report = json.load(f)
    if report["python_modules"]:
        raise ServingLoaderError(f"the C++ loader process imported Python modules it must "
                                 f"not: {report['python_modules'][:5]}")
    if report["error"]:
        raise ServingLoaderError(loader_failure(export_dir, report["error"]))
    return report


def _resident_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _run_guarded(argv: list[str], cwd: str, timeout: float,
                 max_rss: int | None) -> tuple[int, str]:
    """(exit status, stderr) of `argv`; killed past `timeout` seconds
    (subprocess.TimeoutExpired) or past `max_rss` resident bytes (ServingLoaderError)."""
    import time

    if max_rss is None:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=_fresh_env(), cwd=cwd)
        return proc.returncode, proc.stderr
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                env=_fresh_env(), cwd=cwd)
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None:
                if _resident_bytes(proc.pid) > max_rss:
                    proc.kill()
                    proc.wait()
                    raise ServingLoaderError(
                        f"the C++ loader process passed {max_rss / 2 ** 30:.1f} GiB "
                        "resident and was stopped")
                if time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    raise subprocess.TimeoutExpired(argv, timeout)
                time.sleep(0.02)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        return proc.returncode, err.read()


def served_results(export_dir: str, requests: list[dict],
                   signature: str | list[str] = "serving_default",
                   each: bool = False) -> list[dict]:
    """TF Serving's C++ loader's answers to these requests of `signature` (or a list of
    one signature name per request): those the exporter kept where it ran them in its
    own load (`keep_served(also=...)` around the export; a request sent twice there
    answers twice, in order), else a fresh `run_c_loader`. Each answer as
    `run_c_loader`'s `results` give it; a refused request raises ServingLoaderError with
    the loader's line, as `run_c_loader` does, or with `each` is answered
    {"error": that line}."""
    names = [signature] * len(requests) if isinstance(signature, str) else list(signature)
    kept = _kept_results(export_dir, names, requests)
    if kept is None:
        return run_c_loader(export_dir, requests, names, each=each)["results"]
    for result in kept if not each else ():
        if "error" in result:
            raise ServingLoaderError(loader_failure(export_dir, result["error"]))
    return kept


def check_served(export_dir: str, request: dict, output: str, want: list, names: list,
                 what: str) -> None:
    """Runs `request` through TF Serving's C++ loader (`served_results`: the answers the
    exporter kept where it ran `request` in its own load, `keep_served(also=[request])`,
    else a fresh load) and raises one RuntimeError naming the first rows (`names`) whose
    `output` differs from `want` (`what`: where `want` comes from, for the message)."""
    served = served_results(export_dir, [request])[0][output]["value"]
    differ = [name for name, a, b in zip(names, served, want) if a != b]
    if differ:
        raise RuntimeError(f"{export_dir}: the SavedModel answers {len(differ)} of "
                           f"{len(want)} requests differently from {what} ({differ[:5]})")


def _deterministic(export_dir: str) -> bool:
    """False for a generate export that samples with a new seed for each request."""
    path = os.path.join(export_dir, "assets.extra", "kbert_generate.json")
    if not os.path.exists(path):
        return True
    with open(path, encoding="utf-8") as f:
        settings = json.load(f)
    return settings.get("sampler") in ("greedy", "beam") or settings.get("seed") is not None


def _deterministic_requests(requests: list[dict]) -> bool:
    """A per-request `generate` call answers alike twice unless a row samples (its
    temperature above 0) with a fresh seed (-1)."""
    return all(t <= 0 or s >= 0 for request in requests
               for t, s in zip(request.get("temperature", []), request.get("seed", [])))


def compare_results(python: list[dict], served: list[dict],
                    values: bool | list[bool] = True) -> list[str]:
    """Differences between two loaders' answers: outputs, dtypes and shapes equal;
    strings equal and numbers within TOLERANCE when `values` (or, a list, when that
    request's entry is true). [] when they agree."""
    problems = []
    if isinstance(values, bool):
        values = [values] * len(python)
    for n, (a, b) in enumerate(zip(python, served)):
        if sorted(a) != sorted(b):
            problems.append(f"request {n}: outputs {sorted(a)} != {sorted(b)}")
            continue
        for key in sorted(a):
            x, y = a[key], b[key]
            if x["dtype"] != y["dtype"] or x["shape"] != y["shape"]:
                problems.append(f"request {n}, {key}: {x['dtype']} {x['shape']} != "
                                f"{y['dtype']} {y['shape']}")
            elif values[n]:
                for i, (u, v) in enumerate(zip(x["value"], y["value"])):
                    if isinstance(u, str) or isinstance(u, bool) or u is None:
                        same = u == v
                    else:
                        same = abs(u - v) <= TOLERANCE * (1 + abs(u))
                    if not same:
                        problems.append(f"request {n}, {key}[{i}]: {u!r} (tf.saved_model.load)"
                                        f" != {v!r} (C++ loader)")
                        break
    if len(python) != len(served):
        problems.append(f"{len(python)} answers != {len(served)}")
    return problems


def run_fresh(export_dir: str, requests: list[dict], timeout: float = 600,
              signature: str | list[str] = "serving_default") -> dict:
    """Calls `signature` (or a list of one signature name per request) on each request
    (input name -> list of str, or of numbers for a numeric input) twice, each
    in a fresh process: through `tf.saved_model.load` with only `tensorflow` and
    `tensorflow_text` imported, and through TF Serving's C++ loader (`run_c_loader`).
    The two must agree (strings equal, numbers within TOLERANCE; for a generate export
    that samples without a seed, dtypes and shapes), else ServingLoaderError.
    Returns {"results": [{output: {"dtype", "shape", "value" (flat list)}}] (the C++
    loader's, which equal the Python ones), "python_results": the Python loader's,
    "modules": [kbert/keras/torch modules that loading and calling the model
    imported]}."""
    names = [signature] * len(requests) if isinstance(signature, str) else list(signature)
    report = _python_fresh(export_dir, requests, timeout, signature)
    served = _kept_results(export_dir, names, requests)
    if served is None:
        served = run_c_loader(export_dir, requests, signature, timeout=timeout)["results"]
    deterministic = [_deterministic(export_dir) if name == "serving_default" else
                     _deterministic_requests([request])
                     for name, request in zip(names, requests)]
    problems = compare_results(report["results"], served, deterministic)
    if problems:
        raise ServingLoaderError(f"{export_dir}: TF Serving's C++ loader answers otherwise "
                                 f"than tf.saved_model.load: {problems[0]}"
                                 + (f" (and {len(problems) - 1} more)" if len(problems) > 1
                                    else ""))
    return {"results": served, "python_results": report["results"],
            "modules": report["modules"]}


def saved_variables(export_dir: str) -> dict[str, list[int]]:
    """Checkpoint key -> shape of an export's `variables/` (what the server restores)."""
    import tensorflow as tf

    return dict(tf.train.list_variables(os.path.join(export_dir, "variables", "variables")))


def variables_size(export_dir: str) -> int:
    """Bytes of an export's `variables/` folder."""
    folder = os.path.join(export_dir, "variables")
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))


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


def request_values(values):
    """A warmup input as the loaders take it: text for UTF-8 bytes, {"b64": ...} for
    other bytes (serialized tf.Examples), numbers as they are."""
    if isinstance(values, list):
        return [request_values(v) for v in values]
    if isinstance(values, bytes):
        try:
            return values.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(values).decode("ascii")}
    return values


def check(export_dir: str, serving_version: str = ops_lib.DEFAULT_SERVING_VERSION,
          out=print, verbose: bool = False) -> bool:
    """Prints the report (every op type with `verbose`, else the missing ones); returns
    whether the export passes."""
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
    lacking = {op for op in missing if op in used}
    out(f"  {len(used)} op types; tensorflow_model_server {serving_version} has "
        f"{len(used) - len(lacking)} of them (read from TensorFlow {serving_version} and "
        f"tensorflow-text {ops_lib.TEXT_PINS[serving_version]})")
    for op in sorted(set(used) | set(missing)):
        if verbose or op in missing:
            out(f"    {'MISSING ' if op in missing else ''}{op}")
    if missing:
        ok = False
        out(f"  ERROR: not in the stock tensorflow_model_server {serving_version}: "
            f"{', '.join(missing)} (used by {export_dir})"
            f"{ops_lib.reexport_hint(missing, serving_version)}")
    try:
        requests = [(name, {k: request_values(vals) for k, vals in r.items()})
                    for name, r in read_warmup_requests(export_dir, with_signatures=True)]
    except FileNotFoundError as e:
        out(f"  ERROR: {e}")
        return False
    # Every signature's requests after one load by each loader.
    try:
        report = run_fresh(export_dir, [r for _, r in requests],
                           signature=[name for name, _ in requests])
    except RuntimeError as e:  # either process failed, or the loaders disagree
        out(f"  ERROR: {e}")
        return False
    for (signature, request), result in zip(requests, report["results"]):
        named = "" if signature == "serving_default" else f" ({signature})"
        batch = len(next(iter(request.values())))
        shapes = ", ".join(f"{k} {v['shape']}" for k, v in sorted(result.items()))
        out(f"  warmup request{named}, batch {batch}: {shapes}")
    if report["modules"]:
        ok = False
        out(f"  ERROR: the fresh process loaded {report['modules']}")
    out(f"  {'OK' if ok else 'FAILED'}: {len(requests)} warmup requests answered by TF "
        "Serving's C++ SavedModel loader (no TensorFlow Python), the same as by "
        "tf.saved_model.load in a fresh process with only tensorflow and tensorflow_text "
        "imported")
    return ok
