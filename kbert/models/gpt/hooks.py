"""GPT's task hooks (the registry reaches them by name): GLUE fine-tuning as the GPT
paper does it (Radford et al., 2018, section 3.3).

The tokenizer packs each example with the start, delimiter and extract tokens
(`GPTTokenizer.for_task`); a linear layer reads the decoder's final state at the
extract token (the last real token); for similarity tasks the two orders of the pair are
decoded apart and their final states summed before the linear layer. An auxiliary
language-model loss on the same inputs, weighted 0.5 (the paper's lambda), is added to
the task loss during training.
"""

from __future__ import annotations

import keras
from keras import ops

from kbert.layers.heads import ClassifierHead, classifier_model, last_token_state
from kbert.models.gpt.config import GPTConfig
from kbert.models.gpt.decoder import GPTDecoder, GPTLanguageModel
from kbert.models.registry import Family, recognizes_model_type
from kbert.tokenizers.gpt import GPTTokenizer

LM_WEIGHT = 0.5  # lambda of the paper's L3 = L2 + lambda * L1


@keras.saving.register_keras_serializable(package="kbert")
class AuxiliaryLMLoss(keras.layers.Layer):
    """Adds `weight` x the mean next-token cross-entropy over real tokens of the given
    sequences to the model's losses, when training (nothing at inference: the
    vocabulary-sized logits are not computed then). Returns its first input unchanged.

    Call args:
        sequence_output: float [B, T, H], the decoder's top layer.
        token_ids, padding_mask: int [B, T].
    """

    def __init__(self, weight: float = LM_WEIGHT, **kwargs):
        super().__init__(**kwargs)
        self.weight = float(weight)
        self.token_embedding = None  # link_auxiliary_losses sets it (shared, not owned)

    def call(self, sequence_output, token_ids, padding_mask, training=None):
        if training and self.weight and self.token_embedding is None:
            raise ValueError(
                f"{self.name}: not linked to the decoder's token embedding (a model loaded "
                "from a .keras file): call kbert.models.gpt.hooks.link_auxiliary_losses(model)"
                " before training it")
        if training and self.weight:
            logits = self.token_embedding.logits(sequence_output[:, :-1])  # (B, T-1, V)
            labels = ops.cast(token_ids[:, 1:], "int32")
            real = ops.cast(padding_mask[:, 1:], "float32") * ops.cast(
                padding_mask[:, :-1], "float32")
            nll = keras.losses.sparse_categorical_crossentropy(labels, logits,
                                                               from_logits=True)
            mean = ops.sum(nll * real) / ops.maximum(ops.sum(real), 1.0)
            self.add_loss(self.weight * mean)
        return sequence_output

    def compute_output_spec(self, sequence_output, token_ids, padding_mask, training=None):
        return keras.KerasTensor(sequence_output.shape, dtype=sequence_output.dtype)

    def get_config(self):
        return {**super().get_config(), "weight": self.weight}


def build_gpt_classifier(decoder, num_labels: int, regression: bool = False,
                         similarity: bool = False, lm_weight: float = LM_WEIGHT
                         ) -> keras.Model:
    """GPT inputs (`token_ids`, `padding_mask`; with `similarity`, also `token_ids_b`,
    `padding_mask_b`) -> {"logits": [B, num_labels]}, or {"score": [B]}."""
    names = ["token_ids", "padding_mask"] + (["token_ids_b", "padding_mask_b"]
                                             if similarity else [])
    inputs = {n: keras.Input(shape=(None,), dtype="int32", name=n) for n in names}
    orders = [("token_ids", "padding_mask")] + ([("token_ids_b", "padding_mask_b")]
                                                if similarity else [])
    auxiliary = AuxiliaryLMLoss(lm_weight, name="auxiliary_lm_loss")
    auxiliary.token_embedding = decoder.token_embedding
    states = []
    for ids, mask in orders:
        sequence = decoder({"token_ids": inputs[ids], "padding_mask": inputs[mask]})[
            "sequence_output"]
        sequence = auxiliary(sequence, inputs[ids], inputs[mask])
        states.append(last_token_state(sequence, inputs[mask]))  # the extract token
    state = states[0] if len(states) == 1 else keras.layers.Add(name="sum_of_orders")(states)
    head = ClassifierHead(1 if regression else num_labels, decoder.dropout_rate,
                          decoder.initializer_range, name="classifier")
    out = head(state)
    return classifier_model(inputs, out, regression, "gpt")


def link_auxiliary_losses(model: keras.Model) -> keras.Model:
    """Points every `AuxiliaryLMLoss` of `model` at the token embedding of the model's
    GPT decoder (the tied output layer the auxiliary loss computes logits with).

    `build_gpt_classifier` links its layer; the link is not part of a layer's config, so
    a classifier loaded from a `.keras` file needs it again before training
    (`kbert.export.folder.load_task_folder` does it). Returns `model`."""
    from kbert.models.gpt.decoder import GPTDecoder

    losses = [layer for layer in model.layers if isinstance(layer, AuxiliaryLMLoss)]
    if not losses:
        return model
    decoders = [layer for layer in model.layers if isinstance(layer, GPTDecoder)]
    if len(decoders) != 1:
        raise ValueError(f"{model.name}: an auxiliary LM loss needs exactly one GPTDecoder "
                         f"in the model, found {len(decoders)}")
    for layer in losses:
        # Past Keras' attribute tracking: the layer is built, and the embedding stays the
        # decoder's (not a sublayer of the loss, as in a freshly loaded model).
        object.__setattr__(layer, "token_embedding", decoders[0].token_embedding)
    return model


# ------------------------------------------------------------------ registry hooks
def glue_tokenizer(tokenizer, task):
    """The paper's input transformations: the task tokens, and the similarity format
    for MRPC, QQP and STS-B (`TaskTokens.for_task`)."""
    return tokenizer.for_task(task)


def glue_model(encoder, task, tokenizer, options: dict) -> keras.Model:
    """The decoder's token table grown to the tokenizer's task tokens, the head on the
    extract token's state (both orders summed for similarity tasks), and the auxiliary
    LM loss weighted `options["lm_coef"]` (default `LM_WEIGHT`)."""
    similarity = (task.is_pair and tokenizer is not None
                  and getattr(tokenizer, "pair_format", "") == "similarity")
    if tokenizer is not None:
        encoder = encoder.with_vocab_size(tokenizer.vocab_size)
    lm_coef = options.get("lm_coef")
    return build_gpt_classifier(encoder, task.num_labels, regression=task.is_regression,
                                similarity=similarity,
                                lm_weight=LM_WEIGHT if lm_coef is None else lm_coef)


def after_load(model: keras.Model) -> keras.Model:
    """A task folder's model, loaded: its auxiliary LM loss linked again."""
    return link_auxiliary_losses(model)


from kbert.models.gpt.pretraining import pretrain  # noqa: E402,F401 (the pretrain hook)


# The family, registered by the registry when it loads the package (`family_packages`).
FAMILY = Family("gpt", GPTConfig, GPTDecoder, GPTTokenizer,
                recognizes=recognizes_model_type("gpt2", "openai-gpt", files=("hparams.json",)),
                language_model_class=GPTLanguageModel,
                description="gpt fine-tunes as the GPT paper and needs --init_from a GPT "
                            "folder",
                folder_hint="Hugging Face's gpt2 or openai-gpt, or OpenAI's GPT-2 release")


# The hooks this family defines (`kbert.models.registry.HOOK_NAMES`).
HOOKS = ("glue_tokenizer", "glue_model", "after_load", "pretrain")
