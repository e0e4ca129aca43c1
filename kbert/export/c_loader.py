"""Runs a SavedModel as `tensorflow_model_server` does, with no TensorFlow Python.

TF Serving loads a SavedModel with TensorFlow's C++ loader (`tensorflow::LoadSavedModel`:
a Session, the MetaGraphDef tagged "serve", the saver's restore op, the init op with the
asset paths fed) and answers a request with `Session::Run` on the tensor names of the
signature's SignatureDef. TensorFlow's C API exposes that same loader as
`TF_LoadSessionFromSavedModel` in the wheel's `libtensorflow_cc.so.2`; this script calls
it through `ctypes`, with tensorflow-text's op libraries loaded by `TF_LoadLibrary` as
the server links them, and runs each request by the SignatureDef's tensor names.

It is a script, not a module of the package: it imports only the standard library (no
`tensorflow`, `numpy`, `kbert` or protobuf Python; the MetaGraphDef is read with a small
protobuf wire-format reader below), so what it shows is what the C++ runtime does alone.

    python c_loader.py EXPORT_DIR REQUESTS.json OUT.json [--signature serving_default]
        [--xla_cpu_compilation_enabled]

REQUESTS.json: a list of {input name: [value, ...]} (a batch each: strings, {"b64": ...}
for bytes, or numbers for the signature's numeric inputs). `--signature A,B,...`: one
signature name per request, each run by its own (one load for several signatures).
OUT.json: {"signatures": {name: {"inputs": {...}, "outputs": {...}}},
           "results": [{output: {"dtype", "shape", "value" (flat list)}}],
           "error": null or one line (the first failure: loading or a request),
           "loaded_rss": bytes resident after loading,
           "peak_rss": [each request's peak resident bytes (Linux: VmHWM, reset
                        before each request)]}
With `--threads N`, N requests run at once on the one session (as a server's threads
run them; the results keep the requests' order). With `--each`, a request that fails
gets {"error": one line} in `results` and the next request runs (`error` is then only
a loading failure). `--xla_cpu_compilation_enabled`: as the server's flag (without
it, XLA-compiled functions fail, as in a server started without it). A string input may be a value (rank 0) or nested lists (rank 2,
...), as a client may send: the server does not check ranks against the SignatureDef. The exit status is 0 when every request was
answered (with `--each`: when the export loaded), 1 otherwise.
"""

from __future__ import annotations

import base64
import ctypes
import glob
import importlib.util
import json
import os
import struct
import sys

# TF_DataType values (tensorflow/c/tf_datatype.h); the same numbers as DataType in
# types.proto.
DTYPES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
          7: "string", 9: "int64", 10: "bool", 14: "bfloat16", 17: "uint16", 19: "float16",
          22: "uint32", 23: "uint64"}
_STRUCT = {"float32": "f", "float64": "d", "int32": "i", "uint8": "B", "int16": "h",
           "int8": "b", "int64": "q", "bool": "?", "uint16": "H", "uint32": "I",
           "uint64": "Q"}
TF_STRING = 7
TSTRING_SIZE = 24  # sizeof(TF_TString)


# --- protobuf wire format: just what a SignatureDef needs ----------------------------

def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) of a serialized message; value is an int for
    varints and fixed-size fields, bytes for length-delimited ones."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = struct.unpack_from("<Q", buf, i)[0], i + 8
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == 5:
            value, i = struct.unpack_from("<I", buf, i)[0], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _map_entries(buf: bytes, field: int):
    """key -> value bytes of a `map<string, Message>` field."""
    out = {}
    for number, _, entry in _fields(buf):
        if number != field:
            continue
        key = value = b""
        for n, _, v in _fields(entry):
            if n == 1:
                key = v
            elif n == 2:
                value = v
        out[key.decode("utf-8")] = value
    return out


def _tensor_info(buf: bytes) -> dict:
    """TensorInfo: name = 1, dtype = 2, tensor_shape = 3 (dim = 2: size = 1)."""
    info = {"name": None, "dtype": None, "shape": None}
    for number, _, value in _fields(buf):
        if number == 1:
            info["name"] = value.decode("utf-8")
        elif number == 2:
            info["dtype"] = DTYPES.get(value, f"dtype {value}")
        elif number == 3:
            dims, unknown_rank = [], False
            for n, _, v in _fields(value):
                if n == 2:
                    size = next((s for m, _, s in _fields(v) if m == 1), 0)
                    size = size - (1 << 64) if size >= 1 << 63 else size
                    dims.append(None if size < 0 else size)
                elif n == 3 and v:
                    unknown_rank = True
            info["shape"] = None if unknown_rank else dims
    return info


def signature_defs(meta_graph_def: bytes) -> dict:
    """Signature name -> {"inputs"/"outputs": {key: TensorInfo dict}, "method_name"} of a
    serialized MetaGraphDef (signature_def = 5; SignatureDef: inputs = 1, outputs = 2,
    method_name = 3)."""
    out = {}
    for name, sig in _map_entries(meta_graph_def, 5).items():
        method = next((v.decode("utf-8") for n, _, v in _fields(sig) if n == 3), "")
        out[name] = {"inputs": {k: _tensor_info(v) for k, v in _map_entries(sig, 1).items()},
                     "outputs": {k: _tensor_info(v) for k, v in _map_entries(sig, 2).items()},
                     "method_name": method}
    return out


# --- the C API -----------------------------------------------------------------------

class TF_Output(ctypes.Structure):
    _fields_ = [("oper", ctypes.c_void_p), ("index", ctypes.c_int)]


class TF_Buffer(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t),
                ("data_deallocator", ctypes.c_void_p)]


def _package_dir(name: str) -> str:
    """A package's folder, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name!r} is not installed")
    return list(spec.submodule_search_locations)[0]


def text_op_libraries() -> list[str]:
    """tensorflow-text's op libraries (`tensorflow_text/python/ops/_*.so`)."""
    return sorted(glob.glob(os.path.join(_package_dir("tensorflow_text"), "python", "ops",
                                         "_*.so")))


class CApi:
    """The few C API functions the server's load-and-run path needs.

    `xla_cpu_compilation_enabled`: `tensorflow_model_server`'s flag of that name. Without
    it the server calls `tensorflow::DisableXlaCompilation()` before loading anything
    (model_servers/main.cc), so that a function compiled with XLA fails at its first
    run ("XLA compilation disabled"); this does the same. The switch is process-wide."""

    def __init__(self, xla_cpu_compilation_enabled: bool = False):
        tf_dir = _package_dir("tensorflow")
        mode = getattr(os, "RTLD_GLOBAL", 0) | getattr(os, "RTLD_NOW", 0)
        ctypes.CDLL(os.path.join(tf_dir, "libtensorflow_framework.so.2"), mode=mode)
        lib = ctypes.CDLL(os.path.join(tf_dir, "libtensorflow_cc.so.2"), mode=mode)
        if not xla_cpu_compilation_enabled:
            disable = lib._ZN10tensorflow21DisableXlaCompilationEv  # C++: no arguments
            disable.restype, disable.argtypes = None, []
            disable()
        p, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
        signatures = {
            "TF_NewStatus": (p, []), "TF_DeleteStatus": (None, [p]),
            "TF_GetCode": (i, [p]), "TF_Message": (ctypes.c_char_p, [p]),
            "TF_LoadLibrary": (p, [ctypes.c_char_p, p]),
            "TF_NewGraph": (p, []), "TF_DeleteGraph": (None, [p]),
            "TF_NewSessionOptions": (p, []), "TF_DeleteSessionOptions": (None, [p]),
            "TF_NewBuffer": (ctypes.POINTER(TF_Buffer), []),
            "TF_DeleteBuffer": (None, [ctypes.POINTER(TF_Buffer)]),
            "TF_LoadSessionFromSavedModel": (p, [p, p, ctypes.c_char_p,
                                                 ctypes.POINTER(ctypes.c_char_p), i, p,
                                                 ctypes.POINTER(TF_Buffer), p]),
            "TF_CloseSession": (None, [p, p]), "TF_DeleteSession": (None, [p, p]),
            "TF_GraphOperationByName": (p, [p, ctypes.c_char_p]),
            "TF_SessionRun": (None, [p, p, ctypes.POINTER(TF_Output), ctypes.POINTER(p), i,
                                     ctypes.POINTER(TF_Output), ctypes.POINTER(p), i,
                                     ctypes.POINTER(p), i, p, p]),
            "TF_AllocateTensor": (p, [i, ctypes.POINTER(ctypes.c_int64), i, sz]),
            "TF_DeleteTensor": (None, [p]), "TF_TensorData": (p, [p]),
            "TF_TensorByteSize": (sz, [p]), "TF_TensorType": (i, [p]),
            "TF_NumDims": (i, [p]), "TF_Dim": (ctypes.c_int64, [p, i]),
            "TF_StringInit": (None, [p]), "TF_StringCopy": (None, [p, ctypes.c_char_p, sz]),
            "TF_StringGetDataPointer": (p, [p]), "TF_StringGetSize": (sz, [p]),
            "TF_StringDealloc": (None, [p]),
        }
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name[3:], fn)

    def check(self, status, what: str) -> None:
        if self.GetCode(status) != 0:
            message = (self.Message(status) or b"").decode("utf-8", "replace")
            raise ServingError(f"{what}: {message}")


class ServingError(RuntimeError):
    """A failure of the C++ loader or of Session::Run, with TensorFlow's message."""


class Served:
    """A SavedModel loaded by the C++ loader, its signatures run by tensor name."""

    def __init__(self, export_dir: str, tags=("serve",), op_libraries=None,
                 xla_cpu_compilation_enabled: bool = False):
        self.api = api = CApi(xla_cpu_compilation_enabled)
        self.status = api.NewStatus()
        for path in text_op_libraries() if op_libraries is None else op_libraries:
            api.LoadLibrary(path.encode(), self.status)
            api.check(self.status, f"TF_LoadLibrary({os.path.basename(path)})")
        self.graph = api.NewGraph()
        options = api.NewSessionOptions()
        meta = api.NewBuffer()
        tag_array = (ctypes.c_char_p * len(tags))(*[t.encode() for t in tags])
        self.session = api.LoadSessionFromSavedModel(
            options, None, os.fsencode(export_dir), tag_array, len(tags), self.graph, meta,
            self.status)
        api.DeleteSessionOptions(options)
        try:
            api.check(self.status, "loading the SavedModel")
            self.signatures = signature_defs(ctypes.string_at(meta.contents.data,
                                                              meta.contents.length))
        finally:
            api.DeleteBuffer(meta)

    def _output(self, tensor_name: str) -> TF_Output:
        op, _, index = tensor_name.partition(":")
        oper = self.api.GraphOperationByName(self.graph, op.encode())
        if not oper:
            raise ServingError(f"the graph has no operation {op!r}")
        return TF_Output(oper, int(index or 0))

    def _string_tensor(self, values):
        """A string tensor from bytes (rank 0) or a list, or nested lists of equal
        lengths (rank 1, 2, ...), of bytes: the shape a client sends, whatever the
        signature declares (the server does not check ranks; the graph must)."""
        api = self.api
        shape, flat = _shape_and_values(values)
        dims = (ctypes.c_int64 * len(shape))(*shape)
        tensor = api.AllocateTensor(TF_STRING, dims, len(shape), TSTRING_SIZE * len(flat))
        data = api.TensorData(tensor)
        for k, value in enumerate(flat):
            api.StringInit(data + k * TSTRING_SIZE)
            api.StringCopy(data + k * TSTRING_SIZE, value, len(value))
        return tensor, len(flat)

    def _number_tensor(self, dtype: str, values: list):
        """A tensor of a numeric dtype (the signature's) from a list, or nested lists of
        equal lengths ([batch, n], [batch, n, m], ...)."""
        api = self.api
        shape, values = _shape_and_values(values)
        raw = struct.pack(f"<{len(values)}{_STRUCT[dtype]}", *values)
        dims = (ctypes.c_int64 * len(shape))(*shape)
        code = {name: code for code, name in DTYPES.items()}[dtype]
        tensor = api.AllocateTensor(code, dims, len(shape), len(raw))
        ctypes.memmove(api.TensorData(tensor), raw, len(raw))
        return tensor

    def _free_string_tensor(self, tensor_and_count) -> None:
        tensor, count = tensor_and_count
        data = self.api.TensorData(tensor)
        for k in range(count):
            self.api.StringDealloc(data + k * TSTRING_SIZE)
        self.api.DeleteTensor(tensor)

    def _read(self, tensor) -> dict:
        api = self.api
        dtype = DTYPES.get(api.TensorType(tensor), f"dtype {api.TensorType(tensor)}")
        shape = [api.Dim(tensor, d) for d in range(api.NumDims(tensor))]
        count = 1
        for d in shape:
            count *= d
        data = api.TensorData(tensor)
        if dtype == "string":
            value = []
            for k in range(count):
                item = data + k * TSTRING_SIZE
                raw = ctypes.string_at(api.StringGetDataPointer(item), api.StringGetSize(item))
                value.append(raw.decode("utf-8", "replace"))
        elif dtype in _STRUCT:
            raw = ctypes.string_at(data, api.TensorByteSize(tensor))
            value = list(struct.unpack(f"<{count}{_STRUCT[dtype]}", raw))
        else:
            raise ServingError(f"output of unsupported dtype {dtype}")
        return {"dtype": dtype, "shape": shape, "value": value}

    def run(self, inputs: dict, signature: str = "serving_default") -> dict:
        """{input key: list of str (or of numbers, for a numeric input)} -> {output key:
        {"dtype", "shape", "value"}}, run by the SignatureDef's tensor names as the
        server's Predict API does."""
        if signature not in self.signatures:
            raise ServingError(f"no signature {signature!r} (the export has "
                               f"{sorted(self.signatures)})")
        sig = self.signatures[signature]
        unknown = sorted(set(inputs) - set(sig["inputs"]))
        missing = sorted(set(sig["inputs"]) - set(inputs))
        if unknown or missing:
            raise ServingError(f"signature {signature!r} takes {sorted(sig['inputs'])}; "
                               f"got {sorted(inputs)}")
        keys = sorted(inputs)
        feeds = (TF_Output * len(keys))(*[self._output(sig["inputs"][k]["name"])
                                          for k in keys])
        dtypes = [sig["inputs"][k]["dtype"] for k in keys]
        for k, dtype in zip(keys, dtypes):
            if dtype != "string" and dtype not in _STRUCT:
                raise ServingError(f"input {k!r} of unsupported dtype {dtype}")
        tensors = [self._string_tensor(_bytes_of(inputs[k])) if dtype == "string" else
                   self._number_tensor(dtype, inputs[k]) for k, dtype in zip(keys, dtypes)]
        feed_values = (ctypes.c_void_p * len(keys))(
            *[t[0] if dtype == "string" else t for t, dtype in zip(tensors, dtypes)])
        out_keys = sorted(sig["outputs"])
        fetches = (TF_Output * len(out_keys))(*[self._output(sig["outputs"][k]["name"])
                                                for k in out_keys])
        results = (ctypes.c_void_p * len(out_keys))()
        status = self.api.NewStatus()  # one per call: runs may overlap (`--threads`)
        try:
            self.api.SessionRun(self.session, None, feeds, feed_values, len(keys), fetches,
                                results, len(out_keys), None, 0, None, status)
            self.api.check(status, f"running {signature}")
            return {k: self._read(results[n]) for n, k in enumerate(out_keys)}
        finally:
            self.api.DeleteStatus(status)
            for tensor, dtype in zip(tensors, dtypes):
                if dtype == "string":
                    self._free_string_tensor(tensor)
                else:
                    self.api.DeleteTensor(tensor)
            for n in range(len(out_keys)):
                if results[n]:
                    self.api.DeleteTensor(results[n])

    def close(self) -> None:
        self.api.CloseSession(self.session, self.status)
        self.api.DeleteSession(self.session, self.status)
        self.api.DeleteGraph(self.graph)
        self.api.DeleteStatus(self.status)


def _shape_and_values(values) -> tuple[list[int], list]:
    """(shape, flat values) of a value (rank 0) or nested lists of equal lengths."""
    if not isinstance(values, list):
        return [], [values]
    shape = [len(values)]
    while values and isinstance(values[0], list):
        shape.append(len(values[0]))
        if any(not isinstance(row, list) or len(row) != shape[-1] for row in values):
            raise ServingError(f"a {len(shape)}-dimensional input needs rows of one "
                               "length at each level")
        values = [x for row in values for x in row]
    return shape, values


def _bytes_of(value):
    """`_bytes` of each string of a (nested) list, or of one string."""
    if isinstance(value, list):
        return [_bytes_of(v) for v in value]
    return _bytes(value)


def _bytes(value) -> bytes:
    """A string input's value: text, or {"b64": ...} for bytes (TF Serving's REST
    convention, e.g. serialized tf.Examples)."""
    if isinstance(value, dict):
        return base64.b64decode(value["b64"])
    return value.encode("utf-8") if isinstance(value, str) else value


def first_line(message: str) -> str:
    """TensorFlow's messages run over several lines (node names, stack); the first
    one says what failed."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return lines[0] if lines else message


def _status_bytes(field: str) -> int | None:
    """A `/proc/self/status` memory field (VmRSS, VmHWM) in bytes; None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak() -> None:
    """Starts a new peak-resident count (Linux: "5" to /proc/self/clear_refs resets
    VmHWM), so that each request's peak is its own, not the load's."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss_bytes() -> int:
    """The peak resident memory since the last `_reset_peak` (or since the start)."""
    peak = _status_bytes("VmHWM")
    if peak is None:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return peak


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signature = "serving_default"
    if "--signature" in argv:
        k = argv.index("--signature")
        signature = argv[k + 1]
        argv = argv[:k] + argv[k + 2:]
    each = "--each" in argv  # a failed request is recorded and the next one runs
    xla = "--xla_cpu_compilation_enabled" in argv  # as tensorflow_model_server's flag
    argv = [a for a in argv if a not in ("--each", "--xla_cpu_compilation_enabled")]
    threads = 1
    if "--threads" in argv:  # requests at once, on the one session, as a server runs them
        k = argv.index("--threads")
        threads = int(argv[k + 1])
        argv = argv[:k] + argv[k + 2:]
    export_dir, requests_file, out_file = argv
    with open(requests_file, encoding="utf-8") as f:
        requests = json.load(f)
    names = signature.split(",")
    report = {"signatures": {}, "results": [], "error": None, "peak_rss": []}
    try:
        if len(names) not in (1, len(requests)):
            raise ServingError(f"{len(names)} signature names for {len(requests)} requests")
        served = Served(export_dir, xla_cpu_compilation_enabled=xla)
        report["signatures"] = served.signatures
        report["loaded_rss"] = _status_bytes("VmRSS") or _peak_rss_bytes()
        if threads > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(threads) as pool:  # ctypes calls release the GIL
                report["results"] = list(pool.map(
                    lambda n: served.run(requests[n], names[n % len(names)]),
                    range(len(requests))))
        for n, request in enumerate(requests if threads == 1 else ()):
            _reset_peak()
            try:
                report["results"].append(served.run(request, names[n % len(names)]))
            except ServingError as e:
                if not each:
                    raise
                report["results"].append({"error": first_line(str(e))})
            report["peak_rss"].append(_peak_rss_bytes())
        served.close()
    except ServingError as e:
        report["error"] = first_line(str(e))
    python_modules = sorted(m for m in sys.modules
                            if m.split(".")[0] in ("tensorflow", "numpy", "kbert", "keras",
                                                   "google"))
    report["python_modules"] = python_modules
    with open(out_file, "w", encoding="utf-8") as f:
        json.dump(report, f, ensure_ascii=False)
    return 0 if report["error"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
