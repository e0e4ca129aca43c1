"""GLUE by prompting a causal LM, as GPT-2 and GPT-3 answer tasks (Radford et al., 2019;
Brown et al., 2020): no weight changes; each example is written into a task template
after k solved examples drawn from the training set (k = 0: zero-shot), and the label
whose words the LM finds likeliest after the prompt is the prediction (GPT-3's method
for multiple-choice and classification: the summed log-probability of each label's
tokens, the label words tokenized after the prompt as one continuation).

    python -m kbert.tasks.glue --task rte --data_dir glue_data/RTE --init_from gpt2 \\
        --shots 4 --output_dir out/rte-4shot

The templates (`TEMPLATES`) follow GPT-3's for RTE and its style elsewhere; your own
data's is "{text}\\nLabel:" with each label name as its word. The prompts of the first
examples, the templates and the drawn shots are written to OUTPUT_DIR/prompts.json.
A prompt longer than the model's positions keeps its last tokens (the shots' start
goes first), with a warning.

A text-to-text model (T5) is prompted in its own task format instead (the family's
`glue_text` / `glue_target` hooks: "sst2 sentence: ..." and the label's name): each
label's target scored by the decoder after the encoder has read the shots and the
example (`score_targets`); the input is cut to --max_seq_length, keeping its end.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import numpy as np
import tensorflow as tf

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Template:
    """`text`: the prompt of one example ({a}, {b}: its texts), followed by the label's
    `words` (one per label, in the task's label order; a leading space, as the words
    follow the prompt in running text). Shots are the same prompt with their label's
    word, separated by `separator`."""

    text: str
    words: tuple

    separator: str = "\n\n"
    answer_separator: str = ""  # between a shot's prompt and its word (which has a space)

    def prompt(self, a: str, b: str | None) -> str:
        return self.text.format(a=a, b=b or "")


TEMPLATES = {
    "cola": Template("{a}\nQuestion: Is this sentence grammatical? Answer:", (" no", " yes")),
    "sst2": Template("{a}\nSentiment:", (" negative", " positive")),
    "mrpc": Template("Sentence 1: {a}\nSentence 2: {b}\nQuestion: Do both sentences mean "
                     "the same thing? Answer:", (" no", " yes")),
    "qqp": Template("Question 1: {a}\nQuestion 2: {b}\nQuestion: Do both questions ask the "
                    "same thing? Answer:", (" no", " yes")),
    # labels: contradiction, entailment, neutral
    "mnli": Template("{a}\nQuestion: {b} True, False or Neither?\nAnswer:",
                     (" False", " True", " Neither")),
    "qnli": Template("Question: {a}\nSentence: {b}\nQuestion: Does the sentence answer the "
                     "question? Answer:", (" yes", " no")),
    "rte": Template("{a}\nQuestion: {b} True or False?\nAnswer:", (" True", " False")),
    "wnli": Template("{a}\nQuestion: {b} True or False?\nAnswer:", (" False", " True")),
}


@dataclasses.dataclass(frozen=True)
class TextToTextTemplate:
    """An encoder-decoder family's own task format (T5's task prefixes: its
    `glue_text` / `glue_target` hooks) as a template: the prompt is the example's input
    text, each label's word its target text; shots go before the example in the same
    input, each followed by its target, separated by a space."""

    task: object
    text_hook: object
    words: tuple
    separator: str = " "
    # T5's targets have no leading space: a shot's target is written after a space
    # ("rte sentence1: ... sentence2: ... entailment"), not glued to its last word.
    answer_separator: str = " "

    @property
    def text(self) -> str:
        return self.text_hook(self.task, "{a}", "{b}" if self.task.is_pair else None)

    def prompt(self, a: str, b: str | None) -> str:
        return self.text_hook(self.task, a, b)


def text_to_text_template(task, family) -> TextToTextTemplate:
    """The template of `family`'s text-to-text hooks (T5: "sst2 sentence: {a}",
    words "negative", "positive")."""
    if task.is_regression:
        raise ValueError(f"GLUE {task.name}: a regression task; prompting scores labels "
                         "(give a classification task)")
    target = family.hook("glue_target")
    return TextToTextTemplate(task, family.hook("glue_text"),
                              tuple(target(task, label) for label in task.labels))


def template_for(task) -> Template:
    """The task's template, or for your own data's labels "{text}\\nLabel:" (pairs:
    "{a}\\n{b}\\nLabel:") with each label name as its word; regression (STS-B) has none."""
    if task.is_regression:
        raise ValueError(f"GLUE {task.name}: a regression task; prompting scores labels "
                         "(give a classification task)")
    if task.name in TEMPLATES:
        return TEMPLATES[task.name]
    text = "{a}\n{b}\nLabel:" if task.is_pair else "{a}\nLabel:"
    return Template(text, tuple(f" {label}" for label in task.labels))


def build_prompts(task, template: Template, examples, train, shots: int, seed: int):
    """Each example's prompt: `shots` training examples (drawn per example, without
    replacement, seeded by `seed` and the example's position) with their label words,
    then the example's own prompt. Returns (prompts, the indices of the shots)."""
    labels = list(task.labels)
    prompts, drawn = [], []
    for i, example in enumerate(examples):
        rng = np.random.default_rng([seed, i])
        picks = rng.choice(len(train), size=min(shots, len(train)), replace=False) \
            if shots else np.array([], int)
        parts = [template.prompt(train[j].text_a, train[j].text_b)
                 + template.answer_separator + template.words[labels.index(train[j].label)]
                 for j in picks]
        parts.append(template.prompt(example.text_a, example.text_b))
        prompts.append(template.separator.join(parts))
        drawn.append([int(j) for j in picks])
    return prompts, drawn


def score_continuations(lm, tokenizer, prompts, continuations, batch_size: int = 16):
    """float64 [len(prompts), len(continuations)]: log p(continuation | prompt) summed over
    the continuation's tokens, under `lm` (a causal LM: `GPTLanguageModel`); a prompt
    whose tokens and the longest continuation's exceed the model's positions keeps its
    last tokens. Returns (scores, how many prompts were cut)."""
    conts = [ids for ids in tokenizer.tokenize(list(continuations)).to_list()]
    if any(not ids for ids in conts):
        raise ValueError("a label word gives no tokens")
    room = lm.max_positions - max(len(ids) for ids in conts)
    contexts = tokenizer.tokenize(list(prompts)).to_list()
    cut = sum(len(c) > room for c in contexts)
    rows = [(c[-room:] if len(c) > room else c, k) for c in contexts for k in range(len(conts))]
    scores = np.zeros(len(rows))
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        seqs = [context + conts[k] for context, k in chunk]
        width = max(len(s) for s in seqs)
        ids = np.zeros((len(seqs), width), np.int32)
        mask = np.zeros((len(seqs), width), np.int32)
        for r, s in enumerate(seqs):
            ids[r, :len(s)], mask[r, :len(s)] = s, 1
        logits = lm({"token_ids": ids, "padding_mask": mask})["logits"]
        logprobs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1).numpy()
        for r, (context, k) in enumerate(chunk):
            n = len(context)
            for t, token in enumerate(conts[k]):
                scores[start + r] += logprobs[r, n + t - 1, token]
    return scores.reshape(len(contexts), len(conts)), cut


def score_targets(lm, tokenizer, prompts, targets, input_length: int,
                  batch_size: int = 16):
    """An encoder-decoder's (T5's) scores: float64 [len(prompts), len(targets)], log
    p(target | prompt) summed over the target's tokens and its end token (the whole
    target text, as T5's rank classification scores it). The encoder reads each
    prompt's `encoder_ids` (the text and `</s>`); one longer than `input_length` keeps
    its last tokens. Returns (scores, how many prompts were cut)."""
    conts = tokenizer.encoder_ids(tf.constant(list(targets))).to_list()
    contexts = tokenizer.encoder_ids(tf.constant(list(prompts))).to_list()
    cut = sum(len(c) > input_length for c in contexts)
    contexts = [c[-input_length:] for c in contexts]
    rows = [(c, k) for c in contexts for k in range(len(conts))]
    scores = np.zeros(len(rows))
    start_id = lm.decoder_prompt()[0]
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        enc_w = max(len(c) for c, _ in chunk)
        dec_w = max(len(conts[k]) for _, k in chunk)
        enc = np.full((len(chunk), enc_w), tokenizer.pad_id, np.int32)
        enc_mask = np.zeros_like(enc)
        dec = np.full((len(chunk), dec_w), tokenizer.pad_id, np.int32)
        dec_mask = np.zeros_like(dec)
        for r, (context, k) in enumerate(chunk):
            enc[r, :len(context)], enc_mask[r, :len(context)] = context, 1
            shifted = [start_id] + conts[k][:-1]
            dec[r, :len(shifted)], dec_mask[r, :len(shifted)] = shifted, 1
        logits = lm({"encoder_token_ids": enc, "encoder_padding_mask": enc_mask,
                     "decoder_token_ids": dec, "decoder_padding_mask": dec_mask})["logits"]
        logprobs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1).numpy()
        for r, (_, k) in enumerate(chunk):
            scores[start + r] = sum(logprobs[r, t, token] for t, token in enumerate(conts[k]))
    return scores.reshape(len(contexts), len(conts)), cut


def run(args, task, train, dev: dict, test: dict, write_submission) -> dict:
    """`--shots K`: the dev metrics of prompting the --init_from causal LM; test
    predictions (`write_submission(path, task, examples, labels)`, the GLUE command's)
    with --do_predict; OUTPUT_DIR/prompts.json and eval_results.json."""
    from kbert.io import atomic_file
    from kbert.models import registry
    from kbert.tasks.common import write_results
    from kbert.tasks.glue.data import dev_source
    from kbert.tasks.glue.metrics import compute_metrics

    family = registry.family_of_folder(args.init_from)
    lm_class = family.language_model_class
    text_to_text = family.hook("glue_text") is not None  # T5: its task prefixes
    if lm_class is None or (getattr(lm_class, "is_encoder_decoder", False)
                            and not text_to_text):
        raise ValueError(f"--shots: prompts a causal language model (gpt) or a "
                         f"text-to-text one (t5); --init_from {args.init_from} holds a "
                         f"{family.name} model")
    lm = lm_class.from_pretrained(args.init_from)
    tokenizer = lm.tokenizer
    template = text_to_text_template(task, family) if text_to_text else template_for(task)
    if args.shots and not train:
        raise ValueError("--shots: the training split is empty (the shots come from it)")
    labels = list(task.labels)
    results, record = {}, {"template": template.text, "words": list(template.words),
                           "labels": labels, "shots": args.shots, "seed": args.seed}

    def predict(examples, split):
        prompts, drawn = build_prompts(task, template, examples, train, args.shots, args.seed)
        if text_to_text:
            scores, cut = score_targets(lm, tokenizer, prompts, template.words,
                                        args.max_seq_length, args.predict_batch_size)
            limit = f"--max_seq_length={args.max_seq_length} tokens"
        else:
            scores, cut = score_continuations(lm, tokenizer, prompts, template.words,
                                              args.predict_batch_size)
            limit = f"the model's {lm.max_positions} positions"
        if cut:
            logger.warning("%s: %d of %d prompts are longer than %s and keep their last "
                           "tokens", split, cut, len(prompts), limit)
        record[split] = {"first_prompts": prompts[:3], "shots_of_first": drawn[:3]}
        return [labels[i] for i in scores.argmax(axis=1)]

    for split, examples in dev.items():
        predictions = predict(examples, split)
        metrics = compute_metrics(task, predictions, [e.label for e in examples])
        suffix = "" if split in ("dev", "dev_matched") else "_mm"
        results.update({f"{k}{suffix}": v for k, v in metrics.items()})
    for split, examples in test.items():
        write_submission(os.path.join(args.output_dir, task.submission[split]), task,
                         examples, predict(examples, split))
    with atomic_file(os.path.join(args.output_dir, "prompts.json")) as f:
        json.dump(record, f, indent=2, ensure_ascii=False)
    if not dev:
        return {}
    return write_results(args.output_dir, results, split="eval",
                         source=dev_source(args, task, dev))
