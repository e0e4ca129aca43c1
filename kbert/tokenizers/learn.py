"""Vocabularies learned from the user's text, for training a family from scratch
(`python -m kbert.tasks.pretrain --model NAME --from_scratch` with no `--init_from`):

- byte-level BPE (GPT-2, RoBERTa, BART) with Hugging Face's `tokenizers` trainer
  (`ByteLevelBPETokenizer`, the trainer RoBERTa and BART vocabularies are made with
  outside fairseq), the family's special tokens first;
- a SentencePiece unigram model (T5) with Google's `sentencepiece` trainer and T5's
  special ids (<pad> 0, </s> 1, <unk> 2, no <s>); the tokenizer adds the 100 sentinels;
- WordPiece (BERT) is `kbert.tokenizers.vocab.build_vocab`.

Both trainers are dependencies of kbert, imported only here. The results are in-memory
(a vocabulary and merges, a model's bytes): the family's `save_pretrained` writes them
with the model, atomically."""

from __future__ import annotations

from typing import Iterable


def _check_size(vocab_size: int, least: int, what: str) -> None:
    if vocab_size < least:
        raise ValueError(f"--vocab_size {vocab_size}: a {what} needs at least {least} "
                         "entries")


def learn_byte_bpe(texts: Iterable[str], vocab_size: int, special_tokens=(),
                   min_frequency: int = 2) -> tuple[dict, list[tuple[str, str]]]:
    """(vocabulary {token: id}, merges [(a, b)]) of a byte-level BPE of at most
    `vocab_size` entries learned from `texts`: the `special_tokens` take the first ids,
    the 256 byte symbols follow, then one token per merge (pairs seen at least
    `min_frequency` times)."""
    from tokenizers import ByteLevelBPETokenizer

    _check_size(vocab_size, 256 + len(special_tokens), "byte-level BPE (its specials and "
                "the 256 bytes)")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator((t for t in texts if t.strip()), vocab_size=vocab_size,
                            min_frequency=min_frequency, special_tokens=list(special_tokens),
                            show_progress=False)
    model = bpe.to_str()
    import json

    saved = json.loads(model)["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
              for m in saved["merges"]]
    return dict(saved["vocab"]), merges


def learn_sentencepiece(texts: Iterable[str], vocab_size: int) -> bytes:
    """A SentencePiece unigram model of `vocab_size` pieces learned from `texts`, with
    T5's special ids, as the bytes of a `spiece.model`."""
    import io

    import sentencepiece

    _check_size(vocab_size, 4, "SentencePiece model")
    lines = [t for t in texts if t.strip()]
    if not lines:
        raise ValueError("--text_file: no text to learn a vocabulary from")
    out = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=out, vocab_size=vocab_size,
            pad_id=0, eos_id=1, unk_id=2, bos_id=-1, model_type="unigram",
            character_coverage=1.0, minloglevel=2)
    except RuntimeError as e:  # "Vocabulary size is too high (800). Should be <= 612."
        reason = str(e).strip().splitlines()[-1].rsplit("] ", 1)[-1]
        raise ValueError(f"--vocab_size {vocab_size}: sentencepiece cannot learn it from "
                         f"this text ({reason})") from None
    return out.getvalue()
