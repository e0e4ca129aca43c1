"""RoBERTa's pretraining recipe (the registry's `pretrain` hook of "roberta"), as the
paper trains it (Liu et al., 2019, sections 4.1-4.2): the masked LM alone (no next
sentence), masks drawn anew for every batch (dynamic masking: 15% of the tokens, 80%
`<mask>`, 10% a random token, 10% unchanged), on FULL-SENTENCES inputs: the text's
sentences packed one after another into blocks of `max_seq_length - 2` tokens, across
document ends (a blank line), which get an extra `</s>`, each block `<s> ... </s>`.

`--init_from` a RoBERTa folder gives the tokenizer and, unless `--from_scratch`, the
weights (kbert does not learn a byte-level BPE vocabulary)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from kbert import training
from kbert.models.pretraining import PretrainRecipe, PretrainRun


def full_sentences(lines: list[str], tokenizer, seq_length: int) -> dict:
    """int32 arrays [N, seq_length] `token_ids`, `padding_mask`: the lines' tokens packed
    into blocks of `seq_length - 2` (see the module docstring); the last block is
    shorter, padded with `<pad>`."""
    width = seq_length - 2
    stream: list[int] = []
    texts = [line for line in lines]
    ids = tokenizer.tokenize(texts).to_list() if texts else []
    for line, row in zip(texts, ids):
        if not line.strip():
            if stream and stream[-1] != tokenizer.sep_id:
                stream.append(tokenizer.sep_id)  # a document ends
            continue
        stream.extend(row)
    blocks = [stream[i:i + width] for i in range(0, len(stream), width)]
    token_ids = np.full((len(blocks), seq_length), tokenizer.pad_id, np.int32)
    mask = np.zeros((len(blocks), seq_length), np.int32)
    for k, block in enumerate(blocks):
        row = [tokenizer.cls_id, *block, tokenizer.sep_id]
        token_ids[k, :len(row)] = row
        mask[k, :len(row)] = 1
    return {"token_ids": token_ids, "padding_mask": mask}


def _split(features):
    inputs = {k: features[k] for k in ("token_ids", "padding_mask", "masked_lm_positions")}
    return inputs, {k: features[k] for k in ("masked_lm_ids", "masked_lm_weights")}


class RobertaPretraining(PretrainRecipe):
    needs_folder = True
    specials = 2
    help = ("roberta: masked LM only, dynamic masking, full sentences (--init_from a "
            "RoBERTa folder, or --from_scratch)")

    def build(self, args, runtime, texts, optimizer) -> PretrainRun:
        from kbert.models.roberta.encoder import RobertaEncoder, RobertaMaskedLM
        from kbert.tokenizers.masking import DynamicMasking
        from kbert.tokenizers.roberta import RobertaTokenizer

        config = None
        if args.init_from:
            tokenizer = RobertaTokenizer.from_pretrained(args.init_from)
        else:  # --from_scratch: a byte-level BPE learned from the text, fairseq's specials
            from kbert.models.pretraining import scratch_config
            from kbert.models.roberta.config import RobertaConfig
            from kbert.tokenizers.learn import learn_byte_bpe
            from kbert.tokenizers.roberta import SPECIAL_TOKENS

            lines = texts()
            vocab, merges = learn_byte_bpe(lines, args.vocab_size, SPECIAL_TOKENS)
            # RoBERTa's positions start after the padding id: 2 more than the tokens
            config = scratch_config(RobertaConfig, args.preset, dict(
                hidden_size=64, intermediate_size=256,
                max_position_embeddings=args.max_seq_length + 2), vocab_size=len(vocab))
            tokenizer = RobertaTokenizer(vocab, merges,
                                         seq_length=config.max_position_embeddings - 2)
            texts = lambda: lines  # noqa: E731 (read once)
        arrays = full_sentences(texts(), tokenizer, args.max_seq_length)
        if not len(arrays["token_ids"]):
            raise ValueError("--text_file: no text")
        masking = DynamicMasking.for_tokenizer(tokenizer, args.max_predictions_per_seq,
                                               args.masked_lm_prob, seed=args.seed)
        data = training.finalize_dataset(tf.data.Dataset.from_tensor_slices(arrays),
                                         args.train_batch_size, training=True,
                                         seed=args.seed)

        def make():
            if config is not None:  # from scratch, no folder
                encoder = RobertaEncoder(config)
                encoder.set_pooler_trainable(False)
                return self.built(RobertaMaskedLM(encoder), {
                    "token_ids": tf.zeros([1, 4], tf.int32),
                    "padding_mask": tf.ones([1, 4], tf.int32),
                    "masked_lm_positions": tf.zeros([1, 1], tf.int32)})
            try:
                model = RobertaMaskedLM.from_pretrained(args.init_from)
            except ValueError as e:
                if "no masked-LM head" not in str(e):
                    raise
                encoder = RobertaEncoder.from_pretrained(args.init_from)
                encoder.set_pooler_trainable(False)  # the masked LM never reads it
                model = RobertaMaskedLM(encoder)
            if args.from_scratch:
                encoder = RobertaEncoder(model.encoder.config)
                encoder.set_pooler_trainable(False)
                model = RobertaMaskedLM(encoder)
            return self.built(model, {"token_ids": tf.zeros([1, 4], tf.int32),
                                      "padding_mask": tf.ones([1, 4], tf.int32),
                                      "masked_lm_positions": tf.zeros([1, 1], tf.int32)})

        model = runtime.build(make, optimizer, None)
        return PretrainRun(model, data.map(masking).map(_split), len(arrays["token_ids"]),
                           float(arrays["padding_mask"].sum(1).mean()),
                           lambda folder: model.save_pretrained(folder, tokenizer=tokenizer))


pretrain = RobertaPretraining()
