"""CoNLL-2003 files as distributed, Hugging Face run_ner.py's JSON Lines, tag schemes,
and TFDS `conll2003`.

A file holds one token per line, `word POS chunk NER` separated by spaces;
`-DOCSTART-` lines open documents and blank lines end sentences. The original English
files tag with IOB1 (`I-X` opens a chunk unless it follows `X`; `B-X` only separates
two adjacent chunks of one type); kbert trains on BIO2 (every chunk opens with `B-X`).
"""

from __future__ import annotations

import dataclasses
import os
import re

_TAG = re.compile(r"^(O|[BIES]-\S+)$")


@dataclasses.dataclass
class Sentence:
    """Words and their NER tags; `line` is the file line of the first word."""

    words: list[str]
    tags: list[str]
    document: int = 0
    line: int = 0


def read_conll(path: str | os.PathLike, scheme: str = "bio2") -> list[Sentence]:
    """Reads a CoNLL-2003 file (or any file with the NER tag in the last column).

    Args:
        scheme: "bio2" converts IOB1 tags to BIO2 (BIO2 input is left as is);
            "bioes" converts further to BIOES; None keeps the file's tags.

    Raises:
        ValueError naming file and line: a line with one column, a different number of
        columns than the file's first token line, or a tag that is not O/B-X/I-X/E-X/S-X.
    """
    path = os.fspath(path)
    sentences: list[Sentence] = []
    words, tags, start, document, columns = [], [], 0, 0, None
    with open(path, encoding="utf-8-sig") as f:  # a byte-order mark is no word
        for number, raw in enumerate(f, start=1):
            line = raw.rstrip("\r\n")
            fields = line.split()
            if not fields:
                if words:
                    sentences.append(Sentence(words, tags, document, start))
                words, tags = [], []
                continue
            if fields[0] == "-DOCSTART-":
                if words:
                    sentences.append(Sentence(words, tags, document, start))
                    words, tags = [], []
                document += 1
                continue
            if len(fields) < 2:
                raise ValueError(f"{path}:{number}: expected 'word ... tag' columns, got "
                                 f"{line!r}")
            if columns is None:
                columns = len(fields)
            elif len(fields) != columns:
                raise ValueError(f"{path}:{number}: {len(fields)} columns, expected "
                                 f"{columns} as on the file's first token line")
            if not _TAG.match(fields[-1]):
                raise ValueError(f"{path}:{number}: {fields[-1]!r} is not a NER tag "
                                 "(O, B-X, I-X, E-X or S-X)")
            if not words:
                start = number
            words.append(fields[0])
            tags.append(fields[-1])
    if words:
        sentences.append(Sentence(words, tags, document, start))
    if scheme:
        for s in sentences:
            s.tags = convert_tags(s.tags, scheme)
    return sentences


def read_ner_file(path: str, scheme: str = "bio2", label_list: list[str] | None = None,
                  flag: str = "--train_file") -> list[Sentence]:
    """A CoNLL file, or (`.json`, `.jsonl`) Hugging Face run_ner.py's JSON Lines: an
    object per sentence with `tokens` (words) and `ner_tags` (tag names, or ids into
    `label_list`)."""
    path = os.fspath(path)
    if os.path.splitext(path)[1].lower() in (".json", ".jsonl"):
        sentences = read_ner_jsonl(path, scheme, label_list, flag)
    else:
        sentences = read_conll(path, scheme)
    if not sentences:
        raise ValueError(f"{flag} {path}: no sentences (an empty file, or only "
                         "-DOCSTART- and blank lines)")
    return sentences


def unseen_entity_types(train: list[Sentence], other: list[Sentence]) -> list[str]:
    """Entity types tagged in `other` (a dev or test file) that `train` never tags."""
    def types(sentences):
        return {t[2:] for s in sentences for t in s.tags if t != "O"}
    return sorted(types(other) - types(train))


def read_ner_jsonl(path: str, scheme: str = "bio2", label_list: list[str] | None = None,
                   flag: str = "--train_file") -> list[Sentence]:
    """run_ner.py's JSON Lines (see `read_ner_file`); every error names file, line and
    column: a missing column, lengths that differ, an id without --label_list or out of
    it, a tag that is not O/B-X/I-X/E-X/S-X."""
    from kbert.tasks.own_data import field, read_rows

    sentences = []
    for line, row in read_rows(path, flag)[1]:
        words = field(path, line, row, "tokens", "list")
        tags = field(path, line, row, "ner_tags", "list")
        for column, value in (("tokens", words), ("ner_tags", tags)):
            if not isinstance(value, list):
                raise ValueError(f"{path}:{line}: column {column!r} is a "
                                 f"{type(value).__name__}, expected a list")
        if len(words) != len(tags):
            raise ValueError(f"{path}:{line}: {len(words)} tokens but {len(tags)} ner_tags")
        if not words:
            continue
        if any(not isinstance(w, str) or not w.strip() for w in words):
            raise ValueError(f"{path}:{line}: column 'tokens' holds an empty or non-text "
                             "token")
        names = []
        for tag in tags:
            if isinstance(tag, int) and not isinstance(tag, bool):
                if label_list is None:
                    raise ValueError(f"{path}:{line}: column 'ner_tags' holds ids ({tag}); "
                                     "give their names with --label_list O,B-PER,I-PER,...")
                if not 0 <= tag < len(label_list):
                    raise ValueError(f"{path}:{line}: column 'ner_tags': id {tag} is not in "
                                     f"--label_list ({len(label_list)} names)")
                tag = label_list[tag]
            if not isinstance(tag, str) or not _TAG.match(tag):
                raise ValueError(f"{path}:{line}: column 'ner_tags': {tag!r} is not a NER "
                                 "tag (O, B-X, I-X, E-X or S-X)")
            names.append(tag)
        sentences.append(Sentence(list(words), names, 0, line))
    if scheme:
        for s in sentences:
            s.tags = convert_tags(s.tags, scheme)
    return sentences


def _split(tag):
    return ("O", None) if tag == "O" else (tag[0], tag[2:])


def iob1_to_bio2(tags: list[str]) -> list[str]:
    """`I-X` that opens a chunk (after O, after another type, first word) becomes `B-X`."""
    out, prev = [], "O"
    for tag in tags:
        prefix, kind = _split(tag)
        if prefix == "I" and _split(prev)[1] != kind:
            tag = "B-" + kind
        out.append(tag)
        prev = tag
    return out


def bio2_to_bioes(tags: list[str]) -> list[str]:
    out = []
    for i, tag in enumerate(tags):
        prefix, kind = _split(tag)
        nxt = tags[i + 1] if i + 1 < len(tags) else "O"
        continues = nxt == "I-" + (kind or "")
        if prefix == "B":
            out.append(("B-" if continues else "S-") + kind)
        elif prefix == "I":
            out.append(("I-" if continues else "E-") + kind)
        else:
            out.append(tag)
    return out


def bioes_to_bio2(tags: list[str]) -> list[str]:
    return [("B-" + t[2:]) if t.startswith("S-") else ("I-" + t[2:]) if t.startswith("E-")
            else t for t in tags]


def convert_tags(tags: list[str], scheme: str = "bio2") -> list[str]:
    """IOB1, BIO2 or BIOES tags -> `scheme` ("bio2" or "bioes")."""
    bio2 = iob1_to_bio2(bioes_to_bio2(tags))
    if scheme == "bio2":
        return bio2
    if scheme == "bioes":
        return bio2_to_bioes(bio2)
    raise ValueError(f"unknown tag scheme {scheme!r}: use 'bio2' or 'bioes'")


def labels_of(sentences: list[Sentence]) -> list[str]:
    """The label list: "O" first, then B-/I- (or BIOES) tags sorted by type."""
    seen = {t for s in sentences for t in s.tags}
    kinds = sorted({t[2:] for t in seen if t != "O"})
    prefixes = "BIES" if any(t[:1] in "ES" for t in seen if t != "O") else "BI"
    return ["O"] + [f"{p}-{k}" for k in kinds for p in prefixes]


def load_tfds(split: str, data_dir: str | None = None,
              scheme: str = "bio2") -> list[Sentence]:
    """TFDS `conll2003` (its tags are BIO2 already), converted to `scheme` as
    `read_conll` converts the files."""
    import tensorflow_datasets as tfds

    from kbert.tasks import tfds_source

    ds, info = tfds_source.load(
        "conll2003", split, data_dir,
        advice="with no network, download the CoNLL-2003 files and pass "
               "--train_file/--dev_file/--test_file, or --tfds_data_dir with a prepared copy")
    names = info.features["ner"].feature.names
    out = []
    for i, ex in enumerate(tfds.as_numpy(ds)):
        words = [w.decode("utf-8") for w in ex["tokens"]]
        out.append(Sentence(words, convert_tags([names[t] for t in ex["ner"]], scheme), 0, i))
    return out
