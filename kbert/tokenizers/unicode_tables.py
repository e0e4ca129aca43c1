"""RE2 character classes that reproduce the reference BERT tokenizer's predicates.

Google's `tokenization.py` decides with Python's `unicodedata`: what is whitespace, a
control character, punctuation, a CJK ideograph, and which marks (category Mn) accent
stripping removes. RE2's own `\\p{...}` tables follow another Unicode version, so kbert
builds each class from `unicodedata` itself, as ranges of code points.

Walking all 1.1M code points takes seconds, so the classes are generated once and
checked in (`unicode_classes.py`, with the Unicode version they were made from);
`tables()` uses them when the running Python has the same Unicode version and
generates them afresh otherwise. Regenerate the file with

    python -m kbert.tokenizers.unicode_tables

(a test regenerates it and compares, so a Unicode update of Python is seen).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import unicodedata

logger = logging.getLogger(__name__)

# The CJK Unified Ideographs blocks of `_is_chinese_char` in tokenization.py.
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_whitespace(ch: str) -> bool:
    """Characters that end a word: BERT's `_is_whitespace`, plus the separators that
    Python's `str.split()` also splits on and that cleaning keeps (U+2028, U+2029)."""
    if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
        return True
    return ch.isspace() and not is_control(ch)


def is_control(ch: str) -> bool:
    """Characters that Google's `_clean_text` deletes: NUL, U+FFFD, and categories Cc
    and Cf but tab and newlines. Unassigned (Cn) and private-use (Co) code points are
    kept (Hugging Face's Python port deletes every C* category instead)."""
    if ch in "\t\n\r":
        return False
    return ch in "\x00\ufffd" or unicodedata.category(ch) in ("Cc", "Cf")


def is_punctuation(ch: str) -> bool:
    """BERT's `_is_punctuation`: all non-alphanumeric ASCII, and categories P*."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def _ranges(pred) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates never occur in valid UTF-8
            continue
        if pred(chr(cp)):
            if out and out[-1][1] == cp - 1:
                out[-1] = (out[-1][0], cp)
            else:
                out.append((cp, cp))
    return out


def _re2_class(ranges, negate=False) -> str:
    def esc(cp):
        return f"\\x{{{cp:X}}}"

    body = "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges)
    return f"[{'^' if negate else ''}{body}]"


def _strip(ch: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", ch) if unicodedata.category(c) != "Mn")


def _splits_after_stripping(ch: str) -> bool:
    """Characters that are not punctuation but whose accent-stripped form is, e.g.
    U+2260 NOT EQUAL TO -> "=" + U+0338. The reference strips accents before it
    splits on punctuation, so with accent stripping these split like punctuation."""
    if is_punctuation(ch) or is_cjk(ch) or is_whitespace(ch):
        return False
    s = _strip(ch.lower())
    return any(is_punctuation(c) or is_cjk(c) for c in s)


@functools.lru_cache(maxsize=None)
def tables() -> dict[str, str]:
    """RE2 classes: `whitespace`, `control`, `punct`, `cjk`, `mn`, `punct_if_stripped`.

    The checked-in classes when they were made from this Python's Unicode version,
    else generated now (a few seconds)."""
    from kbert.tokenizers import unicode_classes

    if unicode_classes.UNIDATA_VERSION == unicodedata.unidata_version:
        return dict(unicode_classes.CLASSES)
    logger.warning("Python's Unicode is %s, kbert's character classes were made from %s: "
                   "generating them for this Python (a few seconds)",
                   unicodedata.unidata_version, unicode_classes.UNIDATA_VERSION)
    return generate()


def generate() -> dict[str, str]:
    """Walks every code point and builds the classes of `tables()` from `unicodedata`."""
    strip_splitters = _ranges(_splits_after_stripping)
    # Each such character must become exactly one punctuation character, so treating
    # it as punctuation before stripping gives the reference's pieces.
    for a, b in strip_splitters:
        for cp in range(a, b + 1):
            s = _strip(chr(cp).lower())
            assert len(s) == 1 and is_punctuation(s), (hex(cp), s)
    return {
        "whitespace": _re2_class(_ranges(is_whitespace)),
        "control": _re2_class(_ranges(is_control)),
        "punct": _re2_class(_ranges(is_punctuation)),
        "cjk": _re2_class(CJK_RANGES),
        "mn": _re2_class(_ranges(lambda c: unicodedata.category(c) == "Mn")),
        "punct_if_stripped": _re2_class(strip_splitters) if strip_splitters else "",
    }


def render_module(classes: dict[str, str]) -> str:
    """The text of `unicode_classes.py` for `classes`."""
    lines = ['"""RE2 character classes of BERT\'s tokenizer predicates (generated; do not edit).',
             "", "Made by `python -m kbert.tokenizers.unicode_tables` from Python's unicodedata",
             f"{unicodedata.unidata_version}.", '"""', "",
             f"UNIDATA_VERSION = {unicodedata.unidata_version!r}", "", "CLASSES = {"]
    for key in sorted(classes):
        value = classes[key]
        lines.append(f"    {key!r}: (")
        for i in range(0, len(value), 80):
            lines.append(f"        {value[i:i + 80]!r}")
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    from kbert.io import atomic_file

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unicode_classes.py")
    with atomic_file(path) as f:
        f.write(render_module(generate()))
    print(f"wrote {path} (Unicode {unicodedata.unidata_version})")


if __name__ == "__main__":
    main()
