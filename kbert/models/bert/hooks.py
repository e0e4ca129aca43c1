"""BERT's task hooks (the registry reaches them by name, `Family.hook`): training from
scratch, the pretraining recipe, and Google's create_data (the pretrain command's
`create_data`)."""

from kbert.models.bert import create_data  # noqa: F401
from kbert.models.bert.pretraining import pretrain  # noqa: F401
from kbert.models.bert.scratch import scratch_encoder, scratch_tokenizer  # noqa: F401
from kbert.models.bert.config import BertConfig
from kbert.models.bert.encoder import BertEncoder
from kbert.models.bert.pretrainer import BertPretrainer
from kbert.models.registry import Family, recognizes_model_type
from kbert.tokenizers.bert import BertTokenizer


# The family, registered by the registry when it loads the package (`family_packages`).
FAMILY = Family("bert", BertConfig, BertEncoder, BertTokenizer,
                recognizes=recognizes_model_type("bert", files=("bert_config.json",),
                                                 untyped=BertConfig.is_reference_dict),
                aliases=("BertEncoder",), masked_lm_class=BertPretrainer,
                description="bert fine-tunes a BERT folder (Google, Hugging Face, kbert) or "
                            "trains one from scratch",
                folder_hint="Google's BERT release or a Hugging Face bert folder")


# The hooks this family defines (`kbert.models.registry.HOOK_NAMES`).
HOOKS = ("scratch_tokenizer", "scratch_encoder", "pretrain", "create_data")
