"""GPT's pretraining recipe (the registry's `pretrain` hook of "gpt"): `GPTLanguageModel`
as a causal LM on text; `--init_from` a GPT folder gives the tokenizer and, unless
`--from_scratch`, the weights; `--from_scratch` alone learns a byte-level BPE from the
text (`--vocab_size`) for a model of `--preset` (demo: 2 layers, 64 wide)."""

from __future__ import annotations

from kbert.models.pretraining import PretrainRecipe, PretrainRun


class GPTPretraining(PretrainRecipe):
    needs_folder = True
    help = "gpt: causal LM (--init_from a GPT folder, or --from_scratch)"

    def build(self, args, runtime, texts, optimizer) -> PretrainRun:
        from kbert.models.gpt import GPTLanguageModel
        from kbert.models.gpt.lm import Perplexity, lm_dataset, lm_loss

        lines = [t for t in texts() if t.strip()]

        def scratch():  # GPT-2's byte-level BPE learned from the text
            from kbert.models.gpt import GPTConfig
            from kbert.models.pretraining import scratch_config
            from kbert.tokenizers.gpt import END_TOKEN, GPTTokenizer
            from kbert.tokenizers.learn import learn_byte_bpe

            vocab, merges = learn_byte_bpe(lines, args.vocab_size, [END_TOKEN])
            positions = max(args.max_seq_length, 64)
            config = scratch_config(GPTConfig, args.preset, dict(
                hidden_size=64, intermediate_size=256, max_position_embeddings=positions),
                vocab_size=len(vocab), end_token_id=vocab[END_TOKEN])
            return GPTTokenizer(vocab, merges, seq_length=config.max_position_embeddings), config

        tokenizer, config = self.tokenizer_and_config(args, GPTLanguageModel, scratch)
        data = lm_dataset(lines, tokenizer, args.max_seq_length, args.train_batch_size)
        examples = sum(1 for _ in lm_dataset(lines, tokenizer, args.max_seq_length, 1))
        if examples == 0:
            raise ValueError(f"--text_file: fewer than {args.max_seq_length + 1} tokens")

        def make():
            if args.from_scratch:
                return GPTLanguageModel(config)
            return GPTLanguageModel.from_pretrained(args.init_from)

        model = runtime.build(make, optimizer, {"logits": lm_loss()},
                              {"logits": [Perplexity()]})
        return PretrainRun(model, data.repeat(), examples, float(args.max_seq_length),
                           lambda folder: model.decoder.save_pretrained(folder,
                                                                        tokenizer=tokenizer))


pretrain = GPTPretraining()
