"""BERT's task hooks (the registry reaches them by name, `Family.hook`): training from
scratch, the pretraining recipe, and Google's create_data (the pretrain command's
`create_data`)."""

from kbert.models.bert import create_data  # noqa: F401
from kbert.models.bert.pretraining import pretrain  # noqa: F401
from kbert.models.bert.scratch import scratch_encoder, scratch_tokenizer  # noqa: F401


# The hooks this family defines (`kbert.models.registry.HOOK_NAMES`).
HOOKS = ("scratch_tokenizer", "scratch_encoder", "pretrain", "create_data")
