"""GLUE (or the user's own files) as text to text: the GLUE command's runner when
`--init_from` is an encoder-decoder whose family has the `glue_text` hooks (T5);
the shared fine-tuning, decoding and export are `kbert.tasks.text_to_text`'s."""

from __future__ import annotations

import json
import logging
import os

from kbert.io import atomic_file
from kbert.tasks.common import write_results
from kbert.tasks.glue.data import dev_source
from kbert.tasks.glue.metrics import compute_metrics
from kbert.tasks.glue.tasks import get_task
from kbert.tasks.text_to_text import (features, fine_tune, generate_texts, save_and_export,
                                      target_length)

logger = logging.getLogger(__name__)


def run_glue(args, runtime, family, task, train, dev: dict, test: dict,
             write_submission) -> dict:
    """GLUE (or the user's own files) as text to text with the --init_from family's
    (`family`, the run's; `runtime`: the command's) formats: fine-tune, predict dev (metrics) and test
    (submission files), with each split's outputs in OUTPUT_DIR/<split>_outputs.jsonl."""
    text, target, label_of = (family.hook(h) for h in ("glue_text", "glue_target",
                                                         "glue_label"))
    if not train:
        raise SystemExit(f"GLUE {task.name}: the training split is empty")
    tokenizer = family.tokenizer_class.from_pretrained(args.init_from)
    lm_class = family.language_model_class
    inputs = [text(task, e.text_a, e.text_b) for e in train]
    targets = [target(task, e.label) for e in train]
    words = targets if task.is_regression else [target(task, label) for label in task.labels]
    out_length = target_length(tokenizer, words + targets)
    model, trained = fine_tune(
        args, runtime, lm_class,
        lambda lm: features(lm, tokenizer, inputs, targets, args.max_seq_length, out_length),
        len(train), f"GLUE {task.name}")

    seen = {}  # the first split's inputs and outputs: the export's check

    def predict(examples, split, task=task):
        texts = [text(task, e.text_a, e.text_b) for e in examples]
        outputs = generate_texts(model, tokenizer, texts, args.max_seq_length, out_length,
                                 args.predict_batch_size)
        labels = [label_of(task, o) for o in outputs]
        seen.setdefault("texts", texts)
        seen.setdefault("outputs", outputs)
        with atomic_file(os.path.join(args.output_dir, f"{split}_outputs.jsonl")) as f:
            for e, t, o in zip(examples, texts, outputs):
                f.write(json.dumps({"index": e.index, "input": t, "output": o},
                                   ensure_ascii=False) + "\n")
        invalid = sum(label is None for label in labels)
        if invalid:
            logger.warning("%s: %d of %d outputs name no label (counted wrong, as T5's "
                           "postprocessors do; see %s_outputs.jsonl)", split, invalid,
                           len(labels), split)
        return labels

    results = {}
    for split, examples in dev.items():
        labels = predict(examples, split)
        # an output naming no label is wrong: -1 (T5's stsb) / a class no label has
        predictions = [(-1.0 if task.is_regression else "<none>") if p is None else p
                       for p in labels]
        metrics_ = compute_metrics(task, predictions, [e.label for e in examples])
        suffix = "" if split in ("dev", "dev_matched") else "_mm"
        results.update({f"{k}{suffix}": v for k, v in metrics_.items()})
    if dev:
        results = write_results(args.output_dir, results, split="eval",
                                source=dev_source(args, task, dev), trained=trained)
    for split, examples in test.items():  # "ax": MNLI's model on the diagnostic set
        split_task = get_task("ax") if split == "ax" else task
        labels = predict(examples, split, split_task)
        fallback = 0.0 if task.is_regression else task.labels[0]
        if any(p is None for p in labels):
            logger.warning("%s: outputs that name no label are submitted as %r", split,
                           fallback)
        path = os.path.join(args.output_dir,
                            split_task.submission["test" if split == "ax" else split])
        write_submission(path, split_task, examples,
                         [fallback if p is None else p for p in labels])
        logger.info("wrote %s (%d rows)", path, len(examples))
    save_and_export(args, model, tokenizer, out_length, seen.get("texts", ()),
                    seen.get("outputs", ()))
    return results
