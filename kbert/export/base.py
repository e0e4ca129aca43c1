"""What every SavedModel exporter shares: the serving module with the tokenizer's
assets, the sequence-length check against the encoder, and the atomic save with
warmup requests and the op check.

Each signature is traced once. The exporters' `tf.function`s run with autograph off
(their graph code has no tensor-dependent Python control flow; converting its source
took about half of a small classifier export's seconds), and they are not attributes
of the saved module: `tf.saved_model.save` traces every `tf.function` attribute of the
objects it saves again, in its own context, and writes each into the export beside the
signatures that already hold its graph (a small classifier export: 12 s -> 4.7 s)."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import shutil
import tempfile

import tensorflow as tf

from kbert.export import guards
from kbert.export import ops as ops_lib
from kbert.export.warmup import write_warmup_requests
from kbert.io import atomic_directory
from kbert.models.interface import find_encoder

# Inputs every warmup file carries: accents, CJK, emoji, empty and long texts.
SAMPLE_TEXTS = ["Crème brûlée in Zürich was très bien.", "北京是中国的首都。", "🙂 ok!", "",
                "A long text that runs past the model's sequence length. " * 40]
SAMPLE_QUESTIONS = [("Where was the crème brûlée?", "Crème brûlée in Zürich was très bien."),
                    ("首都是哪里?", "北京是中国的首都。"), ("", ""),
                    ("Which word repeats?", "The long context repeats itself. " * 60)]


def model_name(export_dir: str) -> str:
    """NAME of EXPORT_BASE/NAME/VERSION (TF Serving's layout); the folder name otherwise."""
    path = os.path.abspath(export_dir)
    parent, leaf = os.path.split(path)
    return os.path.basename(parent) if leaf.isdigit() else leaf


def float_output(model, inputs, name: str):
    """`name` of the model's (dict) output for `inputs`, as float32."""
    out = model(inputs, training=False)
    if isinstance(out, dict):
        return tf.cast(out[name], tf.float32)
    return tf.cast(out, tf.float32)


class _Untracked:
    """Holds Python objects on a `tf.Module` without making them part of its saved
    object graph (a plain object is not a Trackable)."""

    def __init__(self, *layers):
        self.layers = layers


class ServingModule(tf.Module):
    """The exported object: the tokenizer (its tables), the tokenizer's own files
    (`Tokenizer.assets()`: WordPiece `vocab.txt`, BPE `vocab.json` + `merges.txt`, none
    for characters) as SavedModel assets, copied into `assets/`, and the `tf.Variable`s
    of the Keras layers the signature runs (`model` and any `extra` layers).

    The Keras objects themselves are not saved. A Keras 3 variable is a wrapper around a
    `tf.Variable`; saved as part of a Keras layer, its checkpoint entry is restored
    into a copy that the signature's functions do not read, so TensorFlow's C++ loader
    (the one `tensorflow_model_server` runs) restores nothing they use and the first
    request fails with "Could not find variable ...". `tf.saved_model.load` in Python
    rebuilds the object graph and hides this. Tracking the `tf.Variable`s themselves,
    as the only saved state, makes the saver's restore op fill exactly the variables
    the functions capture; nothing else of the Keras model (an optimizer's slots
    after `fit`, for one) goes into the export."""

    def __init__(self, model, tokenizer, *extra):
        super().__init__(name="kbert_serving")
        self._keras = _Untracked(model, *extra)
        self.tokenizer = tokenizer
        self._asset_dir = tempfile.mkdtemp(prefix="kbert-assets-")
        files = []
        for name, text in sorted(tokenizer.assets().items()):
            path = os.path.join(self._asset_dir, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            files.append(tf.saved_model.Asset(path))
        self.asset_files = files

    def track_variables(self) -> None:
        """Tracks the `tf.Variable` behind each Keras variable of the held layers (after
        the signature was traced, so that layers built by the first call count)."""
        seen, variables = set(), []
        for layer in self._keras.layers:
            for v in layer.variables:
                value = getattr(v, "value", v)
                if not isinstance(value, tf.Variable):
                    raise TypeError(f"variable {v.path}: expected a tf.Variable behind it, "
                                    f"got {type(value).__name__}")
                if id(value) not in seen:
                    seen.add(id(value))
                    variables.append(value)
        self.variables_to_serve = variables

    def remove_temporary_files(self) -> None:
        shutil.rmtree(self._asset_dir, ignore_errors=True)


def check_seq_length(model, seq_length: int) -> None:
    """Refuses a sequence length beyond the encoder's position table (if it has one)."""
    encoder = find_encoder(model)
    limit = encoder.max_sequence_length if encoder is not None else None
    if limit is not None and seq_length > limit:
        raise ValueError(f"seq_length={seq_length} exceeds the model's "
                         f"max_position_embeddings={limit}")


@dataclasses.dataclass
class ExportParts:
    """What one exporter hands to `save_export`: its module, signatures (name ->
    tf.function; `serving_default` first), the signatures' SignatureDef method names where
    they are not Predict's, warmup requests as (signature, inputs) pairs, and files for
    `assets.extra/`. `collect_exports` gathers these instead of writing them, for a
    SavedModel of several heads (`kbert.export.heads`)."""
    module: ServingModule
    signatures: dict
    warmup: list
    method_names: dict = dataclasses.field(default_factory=dict)
    extra_files: dict = dataclasses.field(default_factory=dict)


_COLLECTED: contextvars.ContextVar = contextvars.ContextVar("kbert_export_parts",
                                                            default=None)


@contextlib.contextmanager
def collect_exports():
    """Within it, the exporters write nothing: each call's `ExportParts` is appended to
    the yielded list (and the exporter returns its export_dir unwritten)."""
    parts: list[ExportParts] = []
    token = _COLLECTED.set(parts)
    try:
        yield parts
    finally:
        _COLLECTED.reset(token)


def save_export(module: ServingModule, signature, export_dir: str, warmup: list[dict],
                serving_version: str, extra_files: dict[str, str] | None = None,
                extra_signatures: dict | None = None,
                method_names: dict[str, str] | None = None, raw_outputs=None,
                raw_input_names=None, max_request_bytes: int = guards.MAX_REQUEST_BYTES,
                extra_warmup: list[tuple[str, dict]] = ()) -> str:
    """tf.saved_model.save + warmup requests (+ `extra_files`, name -> text, in
    `assets.extra/`) + op check + the warmup requests replayed through TF Serving's C++
    loader, atomically: a failed check or replay leaves no export behind.
    `extra_signatures`: name -> tf.function, beside `serving_default` (`signature`);
    `method_names`: signature name -> the SignatureDef's method name where it is not
    Predict's (TF Serving's Classify and Regress APIs need theirs); `raw_outputs`:
    model inputs -> the model's raw outputs; given, the export gets a `token_ids`
    signature (`token_ids_signature`) whose inputs are `raw_input_names` (default: the
    tokenizer's keys for one text). Every signature is guarded (`kbert.export.guards`:
    input ranks, empty batches, at most `max_request_bytes` of text per request, which
    `assets.extra/kbert_limits.json` records). `warmup`: serving_default's warmup
    requests; `extra_warmup`: (signature name, request) pairs of the other signatures
    (`token_ids` gets one here, from the tokenizer): TF Serving replays them all at load,
    so that no signature's first request pays for optimizing its graph."""
    export_dir = os.fspath(export_dir)
    extra_warmup = list(extra_warmup)
    if raw_outputs is not None:
        extra_signatures = {**(extra_signatures or {}), "token_ids": token_ids_signature(
            module.tokenizer, raw_outputs, raw_input_names)}
        ids = token_ids_request(module.tokenizer, raw_input_names)
        if ids is not None:
            extra_warmup.append(("token_ids", ids))
    functions = {"serving_default": signature, **(extra_signatures or {})}
    limits = {"max_request_bytes": int(max_request_bytes)}
    parts = ExportParts(module, {name: guards.guard(function, max_request_bytes)
                                 for name, function in functions.items()},
                        [("serving_default", request) for request in warmup]
                        + extra_warmup,
                        dict(method_names or {}),
                        {**(extra_files or {}),
                         guards.LIMITS_FILE: json.dumps(limits, indent=2) + "\n"})
    collected = _COLLECTED.get()
    if collected is not None:
        collected.append(parts)
        return export_dir
    return write_export([module], parts.signatures, export_dir, parts.warmup,
                        serving_version, parts.extra_files, parts.method_names)


def write_export(modules: list[ServingModule], signatures: dict, export_dir: str,
                 warmup: list, serving_version: str, extra_files: dict | None = None,
                 method_names: dict | None = None) -> str:
    """Writes `signatures` (name -> tf.function, `serving_default` among them) of one
    or more serving modules as one SavedModel, atomically (see `save_export`); `warmup`:
    (signature name, inputs) pairs, each replayed through TF Serving's C++ loader."""
    export_dir = os.fspath(export_dir)
    root = modules[0] if len(modules) == 1 else _Heads(modules)
    with atomic_directory(export_dir) as tmp:
        try:
            for function in signatures.values():  # traced: every layer is built
                function.get_concrete_function()
            for module in modules:
                module.track_variables()
            tf.saved_model.save(root, tmp, signatures=signatures)
            if method_names:
                set_method_names(tmp, method_names)
        finally:
            for module in modules:
                module.remove_temporary_files()
        from kbert.export.check import signatures as saved_signatures

        dtypes = {name: {k: dtype for k, (dtype, _) in sig["inputs"].items()}
                  for name, sig in saved_signatures(tmp).items()}
        write_warmup_requests(tmp, model_name(export_dir), [r for _, r in warmup],
                              [name for name, _ in warmup], dtypes)
        for name, text in (extra_files or {}).items():
            os.makedirs(os.path.join(tmp, "assets.extra"), exist_ok=True)
            with open(os.path.join(tmp, "assets.extra", name), "w", encoding="utf-8") as f:
                f.write(text)
        ops_lib.strip_for_release(tmp, serving_version)
        try:
            ops_lib.check_ops(tmp, serving_version)
        except ops_lib.UnsupportedOpError as e:
            raise ops_lib.UnsupportedOpError(str(e).replace(tmp, export_dir)) from None
        # The warmup requests through TF Serving's own loader, as the server replays
        # them at load: an export it cannot run is never moved into place.
        from kbert.export.check import (ServingLoaderError, also_served, loader_failure,
                                        note_served, run_c_loader)

        # `keep_served(also=...)`'s requests (a task command's own check) in the same
        # load, each answered or refused on its own (one this export has no signature or
        # inputs for is refused and kept so).
        warmup, also = list(warmup), also_served()
        names = [name for name, _ in warmup + also]
        requests = [r for _, r in warmup + also]
        try:  # every signature's requests after one load
            if requests:
                served = run_c_loader(tmp, requests, names, each=bool(also))["results"]
                failed = [r["error"] for r in served[:len(warmup)] if "error" in r]
                if failed:
                    raise ServingLoaderError(loader_failure(tmp, failed[0]))
                note_served(export_dir, names, requests, served)
        except ServingLoaderError as e:
            raise ServingLoaderError(str(e).replace(tmp, export_dir)) from None
    return export_dir


class _Heads(tf.Module):
    """The saved root of a SavedModel of several serving modules: each module (its
    tokenizer, assets and variables; variables they share are saved once)."""

    def __init__(self, modules):
        super().__init__(name="kbert_heads")
        self.heads = list(modules)


CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"


def set_method_names(export_dir: str, method_names: dict[str, str]) -> None:
    """Rewrites `saved_model.pb` with these SignatureDef method names (`tf.saved_model.
    save` writes Predict's for every signature; TF Serving's Classify and Regress APIs
    refuse a signature without theirs). Called on the export's temporary folder."""
    from kbert import internals

    path = os.path.join(export_dir, "saved_model.pb")
    sm = internals.read_saved_model_proto(path)
    for meta in sm.meta_graphs:
        for name, method in method_names.items():
            if name not in meta.signature_def:
                raise ValueError(f"no signature {name!r} to name {method}")
            meta.signature_def[name].method_name = method
    with open(path, "wb") as f:
        f.write(sm.SerializeToString())


def token_ids_request(tokenizer, names=None) -> dict | None:
    """A `token_ids` request for the warmup file: two sample texts as the tokenizer
    packs them to 8 tokens (within any model's positions; pairs where `names` needs the
    pair's keys), the inputs `names` (default: the tokenizer's keys); None where the
    tokenizer does not make them all."""
    for texts_b in (None, list(SAMPLE_TEXTS[2:4])):
        try:
            packed = tokenizer(list(SAMPLE_TEXTS[:2]), texts_b, seq_length=8)
        except (TypeError, ValueError):  # a tokenizer of single texts
            continue
        wanted = sorted(names if names is not None else packed)
        if all(isinstance(packed.get(name), tf.Tensor) for name in wanted):
            return {name: packed[name].numpy().tolist() for name in wanted}
    return None


def token_ids_signature(tokenizer, raw_outputs, names=None):
    """The `token_ids` signature, for clients that tokenize themselves: the model's own
    inputs (the tokenizer's keys, int32 [batch, seq]: `token_ids`, `padding_mask`,
    `segment_ids` where the family has them; ELMo's `char_ids` [batch, words, 50]) ->
    `raw_outputs(inputs)`, floats as float32 (logits; no text post-processing)."""
    sample = tokenizer(["a"])
    names = sorted(names if names is not None else sample.keys())
    vocab_size = getattr(tokenizer, "vocab_size", None) if "token_ids" in names else None
    # [batch, seq] for most; ELMo's `char_ids` are [batch, words, characters].
    shapes = {name: [None, None] + list(sample[name].shape[2:]) if name in sample
              else [None, None] for name in names}

    @tf.function(input_signature=[{name: tf.TensorSpec(shapes[name], tf.int32, name=name)
                                   for name in names}], autograph=False)
    def token_ids(inputs):
        with tf.control_dependencies(check_token_inputs(inputs, vocab_size)):
            inputs = {k: tf.identity(v) for k, v in inputs.items()}
        return {k: tf.cast(v, tf.float32) if v.dtype.is_floating else v
                for k, v in raw_outputs(dict(inputs)).items()}

    return token_ids


# Inputs with a value per token, of `token_ids`' shape (fill-mask's
# `masked_lm_positions` [batch, k] is not one).
PER_TOKEN_INPUTS = ("padding_mask", "segment_ids")


def check_token_inputs(inputs: dict, vocab_size: int | None) -> list:
    """Graph checks of a `token_ids`-style request, each failing with one line naming
    the input: `padding_mask` and `segment_ids` of `token_ids`' shape (a mask of another
    shape would be read as something else), and ids in [0, vocab_size) (an id of -1
    would read the table's last row)."""
    checks = []
    ids = inputs.get("token_ids")
    if ids is None:
        return checks
    for name in sorted(inputs):
        if name in PER_TOKEN_INPUTS:
            checks.append(tf.debugging.Assert(
                tf.reduce_all(tf.equal(tf.shape(inputs[name]), tf.shape(ids))),
                [tf.constant(f"{name}: must have the shape of token_ids"), tf.shape(inputs[name]),
                 tf.constant("token_ids:"), tf.shape(ids)], name=f"check_shape_{name}"))
    if vocab_size is not None:
        checks.append(tf.debugging.Assert(
            tf.reduce_all((ids >= 0) & (ids < vocab_size)),
            [tf.constant(f"token_ids: each id must be in [0, {int(vocab_size)}); got "
                         "min, max"), tf.reduce_min(ids), tf.reduce_max(ids)],
            name="check_token_ids"))
    return checks
