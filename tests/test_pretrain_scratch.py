"""#50: every family trains from scratch with no folder: `python -m kbert.tasks.pretrain
--model NAME --from_scratch` learns the vocabulary from the text (byte-level BPE for GPT-2,
RoBERTa and BART with `tokenizers`' trainer; a SentencePiece model for T5 with Google's
trainer), saves it with the model, and the model learns. The saved tokenizer, read back
by kbert, tokenizes the text as the reference trainer's own tokenizer does."""

from __future__ import annotations

import json
import math

import pytest

import kbert
from kbert.tasks.pretrain import __main__ as cli
from kbert.tasks.pretrain.corpus import write_corpus

pytestmark = pytest.mark.e2e

VOCAB = 400
STEPS = ["--num_train_steps", "60", "--num_warmup_steps", "6", "--learning_rate", "3e-3",
         "--steps_per_loop", "30", "--train_batch_size", "16", "--max_seq_length", "64"]
SPECIALS = {"gpt": ["<|endoftext|>"], "roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
            "bart": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]}
MODELS = {"gpt": kbert.GPTLanguageModel, "roberta": kbert.RobertaMaskedLM,
          "bart": kbert.BartSeq2SeqLM, "t5": kbert.T5Seq2SeqLM}
TOKENIZERS = {"gpt": kbert.GPTTokenizer, "roberta": kbert.RobertaTokenizer,
              "bart": kbert.BartTokenizer, "t5": kbert.T5Tokenizer}


def _lines(path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def _reference_ids(family, corpus, lines):
    """Each line's ids by the reference trainer's own tokenizer, trained on `corpus` with
    the settings kbert documents."""
    if family == "t5":
        import io

        import sentencepiece

        model = io.BytesIO()
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(_lines(corpus)), model_writer=model, vocab_size=VOCAB,
            pad_id=0, eos_id=1, unk_id=2, bos_id=-1, model_type="unigram",
            character_coverage=1.0, minloglevel=2)
        processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
        return [processor.encode(line) for line in lines]
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_lines(corpus), vocab_size=VOCAB, min_frequency=2,
                            special_tokens=SPECIALS[family], show_progress=False)
    return [bpe.encode(line).ids for line in lines]


@pytest.mark.parity
@pytest.mark.parametrize("family", ["gpt", "roberta", "bart", "t5"])
def test_from_scratch_without_a_folder_learns_its_vocabulary_and_the_text(family, tmp_path):
    out = tmp_path / "out"
    assert cli.main(["--model", family, "--from_scratch", "--vocab_size", str(VOCAB),
                     "--corpus_paragraphs", "300", "--output_dir", str(out), *STEPS]) == 0
    MODELS[family].from_pretrained(out / "model")  # the folder loads as its family's
    tokenizer = TOKENIZERS[family].from_pretrained(out / "model")
    sentinels = 100 if family == "t5" else 0
    assert tokenizer.vocab_size == VOCAB + sentinels
    # The model learned: its masked/causal/denoising loss well below a uniform guess.
    results = json.loads((out / "train_results.json").read_text())
    assert results["loss"] < 0.85 * math.log(VOCAB + sentinels), results
    # kbert's tokenizer of the saved vocabulary = the reference trainer's tokenizer.
    corpus = out / "corpus.txt"
    lines = _lines(corpus)[:50] + ["Zürich has 3 new cafés.", "an unseen wordpiece"]
    want = _reference_ids(family, corpus, lines)
    got = tokenizer.tokenize(lines).to_list()
    assert got == want


def test_help_and_refusals_name_every_family(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "gpt, roberta, t5, bart: new weights" in text, text
    assert "SentencePiece pieces (t5" in text
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--model", "t5", "--text_file", "x.txt"])
    assert exit_.value.code == 2
    assert ("--model t5 needs --init_from a t5 folder, or --from_scratch (a vocabulary "
            "learned from the text)") in capsys.readouterr().err
