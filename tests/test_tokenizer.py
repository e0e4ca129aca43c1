"""BertTokenizer: golden cases, parity with the reference tokenizers, packing, offsets."""

import json
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from kbert import BertTokenizer, build_vocab

# A varied corpus: accents, CJK, full-width text, ligatures, emoji, control and
# zero-width characters, very long words, empty and whitespace-only strings.
CORPUS = [
    "UNwant\u00e9d,running",
    "Héllo wörld! Ça va? naïve café, résumé; Dvořák & Łódź — São Paulo",
    "e\u0301 cafe\u0301 combining accents, decomposed",
    "北京欢迎你，こんにちは世界。한국어 텍스트도 있어요",
    "中文标点：“引号”《书名》【括号】、顿号……",
    "ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ１２３ ｈｅｌｌｏ！",
    "ﬁnance ﬂow ﬀ Ⅻ ① ㎏ ™ ½",
    "emoji 😀👍🏽 test 👨‍👩‍👧 flags 🇫🇷 and ❤️",
    "zero\u200bwidth\u200djoin\ufeffbom soft\u00adhyphen\u2060wj",
    "ctrl\x00\x07\x1f chars\ttab\nnew\rline\x0bvt\x0cff\x85nel",
    "para\u2028sep\u2029graph nbsp\u00a0here\u3000ideo\u2009thin",
    "a" * 100 + " " + "b" * 101 + " " + "é" * 100 + " " + "é" * 101,
    "x" * 60 + "，" + "y" * 60,
    "",
    "   ",
    "\t\n ",
    "\u200b",
    "Σίσυφος ἄνθρωπος ὁδός",
    "a≠b x<\u0338y ≯",
    "İstanbul ǅemal ß ẞ ﬃ",
    "Привет, мир! Ёлка",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "ภาษาไทย",
    "$100.00 (approx.) #hashtag @user http://example.com/a_b?c=d&e=f",
    "don't won't it's O'Neill's 'quoted' \"double\"",
    "private\ue000use \U000f0000 tags\U000e0041",
    "Mathematical 𝐁𝐨𝐥𝐝 𝔉𝔯𝔞𝔨𝔱𝔲𝔯",
    "The quick brown fox jumps over the lazy dog. " * 20,
]

# Words of 150 and 250 characters: Google's limit is 200 (Hugging Face's 100).
LONG_WORDS = ["a" * 150 + " " + "é" * 150 + " " + "b" * 200 + " " + "c" * 201,
              "x" * 250 + " ok " + "世" * 3 + "y" * 180]
# Unassigned (Cn) and private-use (Co) code points: Google keeps them (as parts of
# words); Hugging Face's ports delete some or all of them.
UNASSIGNED = ["unassigned \u0378 \U0001fbff here", "x\u0378y \ufdd0 \uffff end"]
PRIVATE_USE = ["private\ue000use \U000f0000 a\U0010fffdb"]
FINAL_SIGMA = ["ΟΔΟΣ ΣΟΦΟΣ"]

# Where Hugging Face's tokenizers (transformers 5.x) depart from Google's
# tokenization.py; each departure is asserted below by running all three:
# - Python `BertTokenizer` (the legacy port) deletes unassigned (Cn) code points; the
#   Rust one keeps them, as Google does.
# - Both delete private-use (Co) code points; Google keeps them.
# - Both turn words of more than 100 characters into [UNK]; Google's limit is 200.
# - Rust only: Greek capital sigma at a word end lower-cases to "σ" (character by
#   character); Python's str.lower(), which Google's code calls, gives the final "ς".
# - Python only, cased: it NFC-composes the text first ("<" + U+0338 -> "≮").


def _hugging_face_departs(text: str) -> bool:
    """Whether a documented departure of Hugging Face's ports applies to `text`:
    unassigned or private-use code points, or a word of over 100 characters."""
    if any(unicodedata.category(c) in ("Cn", "Co") for c in text):
        return True
    return any(len(w) > 100 for w in text.split())


def _random_texts(seed=7, n=300, exotic=True):
    """Random strings drawn from many scripts and character classes; with `exotic`,
    unassigned and private-use code points too."""
    rng = np.random.default_rng(seed)
    pools = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x300, 0x370), range(0x370, 0x400),
             range(0x400, 0x530), range(0x590, 0x700), range(0x900, 0x980),
             range(0x2000, 0x2070), range(0x3000, 0x3100), range(0x4E00, 0x4F00),
             range(0xAC00, 0xAD00), range(0xFF00, 0xFFF0), range(0x1F300, 0x1F700),
             range(0x0, 0x20), range(0xFB00, 0xFB50), range(0x1D400, 0x1D500)]
    if exotic:
        pools += [range(0xE000, 0xE100), range(0x0378, 0x0380), range(0xFDD0, 0xFDF0)]
    texts = []
    for _ in range(n):
        chars = []
        for _ in range(rng.integers(0, 40)):
            pool = pools[rng.integers(len(pools))]
            chars.append(chr(int(rng.choice(pool))))
            if rng.random() < 0.2:
                chars.append(" ")
        texts.append("".join(chars))
    return texts


@pytest.fixture(scope="module")
def google_uncased(minilm_dir):
    from tests.references import google_tokenization

    return google_tokenization().FullTokenizer(f"{minilm_dir}/vocab.txt", do_lower_case=True)


@pytest.fixture(scope="module")
def google_cased(minilm_dir):
    from tests.references import google_tokenization

    return google_tokenization().FullTokenizer(f"{minilm_dir}/vocab.txt", do_lower_case=False)


@pytest.fixture(scope="module")
def minilm_kbert(minilm_dir):
    """kbert's tokenizer of the real MiniLM vocabulary (no reference imported)."""
    return BertTokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def minilm_tokenizers(minilm_dir):
    import transformers
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    return (BertTokenizer.from_pretrained(minilm_dir),
            transformers.BertTokenizer.from_pretrained(minilm_dir),
            BertTokenizerLegacy.from_pretrained(minilm_dir))


def _cased(vocab_dir):
    import transformers
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    return (BertTokenizer.from_pretrained(vocab_dir, lowercase=False),
            transformers.BertTokenizer.from_pretrained(vocab_dir, do_lower_case=False),
            BertTokenizerLegacy.from_pretrained(vocab_dir, do_lower_case=False))


def _assert_equal_google(ours, google, texts):
    from tests.references import google_ids

    got = ours.tokenize(texts).to_list()
    bad = [t for t, ids in zip(texts, got) if ids != google_ids(google, t)]
    assert not bad, f"{len(bad)} of {len(texts)} texts differ, e.g. {bad[0]!r}"


@pytest.mark.parity
def test_ids_equal_google_uncased(minilm_tokenizers, google_uncased):
    """Google's tokenization.py itself, on 100% of the corpus and 300 random strings."""
    texts = CORPUS + LONG_WORDS + UNASSIGNED + PRIVATE_USE + FINAL_SIGMA + _random_texts()
    _assert_equal_google(minilm_tokenizers[0], google_uncased, texts)


@pytest.mark.parity
def test_ids_equal_google_cased(minilm_dir, google_cased):
    ours = BertTokenizer.from_pretrained(minilm_dir, lowercase=False)
    assert not ours.lowercase and not ours.strip_accents
    texts = CORPUS + LONG_WORDS + UNASSIGNED + PRIVATE_USE + FINAL_SIGMA + _random_texts(seed=8)
    _assert_equal_google(ours, google_cased, texts)


@pytest.mark.parity
def test_ids_equal_hugging_face_away_from_its_departures(minilm_tokenizers, minilm_dir):
    """Hugging Face's Rust and Python tokenizers agree with kbert wherever none of the
    documented departures applies."""
    texts = CORPUS + _random_texts(seed=9, exotic=False)
    texts = [t for t in texts if not _hugging_face_departs(t)]
    assert len(texts) > 150
    ours, hf_fast, hf_python = minilm_tokenizers
    for text, ids in zip(texts, ours.tokenize(texts).to_list()):
        assert ids == hf_fast(text, add_special_tokens=False)["input_ids"], repr(text)
        assert ids == hf_python(text, add_special_tokens=False)["input_ids"], repr(text)
    ours, hf_fast, hf_python = _cased(minilm_dir)
    for text, ids in zip(texts, ours.tokenize(texts).to_list()):
        assert ids == hf_fast(text, add_special_tokens=False)["input_ids"], repr(text)
        if unicodedata.normalize("NFC", text) == text:
            assert ids == hf_python(text, add_special_tokens=False)["input_ids"], repr(text)


@pytest.mark.parity
def test_hugging_face_departures_from_google(minilm_tokenizers, google_uncased, google_cased,
                                             minilm_dir):
    """Each departure in docs/fidelity.md, shown by running Google's and Hugging Face's
    code on the input the table gives."""
    from tests.references import google_ids

    ours, hf_fast, hf_python = minilm_tokenizers

    def hf(tokenizer, text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def row(text):  # (Google, HF Python, HF Rust), and kbert must equal Google
        google = google_ids(google_uncased, text)
        assert ours.tokenize([text]).to_list() == [google], repr(text)
        return google, hf(hf_python, text), hf(hf_fast, text)

    unk = ours.unk_id
    google, python, rust = row("x\u0378y")  # unassigned: Python deletes, Rust keeps
    assert google == [unk] and rust == google
    assert [ours.vocabulary[i] for i in python] == ["x", "##y"]
    google, python, rust = row("a\ue000b")  # private use: both delete
    assert google == [unk] and python == rust == [ours.vocabulary.index("ab")]
    google, python, rust = row("a" * 150)  # limit: Google 200, Hugging Face 100
    assert len(google) > 1 and unk not in google and python == rust == [unk]
    google, python, rust = row("ΟΔΟΣ")  # final sigma: Rust lower-cases per character
    assert python == google and rust != google
    assert "".join(ours.vocabulary[i].removeprefix("##") for i in google).endswith("ς")
    # Cased: the Python port NFC-composes "<" + U+0338 into "≮" first.
    cased, cased_fast, cased_python = _cased(minilm_dir)
    text = "a <\u0338 b"
    google = google_ids(google_cased, text)
    assert cased.tokenize([text]).to_list() == [google]
    assert hf(cased_fast, text) == google and hf(cased_python, text) != google

    # The corpus entries under each departure, and both of kbert's Unicode rules.
    for text, ids in zip(UNASSIGNED + PRIVATE_USE + LONG_WORDS,
                         ours.tokenize(UNASSIGNED + PRIVATE_USE + LONG_WORDS).to_list()):
        assert _hugging_face_departs(text)
        assert ids == google_ids(google_uncased, text), repr(text)
        assert ids != hf(hf_python, text), repr(text)
        if text in UNASSIGNED:  # the Rust tokenizer keeps Cn, as Google does
            assert ids == hf(hf_fast, text), repr(text)
        else:
            assert ids != hf(hf_fast, text), repr(text)
    assert ours.tokenize(["\u0378", "\ue000"]).to_list() == [[unk]] * 2


# Letters of Unicode 14 (Python 3.11's unicodedata) that TensorFlow's ICU, older,
# does not lower-case: U+2C2F, four Latin capitals and Vithkuqi's 35 capitals.
ICU_UPPER = ({0x2C2F, 0xA7C0, 0xA7D0, 0xA7D6, 0xA7D8}
             | set(range(0x10570, 0x10596)) - {0x1057B, 0x1058B, 0x10593})


@pytest.mark.parity
def test_the_letters_python_lower_cases_and_tensorflow_does_not(tmp_path):
    """The one place kbert's uncased ids can differ from Google's tokenization.py on
    Python 3.11: 40 capitals that `str.lower()` maps and TensorFlow's `lower` (ICU)
    keeps. With a vocabulary holding their lower-case forms, Google gives those ids and
    kbert [UNK]; with MiniLM's (which has neither) both give [UNK]."""
    from tests.references import google_ids, google_tokenization

    capitals = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF
                and unicodedata.category(chr(cp)) in ("Lu", "Lt")]
    ours = tf.strings.lower([c.encode() for c in capitals], encoding="utf-8").numpy()
    differ = {ord(c) for c, low in zip(capitals, ours) if low.decode() != c.lower()}
    assert differ == ICU_UPPER and len(differ) == 40
    letters = sorted(ICU_UPPER)[:3]
    words = [chr(cp).lower() for cp in letters]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n",
                     encoding="utf-8")
    google = google_tokenization().FullTokenizer(str(vocab), do_lower_case=True)
    ours = BertTokenizer.from_pretrained(str(tmp_path))
    text = " ".join(chr(cp) for cp in letters)
    assert google_ids(google, text) == [5, 6, 7]
    assert ours.tokenize([text]).to_list() == [[1, 1, 1]]


def test_checked_in_unicode_classes_are_current():
    """The classes in unicode_classes.py are those this Python's unicodedata gives."""
    import unicodedata as ud

    from kbert.tokenizers import unicode_classes, unicode_tables

    assert unicode_classes.UNIDATA_VERSION == ud.unidata_version, (
        "Python's Unicode changed: run `python -m kbert.tokenizers.unicode_tables`")
    fresh = unicode_tables.generate()
    assert unicode_classes.CLASSES == fresh
    assert unicode_tables.render_module(fresh) == open(unicode_classes.__file__).read()


def test_golden_cases(tiny_vocab):
    tok = BertTokenizer(tiny_vocab)
    ids = tok.tokenize(["UNwant\u00e9d,running", "Hello  world!?", "a=b", "a≠b",
                        "北京.", "", "wanted"]).to_list()
    v = tiny_vocab.index
    assert ids[0] == [v("un"), v("##want"), v("##ed"), v(","), v("runn"), v("##ing")]
    assert ids[1] == [v("hello"), v("world"), v("!"), v("?")]
    assert ids[2] == [v("a"), v("="), v("b")]
    assert ids[3] == ids[2]  # NOT EQUAL TO strips to "=" and then splits, as in the reference
    assert ids[4] == [v("北"), v("京"), v(".")]
    assert ids[5] == []
    assert ids[6] == [v("[UNK]")]  # "wa" + "##nted" cannot cover it: whole word is [UNK]


def test_cased_keeps_case_and_accents(tiny_vocab):
    tok = BertTokenizer(tiny_vocab + ["Hello", "é"], lowercase=False)
    v = tok.vocabulary.index
    assert tok.tokenize(["Hello hello é"]).to_list() == [[v("Hello"), v("hello"), v("é")]]
    stripped = BertTokenizer(tiny_vocab + ["e"], lowercase=False, strip_accents=True)
    assert stripped.tokenize(["é"]).to_list() == [[stripped.vocabulary.index("e")]]


def test_word_length_limit_is_in_characters(tiny_vocab):
    vocab = tiny_vocab + ["é", "##é"]
    tok = BertTokenizer(vocab, lowercase=False)
    ids = tok.tokenize(["é" * 200, "é" * 201]).to_list()
    assert ids[0] == [vocab.index("é")] + [vocab.index("##é")] * 199
    assert ids[1] == [vocab.index("[UNK]")]


def test_offsets_index_the_utf8_input(minilm_kbert):
    ours = minilm_kbert
    texts = ["Héllo wörld! running quickly", "北京，東京", "naïve\u200bcafé 😀 ok"]
    ids, starts, ends = ours.tokenize_with_offsets(texts)
    for text, row, s_row, e_row in zip(texts, ids.to_list(), starts.to_list(), ends.to_list()):
        raw = text.encode("utf-8")
        for i, s, e in zip(row, s_row, e_row):
            piece = raw[s:e].decode("utf-8")  # offsets fall on character boundaries
            token = ours.vocabulary[i].removeprefix("##")
            if token != "[UNK]":
                folded = "".join(c for c in unicodedata.normalize("NFD", piece.lower())
                                 if unicodedata.category(c) not in ("Mn", "Cf"))
                assert token in folded, (text, token, piece)
    # Words whose normalization keeps their length get exact sub-word spans.
    ids, starts, ends = ours.tokenize_with_offsets(["kbert tokenizes, Héllo"])
    pieces = [b"kbert tokenizes, H\xc3\xa9llo"[s:e] for s, e in
              zip(starts.to_list()[0], ends.to_list()[0])]
    tokens = [ours.vocabulary[i] for i in ids.to_list()[0]]
    assert len(tokens) > 4  # "kbert" and "tokenizes" split into pieces
    for token, piece in zip(tokens, pieces):
        if piece != "Héllo".encode():  # the accented word spans whole
            assert token.removeprefix("##") == piece.decode()
    assert pieces[-1] == "Héllo".encode()


def _reference_truncate(a, b, budget):
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return len(a), len(b)


def test_pair_truncation_is_longest_first():
    cases = [(a, b, m) for a in range(0, 12) for b in range(0, 12) for m in range(0, 15)]
    la = tf.constant([c[0] for c in cases], tf.int64)
    lb = tf.constant([c[1] for c in cases], tf.int64)
    for m in range(0, 15):
        sel = [i for i, c in enumerate(cases) if c[2] == m]
        ka, kb = BertTokenizer.truncate_pair_lengths(tf.gather(la, sel), tf.gather(lb, sel), m)
        for i, x, y in zip(sel, ka.numpy(), kb.numpy()):
            a, b, _ = cases[i]
            assert (x, y) == _reference_truncate(range(a), range(b), m), cases[i]


@pytest.mark.parity
def test_packing_equals_reference_past_seq_length(minilm_tokenizers):
    ours, hf_fast, hf_python = minilm_tokenizers
    a = ["The quick brown fox jumps over the lazy dog " * k for k in (0, 1, 2, 5)] + ["短い"]
    b = ["héllo wörld, naïve café " * k for k in (3, 0, 2, 1)] + ["x " * 40]
    for seq_length in (5, 16, 33, 64):
        got = ours(a, b, seq_length=seq_length)
        for ref in (hf_fast, hf_python):
            want = ref(a, b, max_length=seq_length, truncation="longest_first", return_token_type_ids=True,
                       padding="max_length")
            np.testing.assert_array_equal(got["token_ids"].numpy(), want["input_ids"])
            np.testing.assert_array_equal(got["segment_ids"].numpy(), want["token_type_ids"])
            np.testing.assert_array_equal(got["padding_mask"].numpy(), want["attention_mask"])
        single = ours(a, seq_length=seq_length)
        want = hf_python(a, max_length=seq_length, truncation=True, padding="max_length")
        np.testing.assert_array_equal(single["token_ids"].numpy(), want["input_ids"])


def test_pack_layout(tiny_vocab):
    tok = BertTokenizer(tiny_vocab, seq_length=9)
    out = tok(["the cat sat"], ["on the mat"])
    v = tiny_vocab.index
    assert out["token_ids"].numpy().tolist() == [[v("[CLS]"), v("the"), v("cat"), v("sat"),
                                                 v("[SEP]"), v("on"), v("the"), v("mat"),
                                                 v("[SEP]")]]
    assert out["segment_ids"].numpy().tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 1]]
    out = tok(["the cat", ""], seq_length=6)
    assert out["token_ids"].numpy().tolist() == [[2, v("the"), v("cat"), 3, 0, 0], [2, 3, 0, 0, 0, 0]]
    assert out["padding_mask"].numpy().tolist() == [[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]]
    assert out["token_ids"].dtype == tf.int32


def test_works_in_tf_data_and_tf_function(tiny_vocab):
    tok = BertTokenizer(tiny_vocab, seq_length=6)
    ds = tf.data.Dataset.from_tensor_slices(["the cat", "hello world!", "北京"]).batch(2)
    assert ds.map(tok).element_spec["token_ids"].shape.as_list() == [None, 6]  # static
    batches = list(ds.map(tok).as_numpy_iterator())
    assert batches[0]["token_ids"].shape == (2, 6) and batches[1]["token_ids"].shape == (1, 6)
    eager = tok(["the cat", "hello world!", "北京"])["token_ids"].numpy()
    np.testing.assert_array_equal(np.concatenate([b["token_ids"] for b in batches]), eager)
    fn = tf.function(lambda t: tok(t)["token_ids"],
                     input_signature=[tf.TensorSpec([None], tf.string)])
    np.testing.assert_array_equal(fn(tf.constant(["the cat", "hello world!", "北京"])).numpy(), eager)


def test_detokenize(tiny_vocab):
    tok = BertTokenizer(tiny_vocab)
    text = ["UNwanted, running", "hello world"]
    assert [t.decode() for t in tok.detokenize(tok.tokenize(text)).numpy()] == \
        ["unwanted , running", "hello world"]
    packed = tok(text, seq_length=8)["token_ids"]
    assert tok.detokenize(packed).numpy().tolist() == [b"unwanted , running", b"hello world"]


def test_special_ids_and_errors(tiny_vocab):
    tok = BertTokenizer(tiny_vocab)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert tok.vocab_size == len(tiny_vocab)
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        BertTokenizer(["[PAD]", "[UNK]", "[SEP]"])
    with pytest.raises(ValueError, match="'cat' appears twice"):
        BertTokenizer(tiny_vocab + ["cat"])
    with pytest.raises(ValueError, match="1-D"):
        tok.tokenize(tf.constant("a scalar"))
    with pytest.raises(ValueError, match="seq_length=2"):
        tok(["a"], ["b"], seq_length=2)


def test_from_pretrained_reads_casing(tmp_path, tiny_vocab):
    tok = BertTokenizer(tiny_vocab, lowercase=False, seq_length=64)
    tok.save_pretrained(tmp_path / "kb")
    again = BertTokenizer.from_pretrained(tmp_path / "kb")
    assert not again.lowercase and again.vocabulary == tiny_vocab
    cfg = json.loads((tmp_path / "kb" / "tokenizer_config.json").read_text())
    assert cfg["do_lower_case"] is False
    google = tmp_path / "cased_L-12_H-768_A-12"
    google.mkdir()
    (google / "vocab.txt").write_text("\n".join(tiny_vocab) + "\n")
    assert not BertTokenizer.from_pretrained(google).lowercase
    (tmp_path / "uncased_L-2").mkdir()
    (tmp_path / "uncased_L-2" / "vocab.txt").write_text("\n".join(tiny_vocab) + "\n")
    assert BertTokenizer.from_pretrained(tmp_path / "uncased_L-2").lowercase
    with pytest.raises(FileNotFoundError, match="no vocab.txt"):
        BertTokenizer.from_pretrained(tmp_path)


def test_build_vocab_covers_corpus(tmp_path):
    corpus = ["the cat sat on the mat", "the dog sat on the log", "cats and dogs",
              "Héllo wörld", "running runner runs"] * 20
    vocab = build_vocab(corpus, vocab_size=80, min_count=1, output_file=tmp_path / "vocab.txt")
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert (tmp_path / "vocab.txt").read_text().splitlines() == vocab
    tok = BertTokenizer(vocab)
    ids = tok.tokenize(corpus[:5]).flat_values.numpy()
    assert tok.unk_id not in ids  # every word of the corpus is covered by pieces
    assert "the" in vocab and "hello" in vocab  # normalized as the tokenizer does


def test_pack_decoder_pads_left_or_right_and_keeps_the_end_token():
    from kbert.tokenizers import pack_decoder

    ids = tf.ragged.constant([[5, 6, 7], [8], []], tf.int64)
    right = pack_decoder(ids, 5, start_id=1, end_id=2, pad_id=0)
    assert right["token_ids"].numpy().tolist() == [[1, 5, 6, 7, 2], [1, 8, 2, 0, 0],
                                                   [1, 2, 0, 0, 0]]
    assert right["padding_mask"].numpy().tolist() == [[1] * 5, [1, 1, 1, 0, 0],
                                                      [1, 1, 0, 0, 0]]
    left = pack_decoder(ids, 4, end_id=2, pad_id=9, padding_side="left")
    # Too long: the ids are cut, the end token kept; padding on the left.
    assert left["token_ids"].numpy().tolist() == [[5, 6, 7, 2], [9, 9, 8, 2], [9, 9, 9, 2]]
    assert left["padding_mask"].numpy().tolist() == [[1, 1, 1, 1], [0, 0, 1, 1],
                                                     [0, 0, 0, 1]]
    plain = pack_decoder(ids, 2)
    assert plain["token_ids"].numpy().tolist() == [[5, 6], [8, 0], [0, 0]]
    with pytest.raises(ValueError, match="padding_side='middle'"):
        pack_decoder(ids, 4, padding_side="middle")
    with pytest.raises(ValueError, match="seq_length=1 leaves no room for 2 special"):
        pack_decoder(ids, 1, start_id=1, end_id=2)


def test_pairs_of_different_batch_sizes_fail_clearly(tiny_vocab):
    tok = BertTokenizer(tiny_vocab)
    with pytest.raises(ValueError, match="texts_b: a pair needs as many second texts as "
                                         "first texts, got 2 for 1"):
        tok(["a"], ["b", "c"])


def test_truncate_and_keep_where_equal_tf_ragged_on_random_rows():
    """`packing.truncate` and `packing.keep_where` (a gather over one `RaggedRange`, a
    boolean mask with a running sum: a fraction of the graph nodes, #54/#51) give what
    `tf.ragged.boolean_mask` gives, empty rows, cuts past a row's end and all-dropped
    rows included; and they write no `Assert` into a traced graph."""
    from kbert.tokenizers import packing

    rng = np.random.default_rng(7)
    lengths = [0, 3, 1, 0, 7, 4, 2]
    rows = tf.RaggedTensor.from_row_lengths(
        tf.constant(rng.integers(0, 99, sum(lengths)), tf.int64), lengths)
    for keep in ([0, 0, 0, 0, 0, 0, 0], [2, 2, 2, 2, 2, 2, 2], [5, 1, 0, 3, 9, 4, 1]):
        keep = tf.constant(keep, tf.int64)
        want = tf.ragged.boolean_mask(
            rows, tf.ragged.range(rows.row_lengths()) < keep[:, None])
        assert packing.truncate(rows, keep).to_list() == want.to_list()
    for p in (0.0, 0.5, 1.0):
        mask = rows.with_flat_values(tf.constant(rng.random(sum(lengths)) < p))
        start = rows.with_flat_values(rows.flat_values * 10)
        want = [tf.ragged.boolean_mask(r, mask).to_list() for r in (rows, start)]
        got = packing.keep_where(rows, mask, start)
        assert [g.to_list() for g in got] == want
        assert packing.keep_where(rows, mask).to_list() == want[0]
    spec = tf.RaggedTensorSpec([None, None], tf.int64)
    graph = tf.function(lambda r: packing.truncate(r, r.row_lengths() - 1).to_tensor()
                        ).get_concrete_function(spec).graph
    assert "Assert" not in {op.type for op in graph.get_operations()}
