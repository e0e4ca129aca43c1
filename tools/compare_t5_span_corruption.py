"""Compares kbert's T5 span corruption (`kbert.models.t5.pretraining`) with T5's own
preprocessors, run: `t5.data.preprocessors.random_spans_noise_mask`,
`noise_span_to_unique_sentinel`, `nonnoise_span_to_unique_sentinel` and
`random_spans_helper` from the `t5` package (0.9.4) with `seqio` (0.0.19).

`t5` and `seqio` pull in JAX, Flax, CLU, Mesh TensorFlow and a dozen more packages, so
they are not in kbert's test extra: the script installs them into a throwaway folder
(`pip install --target`, without their own dependency pins, beside this environment's
TensorFlow), runs the comparison in a subprocess with that folder on its path, and
deletes the folder. Needs the package index; about 600 MB.

    python tools/compare_t5_span_corruption.py            # prints the table docs/t5.md shows
    python tools/compare_t5_span_corruption.py --keep DIR # keeps the installed packages in DIR

What is compared (the masks are random: both are given the same stateless seeds):
1. the noise masks, element for element, for every length 1..600 and 20 seed pairs,
   at noise density 0.15 / mean span 3 (T5's) and 0.5 / 8;
2. the encoder inputs and decoder targets made from each mask (sentinels counted down
   from the vocabulary's last id), element for element;
3. the (tokens, targets) lengths for encoder inputs of 8..1024 tokens at both settings.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

# The packages `import t5.data.preprocessors` needs besides TensorFlow, found by
# importing it in an empty folder until no import failed.
REFERENCE = ["t5==0.9.4", "seqio==0.0.19", "clu==0.0.12", "gin-config", "editdistance",
             "pyglove", "babel", "immutabledict", "sacrebleu", "portalocker",
             "mesh-tensorflow", "tabulate", "colorama", "lxml", "rouge-score", "nltk"]
JAX = ["jax==0.4.30", "jaxlib==0.4.30", "flax==0.8.5"]  # with their dependencies

COMPARE = r'''
import itertools, sys
import numpy as np
import tensorflow as tf
from t5.data import preprocessors as ref
from kbert.models.t5 import pretraining as ours


class Vocabulary:  # what the sentinel functions read of a seqio vocabulary
    vocab_size = 32100


rows = []
for density, mean in ((0.15, 3.0), (0.5, 8.0)):
    masks = same_masks = outputs = same_outputs = 0
    for length, s in itertools.product(range(1, 601), range(20)):
        seeds = tf.constant([[s, 7 * s + 1], [3 * s + 2, s + 5]], tf.int32)
        want = ref.random_spans_noise_mask(length, density, seeds, mean).numpy()
        got = ours.random_spans_noise_mask(length, seeds, density, mean).numpy()
        masks += 1
        same_masks += bool(np.array_equal(want, got))
        tokens = tf.range(1, length + 1)
        for mask in (want, ~want):
            want_out = ref.noise_span_to_unique_sentinel(tokens, tf.constant(mask),
                                                         Vocabulary, None).numpy()
            got_out = ours.spans_to_sentinels(tokens, mask, Vocabulary.vocab_size - 1).numpy()
            outputs += 1
            same_outputs += bool(np.array_equal(want_out, got_out))
    lengths = same_lengths = 0
    for inputs_length in range(8, 1025):
        want = ref.random_spans_helper(inputs_length, density, mean, 1, 1)
        got = ours.span_corruption_lengths(inputs_length, density, mean)
        lengths += 1
        same_lengths += tuple(want) == tuple(got)
    rows.append((density, mean, same_masks, masks, same_outputs, outputs,
                 same_lengths, lengths))
print("| density | mean span | masks equal | inputs and targets equal | lengths equal |")
print("|---|---|---|---|---|")
for d, m, a, b, c, e, f, g in rows:
    print(f"| {d} | {m:g} | {a} of {b} | {c} of {e} | {f} of {g} |")
sys.exit(0 if all(r[2] == r[3] and r[4] == r[5] and r[6] == r[7] for r in rows) else 1)
'''


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", help="install the reference here and keep it")
    args = p.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="t5-reference-")
    try:
        if not os.path.exists(os.path.join(folder, "t5")):
            pip = [sys.executable, "-m", "pip", "install", "-q", "--target", folder]
            subprocess.run(pip + ["--no-deps", *REFERENCE], check=True)
            subprocess.run(pip + JAX, check=True)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([folder, root]),
                   TF_CPP_MIN_LOG_LEVEL="2")
        return subprocess.run([sys.executable, "-c", COMPARE], env=env).returncode
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
