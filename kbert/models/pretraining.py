"""What a family's pretraining recipe is: the registry hook `pretrain` of a family that
`python -m kbert.tasks.pretrain --model NAME` trains (BERT's masked LM and next
sentence, RoBERTa's masked LM, GPT's causal LM, ELMo's biLM). The command reads the
flags, the text and the optimizer settings; the recipe builds the data and the model."""

from __future__ import annotations

import dataclasses
from typing import Callable


@dataclasses.dataclass
class PretrainRun:
    """What a recipe hands the command: the model (built and compiled by
    `runtime.build`), an endless batched dataset, the number of examples an epoch and
    the mean real tokens an example (for the logs' throughput), and `save(folder)`,
    which writes the model folder the task commands' `--init_from` reads."""

    model: object
    data: object
    examples: int
    tokens_per_example: float
    save: Callable[[str], None]


class PretrainRecipe:
    """A family's pretraining, reached through the registry (`family.hook("pretrain")`).

    Attributes:
        reads_records: takes `--input_file` (BERT's `create_data` TFRecords).
        needs_folder: needs `--init_from` unless `--from_scratch` (which learns the
            family's vocabulary from the text, `kbert.tokenizers.learn`).
        specials: the special tokens an example holds (for `--max_seq_length`'s check).
        help: one line for `--model`'s help.
    """

    reads_records = False
    needs_folder = False
    specials = 0
    help = ""

    def default_preset(self, bundled: bool) -> str:
        """The `--preset` when none is given (`bundled`: the bundled corpus)."""
        return "demo" if bundled else "mini"

    def build(self, args, runtime, texts: Callable[[], list[str]],
              optimizer: Callable[[], object]) -> PretrainRun:
        """The run for `args`: `texts()` reads `--text_file`'s lines (or the bundled
        corpus), `optimizer()` makes the command's optimizer for `runtime.build`."""
        raise NotImplementedError

    @staticmethod
    def tokenizer_and_config(args, lm_class, scratch: Callable[[], tuple]) -> tuple:
        """(tokenizer, config): those of the --init_from folder's language model
        (`lm_class`), else `scratch()`'s (--from_scratch alone: learned from the text)."""
        if not args.init_from:
            return scratch()
        source = lm_class.from_pretrained(args.init_from)
        if source.tokenizer is None:
            raise ValueError(f"--init_from {args.init_from}: no tokenizer files "
                             f"({lm_class.__name__}'s)")
        return source.tokenizer, source.config

    @staticmethod
    def built(model, inputs):
        """Calls the model once, so that every variable exists before the optimizer is
        built (a checkpoint restore builds it from the trainable variables)."""
        model(inputs)
        return model


def scratch_config(config_class, preset: str | None, demo: dict, **overrides):
    """The config of a model trained from scratch: `--preset demo` (or none) is the
    family's tiny preset widened by `demo` (a small model a CPU trains in minutes),
    another name that preset; `overrides` (the learned vocabulary's size and special
    ids) apply to both."""
    if preset in (None, "demo", "mini"):
        return config_class.preset("tiny", **{**demo, **overrides})
    return config_class.preset(preset, **overrides)


def seq2seq_run(args, runtime, optimizer, model_class, config, data, examples: int,
                tokenizer) -> PretrainRun:
    """What T5's and BART's recipes share once their data is made: the model (new with
    `config` under --from_scratch, else the --init_from folder's), built and compiled
    with `lm_loss` and `Perplexity` on `{"logits": targets}`, and the run saving it with
    `tokenizer`."""
    from kbert.models.metrics import Perplexity, lm_loss

    def make():
        if args.from_scratch or not args.init_from:
            return PretrainRecipe.built(model_class(config), next(iter(data))[0])
        return model_class.from_pretrained(args.init_from)

    model = runtime.build(make, optimizer, {"logits": lm_loss()}, {"logits": [Perplexity()]})
    return PretrainRun(model, data, examples, float(args.max_seq_length),
                       lambda folder: model.save_pretrained(folder, tokenizer=tokenizer))
