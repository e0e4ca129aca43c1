"""The pretraining runs behind `python -m kbert.tasks.pretrain --model NAME`.

The family's pretraining recipe (the registry's `pretrain` hook: BERT's masked LM and
next sentence, RoBERTa's masked LM, GPT's causal LM, ELMo's biLM; see each family's
`pretraining.py`) builds the data and the model; this module reads the text, makes the
optimizer and trains with `kbert.training` (strategies, mixed precision, XLA, AdamW or
LAMB, gradient accumulation, checkpoints every `--steps_per_loop` steps that a rerun
resumes from, TensorBoard), and ends with a model folder in `OUTPUT_DIR/model` that the
task commands' `--init_from` reads.
"""

from __future__ import annotations

import json
import logging
import os

import keras

from kbert import training
from kbert.io import atomic_file, expand_inputs, read_json
from kbert.models import registry
from kbert.tasks.common import fit_options

logger = logging.getLogger(__name__)


def read_texts(pattern: str) -> list[str]:
    files = expand_inputs(pattern, "--text_file")
    lines = []
    for path in files:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"--text_file {path}, line {number}: not UTF-8 "
                                     f"({e.reason} at byte {e.start})") from None
                lines.append(line.rstrip("\n").rstrip("\r"))
    return lines


def recipe(name: str):
    """The pretraining recipe of the family `name`, or ValueError naming those with one."""
    try:
        family = registry.get_family(name)
    except ValueError as e:
        raise ValueError(f"--model {name}: {e}") from None
    found = family.hook("pretrain")
    if found is None:
        able = [f.name for f in registry.all_families() if f.hook("pretrain") is not None]
        raise ValueError(f"--model {name}: kbert has no pretraining recipe for it; "
                         f"choose from {', '.join(able)}")
    return found


def _optimizer(args, total_steps):
    return training.create_optimizer(args.learning_rate, total_steps,
                                     args.num_warmup_steps, optimizer=args.optimizer,
                                     weight_decay=args.weight_decay,
                                     gradient_accumulation_steps=args.gradient_accumulation_steps)


def run(args) -> dict:
    runtime = training.Runtime.from_flags(args)
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    if not args.input_file and not args.text_file:  # the bundled corpus
        from kbert.tasks.pretrain.corpus import write_corpus

        args.text_file = os.path.join(args.output_dir, "corpus.txt")
        lines = write_corpus(args.text_file, args.corpus_paragraphs)
        logger.info("no data flags: the bundled corpus, %d paragraphs (%d lines), in %s",
                    args.corpus_paragraphs, lines, args.text_file)
    model_dir = os.path.join(args.output_dir, "model")
    total = args.num_train_steps * args.gradient_accumulation_steps
    total, loop = training.whole_loops(total, args.steps_per_loop, args.steps_per_execution)
    pretraining = recipe(args.model).build(
        args, runtime, lambda: read_texts(args.text_file) if args.text_file else [],
        lambda: _optimizer(args, args.num_train_steps))
    logger.info("pretraining %s: %d examples, %d steps of %d", args.model,
                pretraining.examples, args.num_train_steps, args.train_batch_size)
    history = training.fit(pretraining.model, pretraining.data, total, loop,
                           **fit_options(args), examples_per_step=args.train_batch_size,
                           tokens_per_step=pretraining.tokens_per_example
                           * args.train_batch_size,
                           steps_per_epoch=max(pretraining.examples / args.train_batch_size,
                                               1.0))
    training.prune_checkpoints(fit_options(args)["checkpoint_dir"], args.keep_checkpoints)
    pretraining.save(model_dir)
    results = {k: float(v[-1]) for k, v in (history.history.items() if history else [])}
    results_file = os.path.join(args.output_dir, "train_results.json")
    if not results and os.path.exists(results_file):
        # A rerun of a finished run resumes at its last step and trains none: the
        # first run's results stand.
        logger.info("the run had finished: %s kept", results_file)
        return read_json(results_file)
    with atomic_file(results_file) as f:
        json.dump(results, f, indent=2)
    logger.info("pretrained %s folder: %s", args.model, model_dir)
    return results
