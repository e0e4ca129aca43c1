"""T5's registry hooks (`Family.hooks` of "t5"): its pretraining recipe, and GLUE as
text to text in T5's formats (`glue_text`, `glue_target`, `glue_label`), which
`kbert.tasks.text_to_text` runs.

The formats are those of T5's `glue` preprocessor (Raffel et al., 2020, appendix D):
the task's name, then each field as `name: text`, the fields in sorted order ("mnli
hypothesis: ... premise: ..."); the target the label's name (TFDS's names, e.g.
"not_equivalent"), for STS-B the score rounded to steps of 0.2, one decimal ("3.8").
A user's own data: `sentence: ...` (a pair: `sentence1: ... sentence2: ...`), the
label names as targets.
"""

from __future__ import annotations

import math

from kbert.models.t5.pretraining import pretrain  # noqa: F401 (the pretrain hook)
from kbert.models.registry import Family
from kbert.models.t5.config import T5Config
from kbert.models.t5.model import T5Seq2SeqLM
from kbert.tokenizers.t5 import T5Tokenizer

# task: (prefix, the field names of text_a and text_b, the label words in kbert's
# label order: kbert keeps GLUE's TSV labels, "0"/"1", MNLI's three names)
GLUE_FORMATS = {
    "cola": ("cola", ("sentence",), ("unacceptable", "acceptable")),
    "sst2": ("sst2", ("sentence",), ("negative", "positive")),
    "mrpc": ("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent")),
    "qqp": ("qqp", ("question1", "question2"), ("not_duplicate", "duplicate")),
    "stsb": ("stsb", ("sentence1", "sentence2"), None),
    "mnli": ("mnli", ("premise", "hypothesis"), ("contradiction", "entailment", "neutral")),
    "ax": ("mnli", ("premise", "hypothesis"), ("contradiction", "entailment", "neutral")),
    "qnli": ("qnli", ("question", "sentence"), ("entailment", "not_entailment")),
    "rte": ("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment")),
    "wnli": ("wnli", ("sentence1", "sentence2"), ("not_entailment", "entailment")),
}


def _format(task):
    if task.tfds.startswith("glue/") and task.name in GLUE_FORMATS:  # not own data
        return GLUE_FORMATS[task.name]
    if task.is_regression:
        raise ValueError("text-to-text regression is STS-B's (scores in steps of 0.2 as "
                         "text); for your own numbers use an encoder family (bert, roberta)")
    names = ("sentence1", "sentence2") if task.is_pair else ("sentence",)
    return None, names, tuple(str(label) for label in task.labels)


def glue_text(task, text_a: str, text_b: str | None) -> str:
    """The encoder's input text of one example."""
    prefix, names, _ = _format(task)
    fields = sorted(zip(names, [text_a] + ([text_b] if task.is_pair else [])))
    body = " ".join(f"{name}: {text}" for name, text in fields)
    return f"{prefix} {body}" if prefix else body


def glue_target(task, label) -> str:
    """The target text of a label (STS-B: a score 0..5)."""
    _, _, words = _format(task)
    if words is None:
        return f"{round(float(label) * 5) / 5:.1f}"
    return words[list(task.labels).index(label)]


def glue_label(task, text: str):
    """The label an output text names (STS-B: its number), or None where it names none
    (T5's postprocessors count such an output as wrong: -1 / no class)."""
    _, _, words = _format(task)
    text = text.strip()
    if words is None:
        try:
            value = float(text)
        except ValueError:
            return None
        return value if math.isfinite(value) else None
    return task.labels[words.index(text)] if text in words else None


def squad_text(question: str, context: str) -> str:
    """SQuAD's input as T5's `squad` preprocessor writes it: "question: ... context:
    ..." (T5 also pads punctuation with spaces; kbert feeds the text as it is, since the
    official script scores the answers against the original text)."""
    return f"question: {question} context: {context}"


def squad_target(answers: list) -> str:
    """The target: the first answer's text, as T5's; "" for an unanswerable (v2.0)
    question (the decoder writes `</s>` alone)."""
    return answers[0][0] if answers else ""


# The family, registered by the registry when it loads the package (`family_packages`).
FAMILY = Family("t5", T5Config, T5Seq2SeqLM, T5Tokenizer, language_model_class=T5Seq2SeqLM,
                description="t5 is an encoder-decoder (text to text)",
                folder_hint="Hugging Face's t5-small ... t5-11b, google/t5-v1_1-*, "
                            "google/flan-t5-*")

# The hooks this family defines (`kbert.models.registry.HOOK_NAMES`).
HOOKS = ("glue_text", "glue_target", "glue_label", "squad_text", "squad_target", "pretrain")
