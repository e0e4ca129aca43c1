"""ELMo's pretraining recipe (the registry's `pretrain` hook of "elmo"):
`ELMoLanguageModel`, the two directions' LMs of bilm-tf, on text, with a word vocabulary
built from the text."""

from __future__ import annotations

import numpy as np

from kbert.models.pretraining import PretrainRecipe, PretrainRun


class ELMoPretraining(PretrainRecipe):
    help = "elmo: the two directions' LMs (bilm-tf)"

    def default_preset(self, bundled: bool) -> str:
        return "small"

    def build(self, args, runtime, texts, optimizer) -> PretrainRun:
        from kbert.models.elmo import ELMo, ELMoConfig
        from kbert.models.elmo.lm import ELMoLanguageModel, WordVocabulary, bilm_dataset
        from kbert.tokenizers.elmo import ELMoCharTokenizer

        lines = [t for t in texts() if t.strip()]
        vocab = WordVocabulary.build(lines, max_size=args.vocab_size)
        elmo = ELMo.from_pretrained(args.init_from) if args.init_from else None
        config = elmo.config if elmo else ELMoConfig.preset(args.preset)
        tokenizer = ELMoCharTokenizer(config.max_characters_per_token)
        data = bilm_dataset(lines, tokenizer, vocab, args.train_batch_size,
                            args.max_seq_length, seed=args.seed, repeat=True)

        def make():
            bilm = ELMo.from_pretrained(args.init_from) if args.init_from else ELMo(config)
            lm = ELMoLanguageModel(bilm, vocab.size, vocab.bos_id, vocab.eos_id,
                                   num_sampled=args.num_sampled)
            return self.built(lm, tokenizer(["a"]))

        model = runtime.build(make, optimizer, None)
        return PretrainRun(model, data, len(lines),
                           float(np.mean([len(t.split()) for t in lines])),
                           lambda folder: model.save_pretrained(folder))


pretrain = ELMoPretraining()
