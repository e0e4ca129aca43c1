"""kbert: ELMo, GPT and BERT as Keras 3 layers and models, trained, fine-tuned and
served with TensorFlow.

The names below are imported on first use (`kbert._lazy`), so that a command's
`--help` does not wait for TensorFlow."""

__version__ = "0.1.0"

from kbert._lazy import lazy_package  # noqa: E402

_EXPORTS = {
    "BertConfig": "kbert.models.bert", "BertEncoder": "kbert.models.bert",
    "BertPretrainer": "kbert.models.bert", "ELMo": "kbert.models.elmo",
    "ELMoConfig": "kbert.models.elmo", "GPTConfig": "kbert.models.gpt",
    "GPTDecoder": "kbert.models.gpt", "GPTLanguageModel": "kbert.models.gpt",
    "BertTokenizer": "kbert.tokenizers", "GPTTokenizer": "kbert.tokenizers",
    "build_vocab": "kbert.tokenizers", "ELMoCharTokenizer": "kbert.tokenizers.elmo",
    "RobertaConfig": "kbert.models.roberta", "RobertaEncoder": "kbert.models.roberta",
    "RobertaMaskedLM": "kbert.models.roberta", "RobertaTokenizer": "kbert.tokenizers.roberta",
    "presets": "kbert.hub", "enable_lora": "kbert.models.lora",
    "merge_lora": "kbert.models.lora", "save_lora": "kbert.models.lora",
    "load_lora": "kbert.models.lora", "T5Config": "kbert.models.t5",
    "T5Seq2SeqLM": "kbert.models.t5", "T5Tokenizer": "kbert.tokenizers.t5",
    "BartConfig": "kbert.models.bart", "BartSeq2SeqLM": "kbert.models.bart",
    "BartTokenizer": "kbert.tokenizers.bart",
}
lazy_package(__name__, _EXPORTS)
