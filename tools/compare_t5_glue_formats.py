"""Compares kbert's T5 GLUE formats (`kbert.models.t5.hooks`: `glue_text`,
`glue_target`) with T5's own, run: `t5.data.glue_utils.get_glue_text_preprocessor` on
each TFDS GLUE builder config (tensorflow-datasets' own `text_features` and
`label_classes`), T5's `glue` and `stsb` preprocessors.

`t5` is not in kbert's test extra (see tools/compare_t5_span_corruption.py): give the
folder that script's `--keep DIR` installed it into.

    python tools/compare_t5_span_corruption.py --keep /tmp/t5ref   # once
    python tools/compare_t5_glue_formats.py --reference /tmp/t5ref

What is compared, for every GLUE config but the mnli_matched/mismatched aliases: each
TFDS label of an example with awkward texts (quotes, a tab-free backslash, CJK) gives
the same input and target text through T5 and through kbert (kbert's label being the
one its task maps that TFDS label to); STS-B at 104 scores (0 to 5 in steps of 0.05,
half-way cases of the 0.2 rounding among them, and 3.7, 3.75, 2.31). And T5's `squad`
preprocessor: the same input and target (the first answer) where the texts have no
punctuation; with punctuation T5 pads it with spaces and kbert does not (on purpose,
docs/t5.md), which the script prints.
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", required=True,
                   help="a folder with t5 0.9.4 and its dependencies installed")
    args = p.parse_args(argv)
    sys.path.insert(0, args.reference)
    import numpy as np
    import tensorflow as tf
    from t5.data import glue_utils
    from tensorflow_datasets.text import glue

    from kbert.models import registry
    from kbert.tasks.glue.tasks import get_task

    family = registry.get_family("t5")
    text, target = family.hook("glue_text"), family.hook("glue_target")
    texts = ['He said "hello" and left.', "back\\slash, 北京 and Ünïcödé"]
    rows, failures = [], 0
    for config in glue.Glue.BUILDER_CONFIGS:
        if config.name in ("mnli_matched", "mnli_mismatched"):
            continue
        task = get_task(config.name)
        preprocess = glue_utils.get_glue_text_preprocessor(config)
        names = list(config.text_features)
        labels = (list(np.round(np.arange(0, 5.0001, 0.05), 2)) + [3.7, 3.75, 2.31]
                  if config.name == "stsb" else list(range(len(config.label_classes))))
        same = 0
        for label in labels:
            example = {name: texts[i % 2] for i, name in enumerate(names)}
            features = {**{k: tf.constant([v]) for k, v in example.items()},
                        "label": tf.constant([label], tf.float32 if config.name == "stsb"
                                             else tf.int64),
                        "idx": tf.constant([0], tf.int32)}
            ds = preprocess(tf.data.Dataset.from_tensor_slices(features))
            theirs = next(iter(ds))
            # TFDS's text features in its order (MNLI: premise, hypothesis) are kbert's
            # text_a and text_b (GLUE's sentence1, sentence2)
            a = example[names[0]]
            b = example[names[1]] if task.is_pair else None
            mine_label = (float(label) if config.name == "stsb"
                          else task.tfds_labels[label])
            mine = (text(task, a, b), target(task, mine_label))
            want = (theirs["inputs"].numpy().decode(), theirs["targets"].numpy().decode())
            if mine == want:
                same += 1
            else:
                failures += 1
                print(f"differ: {config.name} label {label}: kbert {mine!r}, T5 {want!r}")
        rows.append((config.name, same, len(labels), want[0][:60]))
    from t5.data import preprocessors

    squad_text, squad_target = family.hook("squad_text"), family.hook("squad_target")
    for question, context, equal in (("who wrote it", "Anna wrote it in Paris", True),
                                     ("Who wrote it?", "Anna wrote it, in Paris.", False)):
        example = {"id": "a", "title": "t", "question": question, "context": context,
                   "answers": {"text": ["Anna", "Anna"], "answer_start": [0, 0]}}
        theirs = next(iter(preprocessors.squad(tf.data.Dataset.from_tensors(example))))
        want = (theirs["inputs"].numpy().decode(), theirs["targets"].numpy().decode())
        mine = (squad_text(question, context), squad_target([("Anna", 0), ("Anna", 0)]))
        # T5 pads punctuation with spaces; kbert feeds the text as it is (docs/t5.md)
        print(f"squad: T5 {want!r}, kbert {mine!r}")
        if (mine == want) != equal:
            failures += 1
            print("differ: squad, unexpectedly")
    print("| TFDS config | same / compared | T5's input (first 60 characters) |")
    print("|---|---|---|")
    for name, same, total, example in rows:
        print(f"| {name} | {same} of {total} | `{example}` |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
