"""The README's Keras example and the demo run as tests, so the README stays true."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.e2e
def test_readme_keras_example_trains():
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- readme-example -->\s*```python\n(.*?)```", text, re.S)
    assert match, "README lost its marked example"
    scope = {}
    exec(compile(match.group(1), str(README), "exec"), scope)
    losses = scope["history"].history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses


@pytest.mark.e2e
def test_demo_learns_negation(tmp_path):
    from kbert import demo

    accuracy = demo.run(output_dir=str(tmp_path))  # what what `make demo` runs
    assert accuracy >= 0.9
