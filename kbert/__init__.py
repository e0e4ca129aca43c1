"""kbert: ELMo, GPT and BERT as Keras 3 layers and models, trained, fine-tuned and
served with TensorFlow."""

__version__ = "0.1.0"

from kbert import _startup  # noqa: E402

if _startup.run_as_command():
    _startup.quiet_import_tensorflow()

from kbert.models.bert import BertConfig, BertEncoder, BertPretrainer  # noqa: E402
from kbert.models.elmo import ELMo, ELMoConfig  # noqa: E402
from kbert.models.gpt import GPTConfig, GPTDecoder, GPTLanguageModel  # noqa: E402
from kbert.tokenizers import BertTokenizer, GPTTokenizer, build_vocab  # noqa: E402
from kbert.tokenizers.elmo import ELMoCharTokenizer  # noqa: E402

__all__ = ["BertConfig", "BertEncoder", "BertPretrainer", "BertTokenizer", "ELMo", "ELMoCharTokenizer",
           "ELMoConfig", "GPTConfig", "GPTDecoder", "GPTLanguageModel", "GPTTokenizer",
           "build_vocab"]
