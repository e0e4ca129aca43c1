"""The task command lines' model and training flags. No TensorFlow here: the parsers
are built, and `--help` answered, before TensorFlow is imported."""

from __future__ import annotations

import argparse

from kbert.cli import model_path, parse_bool

# NER's feature-mode layer choices (kbert.tasks.ner.model reads them from here).
LAYER_CHOICES = ("last", "sum_last4", "concat_last4", "sum_all", "scalar_mix",
                 "embeddings", "second_to_last")

def add_model_flags(parser: argparse.ArgumentParser, *, demo: str, vocab_size: int,
                    init_help: str = "", position_init: str = "normal"
                    ) -> argparse._ArgumentGroup:
    """--model (a registered family, checked after parsing: the registry needs
    TensorFlow, `--help` does not), --init_from and the from-scratch flags."""
    from kbert.models.registry import DEFAULT_FAMILY, family_packages

    group = parser.add_argument_group("model")
    names = ", ".join(module.rsplit(".", 1)[1] for module in family_packages())
    group.add_argument("--model", default=None, metavar="FAMILY",
                       help=f"model family: {names}, or one a user registered (default: the "
                            f"family of --init_from, or {DEFAULT_FAMILY} from scratch); a "
                            "family with no vocabulary of its own needs --init_from")
    group.add_argument("--init_from", type=model_path,
                       help="a model folder (kbert, Hugging Face or Google BERT, with its "
                            "vocabulary) or a Hugging Face Hub name (bert-base-uncased, "
                            "org/name@revision; read from the Hub cache, downloaded when "
                            "online); none: train from scratch" + init_help)
    group.add_argument("--preset", default="demo",
                       help=f"BertConfig preset when training from scratch ('demo': {demo})")
    group.add_argument("--vocab_size", type=int, default=vocab_size,
                       help="WordPiece vocabulary learned from the training texts when "
                            "training from scratch")
    group.add_argument("--do_lower_case", type=parse_bool, default=None,
                       metavar="true|false",
                       help="override the casing read from --init_from")
    group.add_argument("--lora_rank", type=int, default=0,
                       help="train LoRA adapters of this rank (kbert.enable_lora) instead of "
                            "the --init_from encoder's weights (0: off); saved alone in "
                            "OUTPUT_DIR/adapter, merged into the task folder and export")
    group.add_argument("--lora_alpha", type=float, default=None,
                       help="LoRA's scale alpha (the update is alpha/rank x A B; default: "
                            "the rank)")
    group.add_argument("--lora_targets", default=None, metavar="NAME,...",
                       help="the Dense layers adapted, by name or path pattern (default: "
                            "query,value)")
    group.add_argument("--position_init", default=position_init,
                       choices=["normal", "sinusoidal"],
                       help="from scratch: start the learned position embeddings as BERT "
                            "does (truncated normal) or as scaled sinusoids, which lets a "
                            "small model learn word order fast (ignored with --init_from)")
    return group


def add_training_flags(group, *, learning_rate, epochs, output_dir: str,
                       export_help: str | None, batch_size: int = 32,
                       seq_help: str | None = None, trim_padding: bool = False,
                       output_help: str = "predictions, metrics, checkpoints and the "
                                          "fine-tuned model",
                       best_model: str | None = None) -> None:
    """Batch sizes, schedule, checkpoints, output and export folders, seed. With
    `learning_rate=None` the command defines --learning_rate and --num_train_epochs;
    with `seq_help`, --max_seq_length (default 128) is added too; with `trim_padding`,
    --trim_padding (see `trim_multiple`); with `export_help=None`, no --export_dir;
    with `best_model` (the help of --metric_for_best_model's default), evaluation
    during training: --eval_strategy, --eval_steps, --metric_for_best_model,
    --greater_is_better, --early_stopping_patience (transformers' names)."""
    if best_model is not None:
        group.add_argument("--eval_strategy", default="no", choices=["no", "epoch", "steps"],
                           help="evaluate on the dev set during training, every epoch or "
                                "every --eval_steps steps, keep the best weights "
                                "(OUTPUT_DIR/best) and end with them: metrics, task folder "
                                "and export are the best evaluation's")
        group.add_argument("--eval_steps", type=int, default=None,
                           help="with --eval_strategy steps: steps between evaluations")
        group.add_argument("--metric_for_best_model", default=None,
                           help=f"the dev metric that picks the best weights ({best_model})")
        group.add_argument("--greater_is_better", type=parse_bool, default=True,
                           metavar="true|false", help="whether a larger metric is better")
        group.add_argument("--early_stopping_patience", type=int, default=0,
                           help="stop after this many evaluations without improvement "
                                "(0: never)")
    if seq_help:
        group.add_argument("--max_seq_length", type=int, default=128, help=seq_help)
    if trim_padding:
        group.add_argument("--trim_padding", type=int, default=32, metavar="N",
                           help="cut each batch's trailing padding to a multiple of N tokens "
                                "(same results, less work on short texts; 0: every batch "
                                "at max_seq_length; always 0 on TPU and multi_worker)")
    group.add_argument("--train_batch_size", type=int, default=batch_size,
                       help="global batch size")
    group.add_argument("--predict_batch_size", type=int, default=64,
                       help="batch size for prediction")
    if learning_rate is not None:
        group.add_argument("--learning_rate", type=float, default=learning_rate,
                           help="peak learning rate")
        group.add_argument("--num_train_epochs", type=float, default=epochs, help="epochs")
        group.add_argument("--max_steps", type=int, default=-1,
                           help="training steps in all; more than 0 overrides "
                                "--num_train_epochs (as transformers' run_glue.py)")
    group.add_argument("--warmup_proportion", type=float, default=0.1,
                       help="share of training steps with linear learning-rate warmup")
    group.add_argument("--steps_per_loop", type=int, default=200,
                       help="steps between checkpoints")
    group.add_argument("--keep_checkpoints", type=int, default=1,
                       help="checkpoints kept after a finished run (the last ones; with 0 "
                            "none, and a rerun trains again)")
    group.add_argument("--tensorboard_dir", default=None,
                       help="TensorBoard logs (default OUTPUT_DIR/tensorboard; 'none': off)")
    group.add_argument("--output_dir", default=output_dir, help=output_help)
    if export_help is not None:
        from kbert.export.folder import DTYPES, QUANTIZE_MODES

        group.add_argument("--export_dir", default=None, help=export_help)
        group.add_argument("--quantize", default=None, choices=QUANTIZE_MODES,
                           help="the export's weights quantized (Keras' int8: every Dense "
                                "kernel and the token table); the task folder and the "
                                "metrics above stay float32, the export's own metrics are "
                                "added with the mode as prefix (SQuAD, NER, GLUE dev sets)")
        group.add_argument("--dtype", default=None, choices=DTYPES,
                           help="the export's variables and computation in this dtype "
                                "(bfloat16; heads' output layers stay float32); its own "
                                "dev metrics are added with the dtype as prefix")
    group.add_argument("--seed", type=int, default=0,
                       help="seed for initialization and shuffling")
