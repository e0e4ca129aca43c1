"""Writes kbert/export/op_tables/: the op types each TensorFlow release, and each
tensorflow-text release a TF Serving release links, register, read from the releases.

For every TensorFlow release 2.12 ... 2.21 the script makes a throwaway virtual
environment, installs that release's newest patch from the package index (and, for the
tensorflow-text releases that TF Serving pins, that tensorflow-text beside its
TensorFlow), and asks the C API for the op registry (`TF_GetAllOpList`): every op
registered, with or without a Python wrapper. tensorflow-text's ops are those its import
adds. The environments are deleted afterwards.

    python tools/serving_op_tables.py                # every release (about 1 GB each)
    python tools/serving_op_tables.py --only 2.12    # one release

Each output file is one op a line (its name, then the names of its attrs), under a
header naming the release read, the command and the date. kbert.export.ops reads them; nothing here runs at kbert's run time.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile

OUT = os.path.join(os.path.dirname(__file__), "..", "kbert", "export", "op_tables")

# TF Serving release -> the tensorflow-text release its workspace pins
# (tensorflow_serving/workspace.bzl, `org_tensorflow_text`): 2.12.1 from 2.12 to 2.19,
# then the matching release. For 2.21 the table is read from 2.21.1: PyPI's 2.21.0 wheel
# does not load beside tensorflow 2.21.0 (undefined symbol icudt77_dat); 2.21.1 is the
# release kbert itself installs.
TEXT_PINS = {"2.12": "2.12.1", "2.20": "2.20.0", "2.21": "2.21.1"}
RELEASES = ("2.12", "2.13", "2.14", "2.15", "2.16", "2.17", "2.18", "2.19", "2.20", "2.21")

# Run by the other release's interpreter, where kbert (which needs TensorFlow 2.21)
# cannot be imported: the C API call of kbert.internals.registered_op_names, written out.
_DUMP = r"""
import json, sys
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api
import tensorflow as tf

def ops():
    buf = c_api.TF_GetAllOpList()
    try:
        out = op_def_pb2.OpList()
        out.ParseFromString(c_api.TF_GetBuffer(buf))
    finally:
        c_api.TF_DeleteBuffer(buf)
    return {op.name: sorted(a.name for a in op.attr) for op in out.op}

core = ops()
text, text_version = {}, ""
if sys.argv[1] == "text":
    import tensorflow_text
    text = {k: v for k, v in ops().items() if k not in core}
    text_version = tensorflow_text.__version__
print(json.dumps({"tensorflow": tf.__version__, "core": core, "text": text,
                  "text_version": text_version}))
"""


def _write(path: str, ops: dict[str, list[str]], what: str) -> None:
    stamp = datetime.date.today().isoformat()
    header = (f"# {what}: the {len(ops)} op types registered, each with its attrs; read\n"
              f"# {stamp} by python tools/serving_op_tables.py (TF_GetAllOpList, fresh venv)\n")
    lines = [" ".join([name] + attrs) + "\n" for name, attrs in sorted(ops.items())]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(header + "".join(lines))
    os.replace(tmp, path)


def read_release(release: str, python: str) -> None:
    text = TEXT_PINS.get(release)
    with tempfile.TemporaryDirectory(prefix=f"optable-{release}-") as tmp:
        venv = os.path.join(tmp, "venv")
        subprocess.run([python, "-m", "venv", venv], check=True)
        py = os.path.join(venv, "bin", "python")
        pip = [py, "-m", "pip", "install", "-q", "--no-cache-dir"]
        subprocess.run(pip + [f"tensorflow=={release}.*"], check=True)
        if text:
            # --no-deps: its TensorFlow requirement is the one just installed; 2.12.1
            # imports tensorflow_hub (which needs nothing more here)
            subprocess.run(pip + ["--no-deps", f"tensorflow-text=={text}",
                                  "tensorflow-hub<0.16"], check=True)
        proc = subprocess.run([py, "-c", _DUMP, "text" if text else "core"],
                              capture_output=True, text=True,
                              env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        if proc.returncode:
            raise SystemExit(f"{release}: reading the registry failed:\n{proc.stderr[-3000:]}")
        out = proc.stdout
    import json
    got = json.loads(out.strip().splitlines()[-1])
    os.makedirs(OUT, exist_ok=True)
    _write(os.path.join(OUT, f"tensorflow-{release}.txt"), got["core"],
           f"tensorflow=={got['tensorflow']}")
    if text:
        _write(os.path.join(OUT, f"tensorflow-text-{text}.txt"), got["text"],
               f"tensorflow-text=={got['text_version']} with tensorflow=={got['tensorflow']}")
    print(f"{release}: {len(got['core'])} core ops"
          + (f", tensorflow-text {got['text_version']}: {len(got['text'])}" if text else ""),
          flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", choices=RELEASES, help="releases to read")
    p.add_argument("--python", default=sys.executable,
                   help="the Python the throwaway environments are made with (3.11)")
    args = p.parse_args(argv)
    if shutil.which(args.python) is None and not os.path.exists(args.python):
        p.error(f"--python {args.python}: not found")
    for release in args.only or RELEASES:
        read_release(release, args.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
