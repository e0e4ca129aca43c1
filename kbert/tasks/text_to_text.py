"""Tasks as text to text (T5, Raffel et al., 2020): each example an input text and a
target text, an encoder-decoder fine-tuned on them with teacher forcing (cross-entropy
on the target's tokens, `</s>` included), predictions by greedy decoding, read back
into labels, numbers or answers and scored with the task's own metrics.

The family says how a task becomes text (its hooks: `glue_text`, `glue_target`,
`glue_label` for GLUE; T5's are T5's formats, `kbert.models.t5.hooks`); this module
is the family-free and task-free part: encoding with cuts counted, the data, the
fine-tuning run, decoding, the export. Each task's runner is in its own folder
(`kbert.tasks.glue.text_to_text`, `kbert.tasks.squad.text_to_text`).

    python -m kbert.tasks.glue --task sst2 --data_dir glue_data/SST-2 \\
        --init_from t5-small --learning_rate 3e-4 --output_dir out/sst2-t5
    python -m kbert.tasks.squad --init_from t5-small --learning_rate 3e-4 ...
"""

from __future__ import annotations

import logging
import os

import numpy as np
import tensorflow as tf

from kbert import training
from kbert.models import registry

logger = logging.getLogger(__name__)


def is_text_to_text(init_from: str | None, hook: str = "glue_text") -> bool:
    """The --init_from folder's family runs tasks as text to text (it has the task's
    hook: `glue_text`, `squad_text`)."""
    if not init_from or not os.path.isdir(init_from):
        return False
    try:
        family = registry.family_of_folder(init_from)
    except ValueError:
        return False
    return family.hook(hook) is not None


def encode_texts(tokenizer, texts, length: int, what: str):
    """Texts -> (ids int32 [N, length] padded with the pad id, mask int32 [N, length]):
    the tokenizer's `encoder_ids` (T5: the text's ids and `</s>`); a longer one keeps
    its first `length - 1` tokens and its end token (seqio's trim, then EOS), counted
    and named in one warning as `what`."""
    rows, cut = [], 0
    end = tokenizer.end_token_id
    for i in range(0, len(texts), 512):
        ids = tokenizer.encoder_ids(tf.constant(texts[i:i + 512])).to_list()
        for row in ids:
            if len(row) > length:
                cut += 1
                row = row[:length - 1] + [end]
            rows.append(row)
    if cut:
        logger.warning("%d of %d %s are longer than %d tokens and were cut", cut, len(texts),
                       what, length)
    out = np.full((len(rows), length), tokenizer.pad_id, np.int32)
    mask = np.zeros((len(rows), length), np.int32)
    for r, row in enumerate(rows):
        out[r, :len(row)], mask[r, :len(row)] = row, 1
    return out, mask


def target_length(tokenizer, targets) -> int:
    """The tokens of the longest target, `</s>` included."""
    return max(int(n) for n in tokenizer.encoder_ids(tf.constant(list(targets))).row_lengths())


def features(lm, tokenizer, inputs, targets, input_length: int, output_length: int):
    """(the model's four inputs, {"logits": labels}) as arrays: the decoder's input the
    target shifted right behind the start token; labels -1 on padding (`lm_loss` leaves
    them out)."""
    enc, enc_mask = encode_texts(tokenizer, inputs, input_length, "inputs")
    tgt, tgt_mask = encode_texts(tokenizer, targets, output_length, "targets")
    labels = np.where(tgt_mask > 0, tgt, -1).astype(np.int32)
    decoder = np.asarray(lm.shift_right(labels))
    decoder_mask = np.concatenate([np.ones_like(tgt_mask[:, :1]), tgt_mask[:, :-1]], 1)
    return ({"encoder_token_ids": enc, "encoder_padding_mask": enc_mask,
             "decoder_token_ids": decoder, "decoder_padding_mask": decoder_mask},
            {"logits": labels})


def generate_texts(lm, tokenizer, inputs, input_length: int, max_new_tokens: int,
                   batch_size: int) -> list[str]:
    """Greedy outputs (without `</s>`) of the inputs, `batch_size` at a time."""
    return generate_outputs(lm, tokenizer, inputs, input_length, max_new_tokens,
                            batch_size)[0]


def generate_outputs(lm, tokenizer, inputs, input_length: int, max_new_tokens: int,
                     batch_size: int, **settings) -> tuple[list[str], list[int]]:
    """(the output texts without `</s>`, the tokens each generated: `</s>` counted where
    it came) of the inputs, `batch_size` at a time, cut to `input_length` tokens as
    `encode_texts` cuts (with its warning). `settings`: `generate`'s decoding options
    (num_beams > 1: beam search; length_penalty, no_repeat_ngram_size, min_new_tokens,
    repetition_penalty); none: greedy."""
    enc, mask = encode_texts(tokenizer, inputs, input_length, "inputs")
    return decode_outputs(lm, tokenizer, enc, mask, max_new_tokens, batch_size, **settings)


def decode_outputs(lm, tokenizer, prompts, mask, max_new_tokens: int, batch_size: int,
                   **settings) -> tuple[list[str], list[int]]:
    """`generate_outputs` of prompts already encoded: ids [N, P] right-padded and their
    mask (an encoder-decoder's encoder inputs, a causal LM's prompts)."""
    sampler = "beam" if settings.get("num_beams", 1) > 1 else "greedy"
    beam_only = ("num_beams", "length_penalty", "early_stopping")
    settings = {k: v for k, v in settings.items()
                if k != "sampler" and (sampler == "beam" or k not in beam_only)}
    end = tokenizer.end_token_id
    texts, lengths = [], []
    for i in range(0, len(prompts), batch_size):
        rows = mask[i:i + batch_size]
        width = max(1, int(rows.sum(1).max()))
        ids = lm.generate_ids(prompts[i:i + batch_size, :width], rows[:, :width],
                              max_new_tokens, sampler=sampler, **settings)
        ids = tf.convert_to_tensor(ids)
        ends = tf.cumsum(tf.cast(tf.equal(ids, end), tf.int32), axis=1)
        before = tf.equal(ends, 0)
        # the tokens before the end token, and the end token itself where one came
        first_end = tf.equal(ends, 1) & tf.equal(ids, end)
        lengths.extend(int(n) for n in tf.reduce_sum(
            tf.cast(before | first_end, tf.int32), axis=1).numpy())
        out = tokenizer.detokenize(tf.ragged.boolean_mask(ids, before)).numpy()
        texts.extend(t.decode("utf-8") for t in out)
    return texts, lengths


def trim_batch(multiple: int):
    """(features, labels) -> the same, the encoder's inputs cut to the batch's longest
    input and the decoder's inputs and labels to its longest target (a causal LM's
    sequence and labels to its longest sequence), each rounded up to
    a multiple of `multiple` (rows are right-padded: nothing real is cut, and padded
    positions are masked out of attention and the loss)."""
    def length(mask):
        seq = tf.shape(mask)[1]
        longest = tf.reduce_max(tf.reduce_sum(tf.cast(tf.not_equal(mask, 0), tf.int32), 1))
        return tf.clip_by_value((longest + multiple - 1) // multiple * multiple,
                                tf.minimum(seq, multiple), seq)

    def trim(x, y):
        if "encoder_padding_mask" not in x:  # a causal LM's one sequence
            keep = length(x["padding_mask"])
            return {k: v[:, :keep] for k, v in x.items()}, {"logits": y["logits"][:, :keep]}
        inputs = length(x["encoder_padding_mask"])
        targets = length(x["decoder_padding_mask"])
        x = {k: v[:, :inputs] if k.startswith("encoder_") else v[:, :targets]
             for k, v in x.items()}
        return x, {"logits": y["logits"][:, :targets]}

    return trim


def fine_tune(args, runtime, lm_class, make_data, examples: int, log_name: str,
              evaluate=None, metrics=(), build_model=None, steps: int | None = None,
              checkpoint_dir: str | None = None):
    """The --init_from encoder-decoder trained on the arrays `make_data(model) -> (x, y)`
    as the training flags say (batch, epochs, learning rate with warmup and linear
    decay, checkpoints, resumption), under the command's `runtime` (--strategy); batches trimmed of the padding
    all their rows share (`trim_batch`; --trim_padding's multiple, 32 where the command
    has no such flag; off on TPUs and with several workers). With --eval_strategy,
    `evaluate(model) -> {metric: value}` (one of `metrics`) picks the best weights
    (`common.best_model`). `build_model()` gives the model (default: --init_from's),
    `steps` replaces the epochs' steps, `checkpoint_dir` OUTPUT_DIR/checkpoints (a
    stage of a longer run). Returns the model and {"epoch", "step"} of its weights."""
    from kbert.models.metrics import Perplexity, lm_loss
    from kbert.tasks.common import best_model, fit_and_finish, loop_steps, trim_multiple

    batch = args.train_batch_size
    loop = loop_steps(args, examples / batch, True) if evaluate is not None \
        else args.steps_per_loop
    total_steps, steps_per_loop = training.whole_loops(
        steps or training.train_steps(args, examples, batch), loop, args.steps_per_execution)
    model = runtime.build(
        build_model or (lambda: lm_class.from_pretrained(args.init_from)),
        lambda: training.create_optimizer(args.learning_rate, total_steps,
                                          int(total_steps * args.warmup_proportion)),
        {"logits": lm_loss(getattr(args, "label_smoothing_factor", 0.0))},
        {"logits": [Perplexity()]})
    x, y = make_data(model)
    data = training.finalize_dataset(tf.data.Dataset.from_tensor_slices((x, y)), batch,
                                     training=True, seed=args.seed)
    multiple = trim_multiple(getattr(args, "trim_padding", 32), runtime.strategy,
                             args.max_seq_length)
    if multiple:  # each batch cut to its longest input and target (rounded up)
        data = data.map(trim_batch(multiple))
    logger.info("%s as text to text: %d examples, %d steps", log_name, examples, total_steps)
    evaluation = best_model(args, evaluate, list(metrics), steps_per_loop, examples / batch) \
        if evaluate is not None else None
    trained = fit_and_finish(
        model, data, args, total_steps, steps_per_loop, examples_per_step=batch,
        tokens_per_step=training.real_tokens_per_batch(
            x.get("encoder_padding_mask", x.get("padding_mask")), batch),
        steps_per_epoch=examples / batch, evaluation=evaluation,
        checkpoint_dir=checkpoint_dir)
    return model, trained


def save_and_export(args, model, tokenizer, max_new_tokens: int, texts=(),
                    outputs=()) -> None:
    """OUTPUT_DIR/model (a model folder `from_pretrained` reads) and, with --export_dir,
    the `generate` SavedModel (`export`)."""
    model.save_pretrained(os.path.join(args.output_dir, "model"), tokenizer=tokenizer)
    if args.export_dir:
        export(args, model, tokenizer, max_new_tokens, texts, outputs)


def export(args, model, tokenizer, max_new_tokens: int, texts=(), outputs=(),
           settings: dict | None = None, prompt_prefix: str = "", prompt_suffix: str = "",
           prompt_suffix_ids=(), predict=None) -> None:
    """The `generate` SavedModel in --export_dir (text in, text out, at most
    `max_new_tokens`; greedy, or the decoding `settings` (`export_generate`'s: num_beams,
    length_penalty, ...) as its `serving_default`'s; `prompt_prefix` put before and
    `prompt_suffix`, `prompt_suffix_ids` after each prompt in the graph; --quantize/--dtype as the task
    commands), checked through TF Serving's loader to answer `outputs` for the first 64
    `texts` (given without prefix and suffix; the model's own outputs, those of the exported
    variant where --quantize/--dtype changed it: `predict(lm, texts)`, by default
    `generate_outputs` with the settings)."""
    from kbert.export import export_generate
    from kbert.export.check import keep_served
    from kbert.export.folder import export_variant

    settings = dict(settings or {})
    if settings.get("num_beams", 1) > 1:
        settings["sampler"] = "beam"
    exported, _ = export_variant(model, args.quantize, args.dtype)
    texts = list(texts)[:64]
    if predict is None:
        def predict(lm, inputs):
            return generate_outputs(lm, tokenizer, inputs, args.max_seq_length,
                                    max_new_tokens, args.predict_batch_size, **settings)[0]
    # The check's texts run in the exporter's own load of the export.
    with keep_served(also=[{"prompt": texts}] if texts else []):
        export_generate(exported, tokenizer, args.export_dir, max_new_tokens=max_new_tokens,
                        prompt_prefix=prompt_prefix, prompt_suffix=prompt_suffix,
                        prompt_suffix_ids=prompt_suffix_ids, **settings)
        if texts:
            if exported is not model:
                outputs = predict(exported, [prompt_prefix + t + prompt_suffix for t in texts])
            check_export(args.export_dir, texts, list(outputs)[:64])
    logger.info("SavedModel for TF Serving (text in, text out): %s", args.export_dir)


def check_export(export_dir: str, texts, outputs) -> None:
    """The `generate` SavedModel, run as TF Serving runs it (its C++ loader), must answer
    `outputs` for `texts`."""
    from kbert.export.check import check_served

    check_served(export_dir, {"prompt": list(texts)}, "text", list(outputs),
                 list(range(len(texts))), "the model (rows)")
    logger.info("SavedModel checked through TF Serving's C++ loader: the model's answers on "
                "%d inputs", len(texts))
