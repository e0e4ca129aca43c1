"""RoBERTa's task hooks (the registry reaches them by name, `Family.hook`): the GLUE head
of `RobertaForSequenceClassification`, and the pretraining recipe."""

from __future__ import annotations

import keras

from kbert.layers.heads import TanhClassifierHead, classifier_model
from kbert.models.roberta.pretraining import pretrain  # noqa: F401 (the pretrain hook)
from kbert.models.registry import Family
from kbert.models.roberta.config import RobertaConfig
from kbert.models.roberta.encoder import RobertaEncoder, RobertaMaskedLM
from kbert.tokenizers.roberta import RobertaTokenizer


@keras.saving.register_keras_serializable(package="kbert")
class RobertaClassificationHead(TanhClassifierHead):
    """`RobertaClassificationHead` (`kbert.layers.heads.TanhClassifierHead` under the
    name that RoBERTa task folders were saved with)."""


def glue_model(encoder, task, tokenizer, options: dict) -> keras.Model:
    """`RobertaForSequenceClassification`'s model: the head on the `<s>` state of the
    sequence output; the pooler (where the folder had one) is frozen, never read."""
    encoder.set_pooler_trainable(False)
    inputs = encoder.keras_inputs()
    sequence = encoder.features(inputs)["sequence_output"]
    first = sequence[:, 0, :]  # the <s> state
    head = RobertaClassificationHead(1 if task.is_regression else task.num_labels,
                                     encoder.hidden_size, encoder.dropout_rate,
                                     encoder.initializer_range, name="classifier")
    out = head(first)
    return classifier_model(inputs, out, task.is_regression, "roberta")


# The family, registered by the registry when it loads the package (`family_packages`).
FAMILY = Family("roberta", RobertaConfig, RobertaEncoder, RobertaTokenizer,
                masked_lm_class=RobertaMaskedLM,
                description="roberta fine-tunes a Hugging Face RoBERTa folder",
                folder_hint="Hugging Face's roberta-base")

# The hooks this family defines (`kbert.models.registry.HOOK_NAMES`).
HOOKS = ("glue_model", "pretrain")
