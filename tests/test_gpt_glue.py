"""GPT fine-tuned on GLUE as the GPT paper does it: the input formats with the start,
delimiter and extract tokens, the head on the extract token's state (both orders summed
for similarity), the auxiliary LM loss, and `python -m kbert.tasks.glue --model gpt`."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from glue_fixtures import COLORS, synthetic_paraphrase
from gpt_fixtures import gpt1_word_tokenizer, word_tokenizer
from kbert.tasks.glue import __main__ as cli
from kbert.models.gpt.hooks import AuxiliaryLMLoss, build_gpt_classifier


@pytest.fixture(scope="module")
def tokenizer():
    return word_tokenizer(COLORS)


def test_input_formats_of_the_paper(tokenizer):
    tok = tokenizer.with_task_tokens("entailment")
    start, delimiter, extract = tok.task_token_ids
    assert (start, delimiter, extract) == (tokenizer.vocab_size, tokenizer.vocab_size + 1,
                                           tokenizer.vocab_size + 2)
    red, blue, bare_blue = (tokenizer.tokenize([w]).to_list()[0][0]
                            for w in ("red", " blue", "blue"))
    single = tok(["red blue"], seq_length=6)
    assert single["token_ids"].numpy().tolist() == [[start, red, blue, extract, tok.pad_id,
                                                     tok.pad_id]]
    assert single["padding_mask"].numpy().tolist() == [[1, 1, 1, 1, 0, 0]]
    pair = tok(["red"], ["red blue"], seq_length=8)
    assert pair["token_ids"].numpy()[0, :6].tolist() == [start, red, delimiter, red, blue,
                                                         extract]
    similar = tokenizer.with_task_tokens("similarity")(["red"], ["red blue"], seq_length=8)
    assert similar["token_ids"].numpy()[0, :6].tolist() == [start, red, delimiter, red,
                                                            blue, extract]
    assert similar["token_ids_b"].numpy()[0, :6].tolist() == [start, red, blue, delimiter,
                                                              red, extract]
    # Longest-first truncation keeps the extract token.
    cut = tok(["red blue red blue"], ["blue"], seq_length=6)["token_ids"].numpy()[0]
    assert cut.tolist() == [start, red, blue, delimiter, bare_blue, extract]
    # No text tokenizes to the task tokens.
    assert not set(tok.tokenize(["_start_ _delimiter_ _classify_"]).to_list()[0]) & {
        start, delimiter, extract}
    with pytest.raises(ValueError, match="pairs need the task tokens"):
        tokenizer(["a"], ["b"])


def _tiny_classifier(tokenizer):
    """(decoder, classifier, a batch): a tiny GPT without dropout, two sentences."""
    tok = tokenizer.with_task_tokens()
    decoder = kbert.GPTDecoder(kbert.GPTConfig.preset("tiny", vocab_size=tok.vocab_size,
                                                      dropout=0.0, embedding_dropout=0.0,
                                                      attention_dropout=0.0))
    return decoder, build_gpt_classifier(decoder, 2), tok(["red blue green", "gold"],
                                                          seq_length=8)


def test_auxiliary_lm_loss_is_half_the_lm_loss_in_training_only(tokenizer):
    from kbert.models.gpt.lm import lm_examples, lm_loss

    decoder, model, x = _tiny_classifier(tokenizer)
    model(x, training=True)
    (added,) = model.losses
    inputs, labels = lm_examples(x["token_ids"], x["padding_mask"])
    logits = kbert.GPTLanguageModel(decoder)(
        {"token_ids": x["token_ids"], "padding_mask": x["padding_mask"]})["logits"][:, :-1]
    want = 0.5 * float(lm_loss()(labels["logits"], logits))
    np.testing.assert_allclose(float(added), want, rtol=1e-5)
    model(x, training=False)
    assert not model.losses
    assert AuxiliaryLMLoss(0.5).get_config()["weight"] == 0.5


def test_task_token_rows_are_drawn_from_the_seeded_state(tokenizer):
    """The GPT paper's new task tokens (start, delimiter, extract) get rows drawn from
    normal(0, initializer_range) that `keras.utils.set_random_seed` (the commands'
    --seed) fixes: before, each run drew them from fresh OS entropy, so the same GLUE
    command with the same --seed trained to other weights (0.2 apart after one epoch,
    dev accuracy 0.86 to 1.0 in the test below)."""
    n = tokenizer.vocab_size
    decoder = kbert.GPTDecoder(kbert.GPTConfig.preset("tiny", vocab_size=n))

    def rows(seed=None):
        return decoder.with_vocab_size(n + 3, seed=seed).token_embedding.embeddings.numpy()

    keras.utils.set_random_seed(5)
    first = rows()
    keras.utils.set_random_seed(5)
    np.testing.assert_array_equal(rows(), first)
    keras.utils.set_random_seed(6)
    assert not np.array_equal(rows()[n:], first[n:])
    np.testing.assert_array_equal(first[:n], decoder.token_embedding.embeddings.numpy())
    assert first.shape == (n + 3, decoder.config.hidden_size)
    assert 0.01 < first[n:].std() < 0.03  # initializer_range 0.02
    np.testing.assert_array_equal(rows(seed=7), rows(seed=7))


def test_a_loaded_classifier_trains_with_its_auxiliary_loss_once_linked(tokenizer, tmp_path):
    from kbert.models.gpt.hooks import link_auxiliary_losses

    decoder, model, x = _tiny_classifier(tokenizer)
    model(x, training=True)
    (want,) = model.losses
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras", compile=False)
    loaded(x, training=False)  # inference needs no link
    with pytest.raises(ValueError, match="auxiliary_lm_loss: not linked to the decoder's "
                       "token embedding .* call kbert.models.gpt.hooks.link_auxiliary_losses"):
        loaded(x, training=True)  # training would silently lose the loss
    link_auxiliary_losses(loaded)
    loaded(x, training=True)
    (got,) = loaded.losses
    np.testing.assert_allclose(float(got), float(want), rtol=1e-6)
    # Linked, it saves and loads as before (the embedding is not the loss layer's own).
    loaded.save(tmp_path / "again.keras")
    again = keras.saving.load_model(tmp_path / "again.keras", compile=False)
    np.testing.assert_allclose(again(x)["logits"], model(x)["logits"], rtol=1e-6)
    # A bfloat16 copy (`--dtype bfloat16`) is linked again too.
    from kbert.export.folder import cast_model

    cast = cast_model(model, "bfloat16")
    cast(x, training=True)
    assert len(cast.losses) == 1
    assert {w.dtype for w in cast.get_layer(decoder.name).weights} == {"bfloat16"}


def _fine_tune_on_synthetic_pairs(tmp_path, tokenizer, config: dict, flags: list[str],
                                  pairs: list[tuple[str, str]]):
    """Runs the GLUE command (MRPC layout, synthetic pairs) on a random-init 2-layer GPT
    folder with `tokenizer` and the preset overrides `config`; -> (output dir, export
    dir, the export's answer to `pairs` from TF Serving's C++ loader: the exporter's own
    load, `keep_served`)."""
    from kbert.export.check import keep_served, served_results

    keras.utils.set_random_seed(0)
    decoder = kbert.GPTDecoder(kbert.GPTConfig.preset(
        "tiny", vocab_size=tokenizer.vocab_size, hidden_size=64, num_heads=4,
        intermediate_size=256, **config))
    decoder.save_pretrained(tmp_path / "gpt", tokenizer=tokenizer)
    folder = synthetic_paraphrase(str(tmp_path))
    out, export = tmp_path / "out", tmp_path / "serving" / "para" / "1"
    request = {"text": [a for a, _ in pairs], "text_b": [b for _, b in pairs]}
    with keep_served(also=[request]):
        assert cli.main(["--task", "mrpc", "--model", "gpt", "--init_from",
                         str(tmp_path / "gpt"), "--data_dir", folder, "--output_dir",
                         str(out), "--max_seq_length", "20", "--steps_per_loop", "500",
                         "--export_dir", str(export), *flags]) == 0
        served = served_results(str(export), [request])[0]
    return out, export, served


@pytest.mark.e2e
@pytest.mark.parametrize("epochs, at_least", [
    (4, 0.8), pytest.param(15, 0.93, marks=pytest.mark.slow, id="15-0.93")])
def test_glue_command_fine_tunes_gpt_on_the_synthetic_pair_task(tmp_path, tokenizer, epochs,
                                                                at_least):
    """MRPC layout (a similarity task: both orders); a random-init 2-layer GPT folder,
    with the paper's auxiliary LM loss (0.5)."""
    from kbert.export.folder import load_task_folder

    pairs = [("red blue gold", "gold red blue"), ("red blue gold", "pink gray white")]
    out, export, fresh = _fine_tune_on_synthetic_pairs(
        tmp_path, tokenizer, {"end_token_id": tokenizer.end_token_id},
        ["--num_train_epochs", str(epochs), "--learning_rate", "1e-3", "--do_predict"], pairs)
    results = json.loads((out / "eval_results.json").read_text())
    # Batches of 32 at 1e-3, --seed 0 (one thread, alone; --steps_per_execution 25 too):
    # 15 epochs (1,875 steps) 0.977; 2 to 8 epochs 0.86, a plateau (--seed 0, 1, 2 at 3
    # epochs; learning rates 1e-3 to 5e-3 and --lm_coef 0.1 or 0.25 at 4 epochs: 0.86
    # each; --lm_coef 0 at 4 epochs: 0.977, so the auxiliary loss is what slows the
    # task down). `make test` runs the 4 epochs (0.86 against at least 0.8; chance is
    # 0.5), `make test-all` the 15 too (#54: 103 s of a run's test time, 4 epochs about
    # 45 s). The figures before 2026-12-07 (0.977 and 1.0 in two fresh processes, 0.947
    # once in a two-worker run, 0.86 in CI for batches of 64 at 2e-3) varied run to run
    # because the task tokens' rows were drawn from fresh OS entropy, not from --seed
    # (see the test above). oneDNN's kernels (TF_ENABLE_ONEDNN_OPTS) may still change
    # the rounding between machines.
    assert results["eval_accuracy"] >= at_least, results
    task, model, loaded, settings = load_task_folder(str(out))
    assert model.get_layer("auxiliary_lm_loss").token_embedding is not None  # linked
    assert type(loaded).__name__ == "GPTTokenizer" and loaded.pair_format == "similarity"
    assert loaded.vocab_size == tokenizer.vocab_size + 3
    served = np.array(fresh["probabilities"]["value"]).reshape(2, 2)
    x = loaded([a for a, _ in pairs], [b for _, b in pairs], seq_length=20)
    want = tf.nn.softmax(model(x)["logits"], axis=-1).numpy()
    np.testing.assert_allclose(served, want, atol=1e-5)
    # The served labels are the names of the model's choices (a hand-picked pair may be
    # among the few dev-like pairs the model gets wrong).
    assert fresh["label"]["value"] == [["0", "1"][i] for i in want.argmax(-1)]


def test_gpt1_tokenizer_takes_the_task_tokens(tmp_path):
    """GPT-1, the GPT paper's own model: the task tokens are appended after its
    vocabulary (as OpenAI's finetune-transformer-lm does: 40,478 .. 40,480 for
    openai-gpt) and pairs packed in the paper's formats; a saved folder keeps them."""
    from kbert.tokenizers import GPT1Tokenizer

    plain = gpt1_word_tokenizer(COLORS)
    n = plain.vocab_size
    tok = plain.with_task_tokens("similarity")
    assert isinstance(tok, GPT1Tokenizer) and tok.task_token_ids == (n, n + 1, n + 2)
    start, delimiter, extract = tok.task_token_ids
    red, blue = (plain.tokenize([w]).to_list()[0][0] for w in ("red", "Blue"))
    pair = tok(["Red"], ["red BLUE"], seq_length=8)
    assert pair["token_ids"].numpy().tolist() == [[start, red, delimiter, red, blue, extract,
                                                   tok.pad_id, tok.pad_id]]
    assert pair["token_ids_b"].numpy()[0, :6].tolist() == [start, red, blue, delimiter, red,
                                                           extract]
    assert tok(["red blue"], seq_length=5)["token_ids"].numpy().tolist() == [
        [start, red, blue, extract, tok.pad_id]]
    assert not set(tok.tokenize(["_start_ _delimiter_ _classify_"]).to_list()[0]) & {
        start, delimiter, extract}
    with pytest.raises(ValueError, match="pairs need the task tokens"):
        plain(["a"], ["b"])
    tok.save_pretrained(tmp_path)
    again = kbert.GPTTokenizer.from_pretrained(tmp_path)
    assert isinstance(again, GPT1Tokenizer) and again.pair_format == "similarity"
    assert again.task_token_ids == tok.task_token_ids


@pytest.mark.e2e
def test_glue_command_fine_tunes_gpt1_on_the_synthetic_pair_task(tmp_path):
    """The same command on a GPT-1 folder (post-LN blocks, GPT-1's BPE, no end token),
    without the auxiliary LM loss (`--lm_coef 0`), to at least 0.95 dev accuracy in 4
    epochs. With the paper's 0.5 (or 0.25), this tiny post-LN model did not learn the
    task in the runs tried (3 to 15 epochs; learning rates 3e-4 to 3e-3): it learns the
    one color that is several tokens ("green") and misses the pairs without it."""
    from kbert.export.folder import load_task_folder
    from kbert.tokenizers import GPT1Tokenizer

    tokenizer = gpt1_word_tokenizer(COLORS)
    pairs = [("Red blue gold", "gold red blue"), ("red blue gold", "pink gray white")]
    out, export, fresh = _fine_tune_on_synthetic_pairs(
        tmp_path, tokenizer, {"norm_first": False, "end_token_id": None},
        ["--num_train_epochs", "4", "--learning_rate", "1e-3", "--lm_coef", "0"], pairs)
    results = json.loads((out / "eval_results.json").read_text())
    assert results["eval_accuracy"] >= 0.95, results
    task, model, loaded, settings = load_task_folder(str(out))
    assert isinstance(loaded, GPT1Tokenizer) and loaded.pair_format == "similarity"
    assert loaded.vocab_size == tokenizer.vocab_size + 3
    assert not model.get_layer("gpt_decoder").config.norm_first
    assert model.get_layer("auxiliary_lm_loss").weight == 0.0  # --lm_coef reached it
    served = np.array(fresh["probabilities"]["value"]).reshape(2, 2)
    x = loaded([a for a, _ in pairs], [b for _, b in pairs], seq_length=20)
    np.testing.assert_allclose(served, tf.nn.softmax(model(x)["logits"], axis=-1).numpy(),
                               atol=1e-5)


def test_model_flag_is_checked(tmp_path, capsys, tokenizer):
    kbert.BertEncoder(kbert.BertConfig.preset("tiny")).save_pretrained(tmp_path / "bert")
    base = ["--task", "mrpc", "--data_dir", str(tmp_path), "--output_dir", str(tmp_path / "o")]
    for extra, message in [
            (["--model", "gpt"], "error: --model gpt needs --init_from a gpt folder"),
            (["--model", "gpt", "--init_from", str(tmp_path / "bert")],
             f"error: --model gpt: --init_from {tmp_path / 'bert'} holds a bert model"),
            (["--lm_coef", "-1"], "error: --lm_coef -1.0: must be 0 or more")]:
        with pytest.raises(SystemExit) as err:
            cli.main(base + extra)
        assert err.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith(message)
