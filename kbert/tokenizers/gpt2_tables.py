"""The character classes of GPT-2's split pattern, as Python's `regex` module has them.

OpenAI's `encoder.py` splits text with the `regex` pattern

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

whose classes are `regex`'s own: letters (`\\p{L}`), numbers (`\\p{N}`) and
whitespace (`\\s`, which in `regex` is more than RE2's `[\\t\\n\\f\\r ]`: U+0085,
U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 and U+000B).
kbert's in-graph splitter looks each code point up in ranges of these classes, made by
`regex` itself and checked in (`gpt2_classes.py`). Regenerate with

    python -m kbert.tokenizers.gpt2_tables

(a test regenerates them and compares, so a Unicode update of `regex` is seen).
"""

from __future__ import annotations

import os
import pprint

OTHER, LETTER, NUMBER, WHITESPACE = 0, 1, 2, 3
_PATTERNS = {LETTER: r"\p{L}", NUMBER: r"\p{N}", WHITESPACE: r"\s"}


def generate() -> tuple[str, list[tuple[int, int]]]:
    """(regex's version, [(first code point, class)] in code point order: each class
    holds from its code point to the next entry's)."""
    import regex

    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    classes = {}
    for cls, pattern in _PATTERNS.items():
        for m in regex.finditer(pattern + "+", chars):
            for ch in m.group():
                if ord(ch) in classes:
                    raise AssertionError(f"U+{ord(ch):04X} is in two classes")
                classes[ord(ch)] = cls
    table, current = [], None
    for cp in range(0x110000):
        cls = classes.get(cp, OTHER)
        if cls != current:
            table.append((cp, cls))
            current = cls
    return regex.__version__, table


def source() -> str:
    version, table = generate()
    return (
        '"""GPT-2 split-pattern character classes (generated; do not edit).\n\n'
        "Made by `python -m kbert.tokenizers.gpt2_tables` from Python's `regex` "
        f"{version}.\n"
        '"""\n\n'
        f"REGEX_VERSION = {version!r}\n\n"
        "# (first code point, class): 0 other, 1 letter, 2 number, 3 whitespace\n"
        f"RANGES = {pprint.pformat(table, compact=True, width=96)}\n")


def main() -> None:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpt2_classes.py")
    from kbert.io import atomic_file

    with atomic_file(path) as f:
        f.write(source())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
