"""`python -m kbert.tasks.pretrain create_data` against Google's
`create_pretraining_data.py` itself (the copy the PyPI package `bert-tensorflow` 1.0.4
ships, run in this process on the same files, vocabulary and seed): the TFRecords are
identical record for record. Whole-word masking (not in that copy) is checked on
hand-made `##` cases against the rules of google-research/bert's current code."""

from __future__ import annotations

import random

import pytest
import tensorflow as tf

from kbert.tasks.pretrain import __main__ as cli
from kbert.models.bert.create_data import Options, mask_tokens

pytestmark = pytest.mark.parity

ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "Unbelievably, the runners kept running through the rain.",
    "Pretraining data is made from documents of sentences.",
    "Tokenizers split unwanted words into pieces!",
    "She said: \"we will see\" and left early, didn't she?",
]
CHINESE = ["北京是中国的首都。", "我们明天去上海看展览。", "机器学习需要大量的数据。"]


def _corpus(tmp_path):
    """Two files; documents of one sentence, documents of many, long sentences, blank
    lines in a row, a document that runs across the file boundary."""
    rng = random.Random(0)
    first, second = [], []
    for d in range(14):
        lines = [rng.choice(ENGLISH + CHINESE) for _ in range(rng.choice([1, 1, 3, 6]))]
        if d % 5 == 0:
            lines.append(" ".join(rng.choice(ENGLISH) for _ in range(9)))  # > 128 pieces
        (first if d < 7 else second).append(lines)
    a = "\n\n".join("\n".join(doc) for doc in first) + "\n\n\n"
    b = "\n\n".join("\n".join(doc) for doc in second) + "\n  \n"
    (tmp_path / "a.txt").write_text(a + "continued into the next file .\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("the next file continues it .\n\n" + b, encoding="utf-8")
    return [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]


def _vocab(tmp_path, files, lowercase):
    from kbert import build_vocab

    texts = [line for f in files for line in open(f, encoding="utf-8") if line.strip()]
    vocab = build_vocab(texts, vocab_size=250, lowercase=lowercase, min_count=1)
    path = tmp_path / f"vocab-{lowercase}.txt"
    path.write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    assert any(t.startswith("##") for t in vocab)
    return str(path)


def _records(paths):
    return [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in paths]


@pytest.mark.parametrize("lowercase, seq, dupe, short", [(True, 128, 3, 0.1),
                                                          (False, 24, 2, 0.5)])
def test_records_equal_googles_script(tmp_path, lowercase, seq, dupe, short):
    from bert import create_pretraining_data as reference

    from references import google_tokenization

    tokenization = google_tokenization()
    files = _corpus(tmp_path)
    vocab_file = _vocab(tmp_path, files, lowercase)
    ours = [str(tmp_path / "ours-0.tfrecord"), str(tmp_path / "ours-1.tfrecord")]
    theirs = [str(tmp_path / "ref-0.tfrecord"), str(tmp_path / "ref-1.tfrecord")]
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=lowercase)
    instances = reference.create_training_instances(
        files, tokenizer, seq, dupe, short, 0.15, 20, random.Random(7))
    reference.write_instance_to_example_files(instances, tokenizer, seq, 20, theirs)
    assert cli.main(["create_data", "--input_file", f"{tmp_path}/a.txt,{tmp_path}/b*.txt",
                     "--output_file", ",".join(ours), "--vocab_file", vocab_file,
                     "--do_lower_case", str(lowercase).lower(), "--max_seq_length", str(seq),
                     "--dupe_factor", str(dupe), "--short_seq_prob", str(short),
                     "--random_seed", "7"]) == 0
    got, want = _records(ours), _records(theirs)
    assert sum(map(len, want)) > 50 and [len(r) for r in got] == [len(r) for r in want]
    for g, w in zip(got, want):
        assert g == w  # byte for byte
    example = tf.train.Example.FromString(got[0][0])
    labels = {int(tf.train.Example.FromString(r).features.feature["next_sentence_labels"]
                  .int64_list.value[0]) for r in got[0] + got[1]}
    assert labels == {0, 1}
    assert len(example.features.feature["input_ids"].int64_list.value) == seq


def _whole_word_options(budget):
    return Options(max_predictions_per_seq=budget, masked_lm_prob=1.0,
                   do_whole_word_mask=True)


def _words(tokens):
    groups, current = [], None
    for i, t in enumerate(tokens):
        if t in ("[CLS]", "[SEP]"):
            current = None
            continue
        if t.startswith("##") and groups and current is not None:
            groups[-1].append(i)
        else:
            groups.append([i])
        current = i
    return groups


@pytest.mark.parametrize("seed", range(20))
def test_whole_word_masking_chooses_whole_words_within_the_budget(seed):
    tokens = ["[CLS]", "un", "##want", "##ed", "run", "##ning", "[SEP]", "##ly", "fast",
              "a", "##b", "##c", "##d", "[SEP]"]
    vocab = ["[MASK]", "x", "y"]
    budget = 4
    out, positions, labels = mask_tokens(tokens, vocab, _whole_word_options(budget),
                                         random.Random(seed))
    assert 1 <= len(positions) <= budget and positions == sorted(positions)
    chosen = set(positions)
    for group in _words(tokens):  # every word is in or out as a whole
        assert set(group) <= chosen or not set(group) & chosen, (group, positions)
    assert [tokens[i] for i in positions] == labels
    assert all(out[i] == tokens[i] for i in range(len(tokens)) if i not in chosen)
    # "##ly" right after [SEP] opens a word of its own, as in the reference (the
    # check is "a candidate exists", not "the previous token was a piece").
    assert [7] in _words(tokens)


def test_whole_word_masking_hand_made_cases():
    opts = _whole_word_options(3)
    # A 4-piece word never fits a budget of 3: only the others are chosen.
    tokens = ["[CLS]", "a", "##b", "##c", "##d", "e", "f", "[SEP]", "g", "[SEP]"]
    for seed in range(30):
        _, positions, _ = mask_tokens(tokens, ["[MASK]"], opts, random.Random(seed))
        assert not {1, 2, 3, 4} & set(positions) and len(positions) == 3
    # Without whole words the pieces are chosen one by one.
    single = Options(max_predictions_per_seq=3, masked_lm_prob=1.0)
    seen = set()
    for seed in range(30):
        seen |= set(mask_tokens(tokens, ["[MASK]"], single, random.Random(seed))[1])
    assert {2, 3} <= seen
    # The draws: one shuffle of the word list, then per chosen piece one draw (two when
    # not [MASK]), in word order, pieces left to right.
    rng, mirror = random.Random(5), random.Random(5)
    out, positions, _ = mask_tokens(["[CLS]", "ab", "##c", "d", "[SEP]"], ["[MASK]", "z"],
                                    _whole_word_options(2), rng)
    words = [[1, 2], [3]]
    mirror.shuffle(words)
    expect = []
    for word in words:
        if len(expect) + len(word) > 2:
            continue
        for i in word:
            r = mirror.random()
            kind = "mask" if r < 0.8 else ("keep" if mirror.random() < 0.5 else "random")
            if kind == "random":
                mirror.randint(0, 1)
            expect.append(i)
    assert positions == sorted(expect) and rng.random() == mirror.random()


@pytest.mark.parametrize("flags, message", [
    (["--max_seq_length", "4"], "--max_seq_length 4: needs at least 5"),
    (["--masked_lm_prob", "1.5"], "--masked_lm_prob 1.5: must be between 0 and 1"),
])
def test_bad_flags_are_one_line(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as err:
        cli.main(["create_data", "--input_file", "x", "--output_file",
                  str(tmp_path / "o.tfrecord"), "--vocab_file", "v", *flags])
    err_text = capsys.readouterr().err.strip()
    assert err.value.code == 2 and err_text.startswith(f"error: {message}")
    assert "\n" not in err_text


def test_bad_inputs_fail_before_any_file(tmp_path, capsys):
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    (tmp_path / "corpus.txt").write_text("hello\n")
    (tmp_path / "empty.txt").write_text("\n\n   \n")
    out = tmp_path / "out" / "o.tfrecord"
    cases = [(["--input_file", str(tmp_path / "corpus.txt")], "no [MASK] token"),
             (["--input_file", str(tmp_path / "none*.txt")], "matches no file")]
    for flags, message in cases:
        with pytest.raises(SystemExit) as err:
            cli.main(["create_data", *flags, "--output_file", str(out), "--vocab_file",
                      str(tmp_path / "vocab.txt")])
        assert err.value.code == 1 and message in capsys.readouterr().err
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    with pytest.raises(SystemExit) as err:
        cli.main(["create_data", "--input_file", str(tmp_path / "empty.txt"),
                  "--output_file", str(out), "--vocab_file", str(tmp_path / "vocab.txt")])
    assert err.value.code == 1 and "no text" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
