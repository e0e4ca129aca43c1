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
