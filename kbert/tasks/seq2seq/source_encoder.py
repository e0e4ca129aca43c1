"""`--bart_source_encoder LAYERS`: BART's translation mode (Lewis et al., 2020, section
3.4). A new encoder, initialised at random, goes in front of the --init_from BART
(`BartSourceEncoder`: its own token table, positions and LAYERS blocks); its output
takes the place of the source's token vectors. Two stages, as the paper trains it:

1. the epochs of the training flags train only the new encoder, BART's encoder
   positions and the query, key and value projections of BART's first encoder layer
   (`BartSeq2SeqLM.stage_one_variables`); every other weight keeps its value;
2. --bart_stage_two_steps steps train every weight (a new optimizer, its own warmup
   and linear decay from --learning_rate; --eval_strategy evaluates here).

Each stage checkpoints into its own folder (OUTPUT_DIR/checkpoints/stage_one,
stage_two), so an interrupted run resumes in the stage it stopped in.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)


def freeze_all_but(model, variables) -> list:
    """Makes every trainable variable of `model` but `variables` untrainable; returns
    those it changed (`thaw` gives their training back)."""
    keep = {id(v) for v in variables}
    frozen = [v for v in model.trainable_variables if id(v) not in keep]
    for v in frozen:
        v.trainable = False
    return frozen


def thaw(variables) -> None:
    for v in variables:
        v.trainable = True


def fine_tune_two_stages(args, runtime, lm_class, make_data, examples: int, evaluate=None,
                         metrics=()):
    """The two stages on the training pairs (`make_data`, as `text_to_text.fine_tune`
    takes it). Returns the model and {"epoch", "step"} of its weights, counting both
    stages' steps."""
    from kbert.tasks.text_to_text import fine_tune

    checkpoints = os.path.join(args.output_dir, "checkpoints")
    frozen = []

    def stage_one_model():
        lm = lm_class.from_pretrained(args.init_from,
                                      source_encoder_layers=args.bart_source_encoder)
        trained = lm.stage_one_variables()
        frozen.extend(freeze_all_but(lm, trained))
        logger.info("stage one: %d of %d trainable variables (the new encoder of %d layers, "
                    "BART's encoder positions, its first layer's query/key/value)",
                    len(trained), len(trained) + len(frozen), args.bart_source_encoder)
        return lm

    model, first = fine_tune(
        args, runtime, lm_class, make_data, examples, "seq2seq stage one (new source encoder)",
        evaluate=None if args.bart_stage_two_steps else evaluate, metrics=metrics,
        build_model=stage_one_model, checkpoint_dir=os.path.join(checkpoints, "stage_one"))
    thaw(frozen)
    if not args.bart_stage_two_steps:
        return model, first
    model, second = fine_tune(
        args, runtime, lm_class, make_data, examples, "seq2seq stage two (all weights)",
        evaluate=evaluate, metrics=metrics, build_model=lambda: model,
        steps=args.bart_stage_two_steps, checkpoint_dir=os.path.join(checkpoints, "stage_two"))
    step = first["step"] + second["step"]
    per_epoch = first["step"] / first["epoch"] if first["epoch"] else None
    return model, {"epoch": round(step / per_epoch, 4) if per_epoch else second["epoch"],
                   "step": step}
