"""RoBERTa's task hooks (the registry reaches them by name, `Family.hook`): the GLUE head
of `RobertaForSequenceClassification`, and the pretraining recipe."""

from __future__ import annotations

import keras

from kbert.layers.heads import TanhClassifierHead
from kbert.models.roberta.pretraining import pretrain  # noqa: F401 (the pretrain hook)


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
    if task.is_regression:
        return keras.Model(inputs, {"score": keras.layers.Reshape((), name="score")(out)},
                           name="roberta_regressor")
    return keras.Model(inputs, {"logits": keras.layers.Identity(name="logits")(out)},
                       name="roberta_classifier")


# The hooks this family defines (`kbert.models.registry.HOOK_NAMES`).
HOOKS = ("glue_model", "pretrain")
