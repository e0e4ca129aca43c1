"""GPT's pretraining recipe (the registry's `pretrain` hook of "gpt"): `GPTLanguageModel`
as a causal LM on text; `--init_from` a GPT folder gives the tokenizer and, unless
`--from_scratch`, the weights."""

from __future__ import annotations

from kbert.models.pretraining import PretrainRecipe, PretrainRun


class GPTPretraining(PretrainRecipe):
    needs_folder = True
    help = "gpt: causal LM (needs --init_from a GPT folder: its tokenizer)"

    def build(self, args, runtime, texts, optimizer) -> PretrainRun:
        from kbert.models.gpt import GPTLanguageModel
        from kbert.models.gpt.lm import Perplexity, lm_dataset, lm_loss

        source = GPTLanguageModel.from_pretrained(args.init_from)
        tokenizer = source.tokenizer
        lines = [t for t in texts() if t.strip()]
        data = lm_dataset(lines, tokenizer, args.max_seq_length, args.train_batch_size)
        examples = sum(1 for _ in lm_dataset(lines, tokenizer, args.max_seq_length, 1))
        if examples == 0:
            raise ValueError(f"--text_file: fewer than {args.max_seq_length + 1} tokens")

        def make():
            if args.from_scratch:
                return GPTLanguageModel(source.config)
            return GPTLanguageModel.from_pretrained(args.init_from)

        model = runtime.build(make, optimizer, {"logits": lm_loss()},
                              {"logits": [Perplexity()]})
        return PretrainRun(model, data.repeat(), examples, float(args.max_seq_length),
                           lambda folder: model.decoder.save_pretrained(folder,
                                                                        tokenizer=tokenizer))


pretrain = GPTPretraining()
