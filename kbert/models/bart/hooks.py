"""BART's registry hooks (`Family.hooks` of "bart"): the GLUE head of
`BartForSequenceClassification`, the SQuAD head of `BartForQuestionAnswering`, a token
head for NER on the same decoder states, and the pretraining recipe."""

from __future__ import annotations

import keras
from keras import ops

from kbert.layers.heads import TanhClassifierHead, classifier_model, last_token_state
from kbert.models.bart.pretraining import pretrain  # noqa: F401 (the pretrain hook)
from kbert.models.bart.config import BartConfig
from kbert.models.bart.model import BartSeq2SeqLM
from kbert.models.registry import Family
from kbert.tokenizers.bart import BartTokenizer


@keras.saving.register_keras_serializable(package="kbert")
class DecoderInputs(keras.layers.Layer):
    """The decoder's input in BART's classification: the encoder's tokens shifted right
    behind the decoder start (`</s>`), as `shift_tokens_right`; its padding mask the
    encoder's, shifted the same way."""

    def __init__(self, start_id: int, **kwargs):
        super().__init__(**kwargs)
        self.start_id = int(start_id)

    def call(self, token_ids, padding_mask):
        ids, mask = ops.cast(token_ids, "int32"), ops.cast(padding_mask, "int32")
        rows = ops.shape(ids)[0]
        ids = ops.concatenate([ops.full((rows, 1), self.start_id, "int32"), ids[:, :-1]], 1)
        mask = ops.concatenate([ops.ones((rows, 1), "int32"), mask[:, :-1]], 1)
        return ids, mask

    def compute_output_spec(self, token_ids, padding_mask):
        return (keras.KerasTensor(token_ids.shape, dtype="int32"),
                keras.KerasTensor(token_ids.shape, dtype="int32"))

    def get_config(self):
        return {**super().get_config(), "start_id": self.start_id}


def glue_model(encoder, task, tokenizer, options: dict) -> keras.Model:
    """`BartForSequenceClassification`'s model on a `BartSeq2SeqLM` (its layers, shared):
    the input to the encoder and, shifted right, to the decoder; the head
    (`BartClassificationHead`: dense + tanh, out_proj) on the decoder's state at each
    row's final `</s>` (its last real position). The output layer is not used."""
    c = encoder.config
    inputs, decoded = _decoder_states(encoder)
    mask = inputs["padding_mask"]
    head = TanhClassifierHead(1 if task.is_regression else task.num_labels, c.hidden_size,
                              c.classifier_dropout, c.initializer_range, name="classifier")
    out = head(last_token_state(decoded, mask))  # the final </s>
    return classifier_model(inputs, out, task.is_regression, "bart")


def _decoder_states(lm):
    """(inputs, the decoder's top states [B, T, H]) of BART read as `BartModel` reads
    one text: the text to the encoder and, shifted right behind the decoder start, to
    the decoder; the state at t is the representation of input token t (the alignment
    of `BartForQuestionAnswering` and of the BART paper's token classification)."""
    c = lm.config
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
              for name in ("token_ids", "padding_mask")}
    ids, mask = inputs["token_ids"], inputs["padding_mask"]
    encoded = lm.encoder(lm.embed_source(ids, mask), mask)
    decoder_ids, decoder_mask = DecoderInputs(c.decoder_start_token_id,
                                              name="decoder_inputs")(ids, mask)
    return inputs, lm.decoder(lm.token_embedding(decoder_ids), decoder_mask, encoded, mask)


def ner_model(encoder, labels, options: dict) -> keras.Model:
    """The BART paper's token classification (section 3.2): each input token's label
    from a dense layer on the decoder's top state at its position (`_decoder_states`);
    {"logits": [B, T, labels]}. Fine-tuned with the whole model (the NER command's
    `--mode finetune`; `options["dropout"]`, default the config's)."""
    from kbert.layers.initializers import truncated_normal

    lm, c = encoder, encoder.config
    num_labels = labels if isinstance(labels, int) else len(labels)
    inputs, decoded = _decoder_states(lm)
    rate = options.get("dropout")
    x = keras.layers.Dropout(c.dropout if rate is None else rate, name="dropout")(decoded)
    logits = keras.layers.Dense(num_labels, kernel_initializer=truncated_normal(
        c.initializer_range), dtype="float32", name="logits")(x)
    return keras.Model(inputs, {"logits": logits}, name="bart_ner_finetune")


def squad_model(encoder, init_from: str | None = None) -> keras.Model:
    """`BartForQuestionAnswering`'s model on a `BartSeq2SeqLM` (its layers, shared): the
    input to the encoder and, shifted right, to the decoder; start and end logits from
    one dense layer (`qa_outputs`) on the decoder's top states. Where `init_from` is a
    `BartForQuestionAnswering` folder, its `qa_outputs` weights are loaded."""
    from kbert.layers.heads import SpanHead
    from kbert.models.bart.checkpoints import read_head

    inputs, decoded = _decoder_states(encoder)
    head = SpanHead(encoder.config.initializer_range, name="qa_outputs")
    start, end = head(decoded)
    outputs = {"start_logits": keras.layers.Identity(name="start_logits")(start),
               "end_logits": keras.layers.Identity(name="end_logits")(end)}
    model = keras.Model(inputs, outputs, name="bart_squad")
    found = read_head(init_from, "qa_outputs.")
    if found is not None:
        head.dense.kernel.assign(found["weight"].T)
        head.dense.bias.assign(found["bias"])
    return model


# The family, registered by the registry when it loads the package (`family_packages`).
FAMILY = Family("bart", BartConfig, BartSeq2SeqLM, BartTokenizer,
                language_model_class=BartSeq2SeqLM,
                description="bart is an encoder-decoder (denoising)",
                folder_hint="Hugging Face's facebook/bart-base, facebook/bart-large(-cnn, "
                            "-xsum)")

# The hooks this family defines (`kbert.models.registry.HOOK_NAMES`).
HOOKS = ("glue_model", "squad_model", "ner_model", "pretrain")
