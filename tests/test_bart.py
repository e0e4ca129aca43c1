"""BART (#32): `kbert.BartSeq2SeqLM` and `kbert.BartTokenizer` against `transformers`'
`BartForConditionalGeneration` / `BartModel` (5.x, PyTorch) on random-weight folders it
writes, its `generate` (greedy, processors, beam search, a forced `<s>`) and its
`BartTokenizer` (GPT-2's real BPE with fairseq's special ids)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers

import kbert
from kbert.models import registry
from tests import generate_requests as hostile
from tests.test_roberta import CORPUS, _write_vocab, assert_sample_squad_run

pytestmark = pytest.mark.parity


def _reference(**overrides):
    """A random BART: 2 encoder and 3 decoder layers with different head counts and
    widths, weights drawn wider than BART's (std 0.2: a random model at 0.02 repeats
    one token at once), a random `final_logits_bias`. `forced_eos_token_id` off (transformers'
    default forces `</s>` at the last step: `test_forced_end_token_equals_transformers`)."""
    values = dict(vocab_size=50262, d_model=32, encoder_layers=2, decoder_layers=3,
                  encoder_attention_heads=4, decoder_attention_heads=2, encoder_ffn_dim=37,
                  decoder_ffn_dim=41, max_position_embeddings=64, dropout=0.0,
                  forced_eos_token_id=None, init_std=0.2)
    values.update(overrides)
    torch.manual_seed(0)
    model = transformers.BartForConditionalGeneration(transformers.BartConfig(**values)).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_()
    return model


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("bart")
    ref = _reference()
    ref.save_pretrained(root / "lm")
    _write_vocab(root / "lm", lstrip_mask=True)
    ref.model.save_pretrained(root / "model")  # a BartModel folder: no final_logits_bias
    return ref, root, kbert.BartSeq2SeqLM.from_pretrained(root / "lm")


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    enc = rng.integers(3, 50000, (3, 9)).astype("int32")
    enc_mask = np.ones_like(enc)
    enc_mask[1, 6:] = 0
    enc_mask[2, 3:] = 0
    enc = np.where(enc_mask > 0, enc, 1)
    dec = rng.integers(3, 50000, (3, 6)).astype("int32")
    dec_mask = np.ones_like(dec)
    dec_mask[2, 4:] = 0
    return enc, enc_mask, dec, dec_mask


def _logits(model, enc, enc_mask, dec, dec_mask):
    with torch.no_grad():
        return model(input_ids=torch.tensor(enc, dtype=torch.long),
                     attention_mask=torch.tensor(enc_mask),
                     decoder_input_ids=torch.tensor(dec, dtype=torch.long),
                     decoder_attention_mask=torch.tensor(dec_mask)).logits.numpy()


def _ours(lm, enc, enc_mask, dec, dec_mask):
    return lm({"encoder_token_ids": enc, "encoder_padding_mask": enc_mask,
               "decoder_token_ids": dec, "decoder_padding_mask": dec_mask})["logits"].numpy()


def test_logits_equal_transformers(folder):
    ref, root, lm = folder
    assert registry.family_of_folder(root / "lm").name == "bart"
    enc, enc_mask, dec, dec_mask = _batch()
    want = _logits(ref, enc, enc_mask, dec, dec_mask)
    real = dec_mask.astype(bool)
    np.testing.assert_allclose(_ours(lm, enc, enc_mask, dec, dec_mask)[real], want[real],
                               atol=2e-5 * np.abs(want).max(), rtol=0)
    bare = kbert.BartSeq2SeqLM.from_pretrained(root / "model")  # BartModel: bias zeros
    assert not np.any(bare.final_logits_bias.bias.numpy())
    got = _ours(bare, enc, enc_mask, dec, dec_mask) + ref.final_logits_bias.numpy()
    np.testing.assert_allclose(got[real], want[real], atol=2e-5 * np.abs(want).max(), rtol=0)


def test_shift_right_equals_transformers(folder):
    from transformers.models.bart.modeling_bart import shift_tokens_right

    _, _, lm = folder
    labels = np.array([[5, 6, 7, 2], [8, 2, -100, -100]])
    want = shift_tokens_right(torch.tensor(labels), 1, 2).numpy()
    np.testing.assert_array_equal(lm.shift_right(labels).numpy(), want)


def _generate(ref, enc, enc_mask, new, **options):
    with torch.no_grad():
        out = ref.generate(input_ids=torch.tensor(enc, dtype=torch.long),
                           attention_mask=torch.tensor(enc_mask), max_new_tokens=new,
                           min_new_tokens=new, **options)
    return out.numpy()


@pytest.mark.parametrize("jit_compile", [True, False], ids=["xla", "graph"])
def test_greedy_and_processors_equal_transformers(folder, jit_compile):
    ref, _, lm = folder
    enc, enc_mask, _, _ = _batch(seed=3)
    want = _generate(ref, enc, enc_mask, 10, do_sample=False)[:, 1:]
    got = lm.generate_ids(enc, enc_mask, 10, min_new_tokens=10, jit_compile=jit_compile)
    np.testing.assert_array_equal(got.numpy(), want)
    want = _generate(ref, enc, enc_mask, 10, do_sample=False, repetition_penalty=1.5,
                     no_repeat_ngram_size=2)[:, 1:]
    # a random BART repeats one token greedily; the processors make each row vary
    assert all(len(np.unique(row)) > 4 for row in want)
    got = lm.generate_ids(enc, enc_mask, 10, min_new_tokens=10, jit_compile=jit_compile,
                          repetition_penalty=1.5, no_repeat_ngram_size=2)
    np.testing.assert_array_equal(got.numpy(), want)


def test_forced_start_token_equals_transformers(folder, tmp_path):
    """bart-large's `forced_bos_token_id`: the first token is always `<s>`; kbert puts it
    in the decoder's prompt (`</s> <s>`), transformers forces it as a generated token.
    transformers 5.x keeps it in `generation_config.json` (its BartConfig drops the
    key); the Hub's bart-large has it in `config.json`, as transformers 4.x wrote it."""
    ref = _reference()
    ref.generation_config.forced_bos_token_id = 0
    ref.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "generation_config.json").read_text())[
        "forced_bos_token_id"] == 0
    lm = kbert.BartSeq2SeqLM.from_pretrained(tmp_path)
    assert lm.config.forced_bos_token_id == 0
    assert kbert.BartConfig.from_reference_dict(
        {"model_type": "bart", "forced_bos_token_id": 0}).forced_bos_token_id == 0
    enc, enc_mask, _, _ = _batch(seed=5)
    want = _generate(ref, enc, enc_mask, 8, do_sample=False)
    assert (want[:, 1] == 0).all()
    got = lm.generate_ids(enc, enc_mask, 7, min_new_tokens=7)
    np.testing.assert_array_equal(got.numpy(), want[:, 2:])


@pytest.mark.parametrize("jit_compile", [True, False], ids=["xla", "graph"])
def test_forced_end_token_equals_transformers(tmp_path, jit_compile):
    """transformers' default `forced_eos_token_id` (2; its BartConfig's, read from
    config.json or generation_config.json, or the default where neither says): `</s>` is
    the last allowed token, min_new_tokens notwithstanding; greedy and beam search
    (sequences and scores) equal transformers' `generate`; `forced_eos_token_id=None`
    turns it off."""
    ref = _reference(forced_eos_token_id=2)
    ref.save_pretrained(tmp_path)
    lm = kbert.BartSeq2SeqLM.from_pretrained(tmp_path)
    assert lm.config.forced_eos_token_id == 2 == transformers.BartConfig.from_dict(
        {"model_type": "bart"}).forced_eos_token_id == kbert.BartConfig.from_reference_dict(
        {"model_type": "bart"}).forced_eos_token_id
    enc, enc_mask, _, _ = _batch(seed=3)
    want = _generate(ref, enc, enc_mask, 8, do_sample=False)[:, 1:]
    assert (want[:, -1] == 2).all() and (want[:, :-1] != 2).all()
    got = lm.generate_ids(enc, enc_mask, 8, min_new_tokens=8, jit_compile=jit_compile)
    np.testing.assert_array_equal(got.numpy(), want)
    off = lm.generate_ids(enc, enc_mask, 8, min_new_tokens=8, jit_compile=jit_compile,
                          forced_eos_token_id=None).numpy()
    np.testing.assert_array_equal(off[:, :-1], want[:, :-1])
    assert (off[:, -1] != 2).all()
    with torch.no_grad():
        out = ref.generate(input_ids=torch.tensor(enc, dtype=torch.long),
                           attention_mask=torch.tensor(enc_mask), max_new_tokens=6,
                           num_beams=3, do_sample=False, output_scores=True,
                           return_dict_in_generate=True)
    beams = kbert.models.generation.generate_sequences(
        lm, enc, enc_mask, 6, sampler="beam", num_beams=3, jit_compile=jit_compile)
    want = out.sequences.numpy()[:, 1:]
    for r in range(len(want)):
        n = int(beams["lengths"][r])
        assert beams["token_ids"][r, :n].tolist() == [t for t in want[r] if t not in (1, 2)]
    np.testing.assert_allclose(beams["scores"], out.sequences_scores.numpy(), atol=1e-4)


def test_beam_search_equals_transformers(folder):
    ref, _, lm = folder
    enc, enc_mask, _, _ = _batch(seed=4)
    with torch.no_grad():
        out = ref.generate(input_ids=torch.tensor(enc, dtype=torch.long),
                           attention_mask=torch.tensor(enc_mask), max_new_tokens=8,
                           num_beams=3, num_return_sequences=2, do_sample=False,
                           output_scores=True, return_dict_in_generate=True)
    got = kbert.models.generation.generate_sequences(
        lm, enc, enc_mask, 8, sampler="beam", num_beams=3, num_return_sequences=2,
        jit_compile=False)
    want = out.sequences.numpy()[:, 1:]
    for r in range(len(want)):
        n = int(got["lengths"][r])
        assert got["token_ids"][r, :n].tolist() == [t for t in want[r] if t not in (1, 2)][:n]
    np.testing.assert_allclose(got["scores"], out.sequences_scores.numpy(), atol=1e-4)


def test_tokenizer_equals_transformers(folder):
    _, root, lm = folder
    ref = transformers.BartTokenizer.from_pretrained(root / "lm")
    tok = lm.tokenizer
    assert isinstance(tok, kbert.BartTokenizer) and tok.end_token_id == 2
    assert tok.encoder_ids(CORPUS).to_list() == [ref(t)["input_ids"] for t in CORPUS]
    packed = tok(CORPUS, seq_length=12)
    want = ref(CORPUS, truncation=True, max_length=12, padding="max_length")
    assert packed["token_ids"].numpy().tolist() == want["input_ids"]
    ids = tok.encoder_ids(CORPUS)
    assert [t.decode() for t in tok.detokenize(ids).numpy()] == [
        ref.decode(i, skip_special_tokens=True) for i in ids.to_list()]


def test_text_to_text_equals_transformers(folder):
    ref, root, lm = folder
    tok = transformers.BartTokenizer.from_pretrained(root / "lm")
    texts = ["The cat sat on the mat.", "A longer text, for the padding of the other."]
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = ref.generate(**enc, max_new_tokens=12, do_sample=False)
    want = tok.batch_decode(out, skip_special_tokens=True)
    assert lm.generate(texts, max_new_tokens=12) == want
    with pytest.raises(ValueError, match=r"input #1 has \d+ tokens; the model's encoder "
                                         "reads at most 64"):
        lm.generate(["short", "word " * 200], max_new_tokens=4)


def test_save_round_trip_and_transformers_layout(folder, tmp_path):
    _, _, source = folder
    lm = kbert.BartSeq2SeqLM(source.config)
    lm.set_weights(source.get_weights())
    lm.tokenizer = source.tokenizer
    rng = np.random.default_rng(0)
    for v in lm.weights:  # changed in kbert: the mapping is tested, not a copy of files
        v.assign(v.numpy() + rng.normal(0, 0.01, v.shape).astype("float32"))
    lm.save_pretrained(tmp_path / "kbert")
    again = kbert.BartSeq2SeqLM.from_pretrained(tmp_path / "kbert")
    assert json.loads((tmp_path / "kbert" / "config.json").read_text())["kbert_model"] == "bart"
    for a, b in zip(lm.weights, again.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    lm.save_pretrained(tmp_path / "hf", format="huggingface")
    loaded, info = transformers.BartForConditionalGeneration.from_pretrained(
        tmp_path / "hf", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    enc, enc_mask, dec, dec_mask = _batch()
    want = _logits(loaded.eval(), enc, enc_mask, dec, dec_mask)
    real = dec_mask.astype(bool)
    np.testing.assert_allclose(_ours(lm, enc, enc_mask, dec, dec_mask)[real], want[real],
                               atol=2e-5 * np.abs(want).max(), rtol=0)
    assert transformers.BartTokenizer.from_pretrained(tmp_path / "hf")("a b")["input_ids"] \
        == lm.tokenizer.encoder_ids(["a b"]).to_list()[0]


def test_glue_head_equals_bart_for_sequence_classification(folder):
    """The family's GLUE head is `BartForSequenceClassification`'s: the input into the
    encoder and, shifted right, the decoder; `BartClassificationHead` on the decoder's
    state at the final `</s>`. With kbert's head weights copied into transformers' model
    (built on the same folder), the logits agree on a padded batch of pairs."""
    from kbert.tasks.glue import get_task

    _, root, lm = folder
    model = registry.get_family("bart").hook("glue_model")(lm, get_task("mnli"), None, {})
    head = model.get_layer("classifier")
    ref = transformers.BartForSequenceClassification.from_pretrained(
        root / "lm", num_labels=3).eval()
    with torch.no_grad():
        for mine, theirs in ((head.dense, ref.classification_head.dense),
                             (head.out_proj, ref.classification_head.out_proj)):
            theirs.weight.copy_(torch.tensor(mine.kernel.numpy().T))
            theirs.bias.copy_(torch.tensor(mine.bias.numpy()))
    x = lm.tokenizer(["The cat sat.", "héllo 😀", "a"],
                     ["A cat was sitting on the mat today.", "there", "b c d"], seq_length=20)
    ids, mask = x["token_ids"].numpy(), x["padding_mask"].numpy()
    assert len(set(mask.sum(1))) == 3  # padded differently
    with torch.no_grad():
        want = ref(input_ids=torch.tensor(ids, dtype=torch.long),
                   attention_mask=torch.tensor(mask)).logits.numpy()
    got = model({"token_ids": ids, "padding_mask": mask})["logits"].numpy()
    np.testing.assert_allclose(got, want, atol=1e-4 * np.abs(want).max(), rtol=0)


@pytest.mark.e2e
@pytest.mark.subprocess
def test_glue_command_and_classifier_export_from_a_bart_folder(folder, tmp_path):
    """`python -m kbert.tasks.glue --init_from <bart folder>` on MRPC files (GLUE's own,
    byte-order mark included) with its classifier export: the task folder reloads, and
    the SavedModel, run by TF Serving's C++ loader in a fresh process, answers the
    reloaded model's probabilities."""
    from glue_fixtures import PAIR_REQUEST, assert_pair_export_serves_the_folder, write_task

    from kbert.export.check import keep_served
    from kbert.tasks.glue import __main__ as cli

    _, root, _ = folder
    data = write_task(str(tmp_path), "mrpc", {"train.tsv": 24, "dev.tsv": 8, "test.tsv": 4})
    out, export = tmp_path / "out", tmp_path / "serving" / "mrpc" / "1"
    with keep_served(also=[PAIR_REQUEST]):  # the check's request in the export's load
        assert cli.main(["--task", "mrpc", "--init_from", str(root / "lm"), "--data_dir", data,
                         "--output_dir", str(out), "--max_seq_length", "24",
                         "--num_train_epochs", "1", "--train_batch_size", "8",
                         "--learning_rate", "1e-4", "--export_dir", str(export)]) == 0
        results = json.loads((out / "eval_results.json").read_text())
        assert set(results) >= {"eval_accuracy", "eval_f1"} and 0 <= results["eval_accuracy"] <= 1
        assert json.loads((out / "kbert_task.json").read_text())["family"] == "bart"
        assert_pair_export_serves_the_folder(out, export, 24)


# ------------------------------------------------------------------ denoising
def test_text_infilling_and_sentence_permutation():
    from kbert.models.bart.pretraining import denoising_example, infill

    tokens = np.arange(10, 1010, dtype=np.int32)
    rng = np.random.default_rng(0)
    out = infill(tokens, rng, mask_id=4, vocab_size=5000, random_ratio=0.0)
    kept = out[out != 4]
    assert np.all(np.diff(kept) > 0)  # the unmasked tokens, in order
    removed = len(tokens) - len(kept)
    assert 0.25 * len(tokens) <= removed <= 0.3 * len(tokens) + 1  # spans may overlap
    masks = int(np.sum(out == 4))
    # 0.3 n / lambda = 100 spans drawn; overlapping ones merge, adjacent ones keep a
    # mask each, as fairseq's (75 masks here, 4 of them beside another;
    # tests/test_bart_noise.py compares the distributions with fairseq's)
    assert 45 < masks <= 110
    assert 0 < np.sum((out[1:] == 4) & (out[:-1] == 4)) < 0.1 * masks
    same = infill(tokens, np.random.default_rng(0), mask_id=4, vocab_size=5000,
                  random_ratio=0.0)
    assert np.array_equal(out, same)
    swapped = infill(tokens, np.random.default_rng(0), 4, 5000, random_ratio=1.0)
    assert not np.any(swapped == 4) and len(swapped) == len(out)

    class Tok:
        cls_id, sep_id, mask_id, vocab_size = 0, 2, 4, 5000

    sentences = [np.arange(100 * k, 100 * k + 5, dtype=np.int32) for k in range(1, 6)]
    source, target = denoising_example(sentences, np.random.default_rng(1), Tok,
                                       mask_ratio=0.0)
    assert target.tolist() == [0, *np.concatenate(sentences).tolist(), 2]
    assert sorted(source.tolist()) == sorted(target.tolist())
    assert source.tolist() != target.tolist()  # permuted


@pytest.mark.e2e
def test_pretrain_command_denoising_on_the_bundled_corpus(tmp_path):
    """`python -m kbert.tasks.pretrain --model bart` from scratch on the bundled corpus
    with a byte-level BPE of 600 tokens trained on it (`tokenizers`): 200 steps of a
    2 x 64 model, batch 16 x 64. Untrained, the loss is about ln(600) = 6.4; in runs here
    1.34 (perplexity 3.8) after 200 steps, with oneDNN on or off (1.10 with the noise
    before it followed fairseq's)."""
    from kbert.tasks.pretrain import __main__ as cli
    from kbert.tasks.pretrain.corpus import write_corpus

    write_corpus(str(tmp_path / "text.txt"), 1000)
    tok = _bpe_folder(tmp_path, 600)
    assert (tok.cls_id, tok.pad_id, tok.sep_id, tok.unk_id, tok.mask_id) == (0, 1, 2, 3, 4)
    out = tmp_path / "out"
    assert cli.main(["--model", "bart", "--init_from", str(tmp_path / "bart"),
                     "--from_scratch", "--preset", "demo", "--output_dir", str(out),
                     "--corpus_paragraphs", "1000", "--max_seq_length", "64",
                     "--num_train_steps", "200", "--num_warmup_steps", "30",
                     "--learning_rate", "3e-3", "--steps_per_loop", "100",
                     "--train_batch_size", "16"]) == 0
    results = json.loads((out / "train_results.json").read_text())
    assert results["loss"] < 1.6 and results["perplexity"] < 5, results
    again = kbert.BartSeq2SeqLM.from_pretrained(out / "model")
    assert again.config.hidden_size == 64 and again.tokenizer.vocab_size == 600


TEXTS = ["The cat sat on the mat.", "", "héllo 😀 世界"]
PER_ROW = {"prompt": [TEXTS[0], TEXTS[2]], "max_new_tokens": [4, 6],
           "temperature": [0.0, 0.0], "top_k": [0, 0], "top_p": [1.0, 1.0],
           "seed": [-1, -1], "repetition_penalty": [1.0, 1.0],
           "no_repeat_ngram_size": [0, 0], "min_new_tokens": [0, 0], "num_beams": [1, 1]}


@pytest.fixture(scope="module")
def generate_export(folder, tmp_path_factory):
    """BART's `generate` SavedModel (max_new_tokens 8, repetition_penalty 1.5, TF
    Serving 2.12's ops) of the folder's model with `forced_eos_token_id` 2 (as
    facebook/bart-large-cnn's config has it): (model, export dir, `check`'s verdict, the
    C++ loader's answers to TEXTS (`serving_default`) and PER_ROW (`generate`), both in
    the exporter's own load, and to the hostile requests of tests/generate_requests.py
    (`SEQ2SEQ_CASES`: {case: answers}))."""
    import dataclasses

    from kbert.export import check as check_lib

    _, root, _ = folder
    lm = kbert.BartSeq2SeqLM.from_pretrained(root / "lm")
    lm.config = dataclasses.replace(lm.config, forced_eos_token_id=2)
    export_dir = str(tmp_path_factory.mktemp("generate") / "serving" / "bart" / "1")
    requests, names = [{"prompt": TEXTS}, PER_ROW], ["serving_default", "generate"]
    cases = hostile.SEQ2SEQ_CASES
    with check_lib.keep_served(also=list(zip(names, requests)) + hostile.also(cases)):
        kbert.export.export_generate(lm, lm.tokenizer, export_dir, max_new_tokens=8,
                                     repetition_penalty=1.5, serving_version="2.12")
        # The warmup requests of both signatures in both loaders, in fresh processes
        # with nothing of kbert, Keras or torch imported.
        checked = check_lib.check(export_dir, "2.12")
        served = check_lib.served_results(export_dir, requests, names)
        answers = hostile.answers(export_dir, cases)
    return lm, export_dir, checked, served, answers


@pytest.mark.e2e
@pytest.mark.subprocess
def test_generate_export_answers_as_the_model_through_the_servers_loader(generate_export):
    """BART's `generate` SavedModel: ops of TF Serving 2.12, warmup requests through both
    loaders, and TF Serving's C++ loader answers what `generate` answers (the
    per-request signature too)."""
    lm, _, checked, (served, _), _ = generate_export
    assert checked
    assert served["text"]["value"] == lm.generate(
        TEXTS, max_new_tokens=8, repetition_penalty=1.5)


@pytest.mark.subprocess
def test_generate_export_forces_the_end_token(generate_export):
    """With `forced_eos_token_id`, both signatures of the `generate` export end a row
    cut by its budget with `</s>`: `num_tokens` (tokens before the end) and the text are
    those of `generate` with the same budget, per row."""
    lm, _, _, (served, per_row), _ = generate_export
    want = [lm.generate([t], max_new_tokens=n, return_scores=True)[0]
            for t, n in zip(PER_ROW["prompt"], (4, 6))]
    assert [len(w["token_ids"]) for w in want] == [3, 5]  # the last step's </s> forced
    assert per_row["num_tokens"]["value"] == [3, 5]
    assert per_row["text"]["value"] == [w["text"] for w in want]
    # serving_default (the export's settings: 8 new tokens, repetition_penalty 1.5)
    want = lm.generate(TEXTS, max_new_tokens=8, repetition_penalty=1.5, return_scores=True)
    assert 7 in [len(w["token_ids"]) for w in want]  # a row the budget cut, </s> forced
    assert served["text"]["value"] == [w["text"] for w in want]


@pytest.mark.subprocess
def test_generate_export_gives_empty_batches_empty_outputs(generate_export):
    """Hostile requests (#49): an empty batch in both signatures."""
    hostile.check_empty_batches(generate_export[4]["empty"])


@pytest.mark.subprocess
def test_generate_export_reads_the_text_after_a_nul_byte(generate_export):
    """Hostile requests (#49): the text after a NUL byte reaches the encoder."""
    hostile.check_nul_byte(generate_export[4]["nul"])


@pytest.mark.e2e
@pytest.mark.subprocess
def test_beam_export_compiled_with_xla_answers_as_generate(folder, tmp_path):
    """#51: a beam-search `generate` export with `jit_compile=True` (its beam loop
    compiled with XLA inside the SavedModel; TF Serving runs it with
    --xla_cpu_compilation_enabled) answers as `generate` in Python with the same
    settings (the plain graph; its beams equal transformers', above), through TF
    Serving's C++ loader (the exporter's own load), `serving_default` and `token_ids`:
    the same texts, ids and token counts. Beam 3, a length penalty, no repeated bigram
    and a minimum length: the processors run in the compiled loop too."""
    from kbert.export import check as check_lib

    lm = folder[2]
    settings = dict(sampler="beam", num_beams=3, max_new_tokens=8, length_penalty=1.3,
                    no_repeat_ngram_size=2, min_new_tokens=2)
    prompts = TEXTS + ["a b a b a b"]
    ids = lm.tokenizer.encoder_ids(prompts).to_list()  # what serving_default encodes
    width = max(map(len, ids))
    request = {"token_ids": [r + [1] * (width - len(r)) for r in ids],
               "padding_mask": [[1] * len(r) + [0] * (width - len(r)) for r in ids]}
    export_dir = str(tmp_path / "serving" / "bart" / "1")
    with check_lib.keep_served(also=[("serving_default", {"prompt": prompts}),
                                     ("token_ids", request)]):
        kbert.export.export_generate(lm, lm.tokenizer, export_dir, jit_compile=True,
                                     **settings)
        texts = check_lib.served_results(export_dir, [{"prompt": prompts}])[0]["text"]
        by_ids = check_lib.served_results(export_dir, [request], "token_ids")[0]
    assert check_lib.ops_lib.needs_xla(export_dir)
    want = lm.generate(prompts, return_scores=True, **settings)
    assert texts["value"] == [w["text"] for w in want]
    assert any(texts["value"])  # not only empty texts
    assert by_ids["num_tokens"]["value"] == [len(w["token_ids"]) for w in want]
    got = np.reshape(by_ids["token_ids"]["value"], by_ids["token_ids"]["shape"])
    assert [row[:len(w["token_ids"])].tolist() for row, w in zip(got, want)] == [
        list(w["token_ids"]) for w in want]


def test_pretrain_from_a_folder_reads_its_weights_once(tmp_path, caplog):
    """#50: `pretrain --model bart --init_from FOLDER` (no --from_scratch) read the folder's
    weights twice (the recipe's look at its config and tokenizer, then the run's model):
    "Loaded BartSeq2SeqLM" was logged twice."""
    from kbert.tasks.pretrain import __main__ as cli
    from kbert.tasks.pretrain.corpus import write_corpus

    write_corpus(str(tmp_path / "text.txt"), 200)
    _bpe_folder(tmp_path, 300)
    with caplog.at_level("INFO"):
        assert cli.main(["--model", "bart", "--init_from", str(tmp_path / "bart"),
                         "--output_dir", str(tmp_path / "out"), "--corpus_paragraphs", "200",
                         "--max_seq_length", "32", "--num_train_steps", "2",
                         "--num_warmup_steps", "1", "--steps_per_loop", "2",
                         "--train_batch_size", "4"]) == 0
    assert caplog.text.count("Loaded BartSeq2SeqLM") == 1, caplog.text


def _bpe_folder(tmp_path, vocab_size: int):
    """TMP/bart: a byte-level BPE of `vocab_size` trained on TMP/text.txt (`tokenizers`,
    fairseq's special ids) and an untrained tiny BART over it; returns the tokenizer."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train([str(tmp_path / "text.txt")], vocab_size=vocab_size, min_frequency=2,
              special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    (tmp_path / "bart").mkdir()
    bpe.save_model(str(tmp_path / "bart"))
    tok = kbert.BartTokenizer.from_pretrained(tmp_path / "bart")
    kbert.BartSeq2SeqLM(kbert.BartConfig.preset("tiny", vocab_size=tok.vocab_size)
                        ).save_pretrained(tmp_path / "bart", tokenizer=tok)
    return tok


@pytest.fixture(scope="module")
def qa_folder(tmp_path_factory):
    """transformers' `BartForQuestionAnswering` (random, the module's reference BART's
    weights and a random `qa_outputs`), written by it with the BPE files."""
    root = tmp_path_factory.mktemp("bart_qa")
    ref = _reference()
    torch.manual_seed(1)
    qa = transformers.BartForQuestionAnswering(ref.config).eval()
    qa.model.load_state_dict(ref.model.state_dict())
    qa.save_pretrained(root)
    _write_vocab(root, lstrip_mask=True)
    return qa, root


def test_squad_head_equals_bart_for_question_answering(qa_folder):
    """The SQuAD model of a `BartForQuestionAnswering` folder (the `squad_model` hook:
    the decoder's top states, `qa_outputs` loaded from the folder) gives its start and
    end logits on right-padded question-context pairs (<= 1e-4); the folder's
    BartSeq2SeqLM loads without the head."""
    from kbert.models.bart.hooks import squad_model

    qa, root = qa_folder
    tok = kbert.BartTokenizer.from_pretrained(root)
    x = tok(["Who sat?", "Where is the mat and the cat?"],
            ["The cat sat on the mat.", "On the floor, by the door."], seq_length=24)
    lm = kbert.BartSeq2SeqLM.from_pretrained(root)
    model = squad_model(lm, str(root))
    got = model({k: x[k] for k in ("token_ids", "padding_mask")})
    with torch.no_grad():
        want = qa(input_ids=torch.tensor(x["token_ids"].numpy(), dtype=torch.long),
                  attention_mask=torch.tensor(x["padding_mask"].numpy(), dtype=torch.long))
    mask = x["padding_mask"].numpy().astype(bool)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(np.asarray(got[name])[mask],
                                   getattr(want, name).numpy()[mask], atol=1e-4)
    assert len({round(float(v), 3) for v in np.asarray(got["start_logits"])[mask]}) > 5


@pytest.mark.e2e
def test_squad_command_from_a_bart_question_answering_folder(qa_folder, tmp_path):
    """`python -m kbert.tasks.squad --init_from <BartForQuestionAnswering folder>` on the
    bundled sample: BART's (RoBERTa's) windows, the head on the decoder, answers that are
    substrings of their contexts, the task folder reloads to the same logits, and the
    export the command checks through TF Serving's C++ loader."""
    from kbert.export.folder import load_task_folder
    from kbert.tasks.squad import __main__ as squad_cli

    _, root = qa_folder
    out = tmp_path / "out"
    assert squad_cli.main(["--init_from", str(root), "--output_dir", str(out),
                           "--sample_paragraphs", "12", "--num_train_epochs", "1",
                           "--max_seq_length", "48", "--doc_stride", "24",
                           "--steps_per_loop", "5", "--learning_rate", "1e-4"]) == 0
    assert_sample_squad_run(out, "bart")
    # encoder/ holds the fine-tuned BART: with the task folder's head it is the model
    from kbert.models.bart.hooks import squad_model

    _, model, tok, _ = load_task_folder(str(out))
    again = squad_model(kbert.BartSeq2SeqLM.from_pretrained(out / "encoder"))
    again.get_layer("qa_outputs").set_weights(model.get_layer("qa_outputs").get_weights())
    x = tok(["Who?"], ["Someone sat."], seq_length=16)
    x = {k: x[k] for k in ("token_ids", "padding_mask")}
    np.testing.assert_allclose(np.asarray(again(x)["start_logits"]),
                               np.asarray(model(x)["start_logits"]), atol=1e-6)
    before = squad_model(kbert.BartSeq2SeqLM.from_pretrained(root), str(root))
    assert not np.allclose(np.asarray(before(x)["start_logits"]),
                           np.asarray(model(x)["start_logits"]), atol=1e-4)  # it trained


@pytest.mark.e2e
def test_ner_command_and_export_from_a_bart_folder(folder, tmp_path):
    """`python -m kbert.tasks.ner --init_from <BART folder>`: a token head on the
    decoder's top states (the BART paper's token classification), fine-tuned with the
    model on CoNLL files (-DOCSTART- lines included); its `ner` export answers through
    TF Serving's C++ loader with the Python prediction's entities; `--mode feature` is
    refused in one line."""
    from ner_fixtures import make_sentences, write_conll

    from kbert.export.check import keep_served, served_results
    from kbert.export.folder import load_task_folder
    from kbert.tasks.ner import __main__ as ner_cli
    from kbert.tasks.ner.predict import predict_entities

    _, root, _ = folder
    train = write_conll(str(tmp_path / "eng.train"), make_sentences(60, seed=0))
    dev = write_conll(str(tmp_path / "eng.testa"), make_sentences(12, seed=1))
    out, export = tmp_path / "out", tmp_path / "serving" / "ner" / "1"
    texts = ["Peter Blackburn visited Paris and   Berlin", "naïve 😀 EU rejects it", ""]
    flags = ["--init_from", str(root / "lm"), "--train_file", train, "--dev_file", dev,
             "--max_seq_length", "24", "--num_train_epochs", "1", "--train_batch_size", "16"]
    with keep_served(also=[{"text": texts}]):  # answered in the exporter's own C++ load
        assert ner_cli.main([*flags, "--output_dir", str(out), "--learning_rate", "1e-3",
                             "--export_dir", str(export)]) == 0
        result = served_results(str(export), [{"text": texts}])[0]
    assert "eval_f1" in json.loads((out / "eval_results.json").read_text())
    _, model, tokenizer, settings = load_task_folder(str(out))
    assert model.name == "bart_ner_finetune" and model.get_layer("logits") is not None
    expected = predict_entities(model, tokenizer, texts, settings["labels"], 24)
    assert result["num_entities"]["value"] == [len(e) for e in expected]
    k = result["entity_text"]["shape"][1]
    for b, (text, entities) in enumerate(zip(texts, expected)):
        row = slice(b * k, (b + 1) * k)
        got = list(zip(result["entity_text"]["value"][row], result["start_char"]["value"][row],
                       result["end_char"]["value"][row]))[:len(entities)]
        assert got == [(e.text, e.start_char, e.end_char) for e in entities]
    with pytest.raises(SystemExit, match="--mode feature: a bart model is fine-tuned whole"):
        ner_cli.main([*flags, "--output_dir", str(tmp_path / "f"), "--mode", "feature"])


def test_a_source_encoder_goes_in_front_of_a_bart_folder_and_saves_as_kbert_only(
        folder, tmp_path):
    """BART's translation mode's model (`source_encoder_layers`): a Hugging Face BART
    folder loads around a new encoder (BART's weights as in the folder, the new ones at
    random), the source's vectors are the new encoder's, greedy generation (the cached
    loop) picks what the teacher-forced graph's argmax picks, a kbert folder holds it
    all, and the Hugging Face layout, which has no such model, is refused."""
    from kbert.models.bart.checkpoints import variable_map

    _, root, plain = folder
    lm = kbert.BartSeq2SeqLM.from_pretrained(root / "lm", source_encoder_layers=2,
                                             dropout=0.0)
    ours = {name: var.numpy() for name, (var, _) in variable_map(lm).items()}
    theirs = {name: var.numpy() for name, (var, _) in variable_map(plain).items()}
    assert set(ours) - set(theirs) == {n for n in ours if n.startswith("source_encoder.")}
    assert "source_encoder.layers.1.fc2.weight" in ours
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)
    enc, enc_mask, dec, dec_mask = _batch()
    vectors = lm.source_encoder.stack(lm.source_encoder.token_embedding(enc), enc_mask)
    np.testing.assert_allclose(lm.embed_source(enc, enc_mask).numpy(), vectors.numpy())
    assert not np.allclose(_ours(lm, enc, enc_mask, dec, dec_mask),
                           _ours(plain, enc, enc_mask, dec, dec_mask), atol=1e-3)

    ids = lm.generate_ids(enc, enc_mask, max_new_tokens=5, jit_compile=False).numpy()
    forced = np.concatenate([np.full((3, 1), lm.config.decoder_start_token_id), ids[:, :-1]],
                            axis=1).astype("int32")
    picked = _ours(lm, enc, enc_mask, forced, np.ones_like(forced)).argmax(-1)
    np.testing.assert_array_equal(picked, ids)

    lm.save_pretrained(tmp_path / "kbert")
    again = kbert.BartSeq2SeqLM.from_pretrained(tmp_path / "kbert")
    assert again.config.source_encoder_layers == 2
    np.testing.assert_array_equal(_ours(again, enc, enc_mask, dec, dec_mask),
                                  _ours(lm, enc, enc_mask, dec, dec_mask))
    with pytest.raises(ValueError, match="no Hugging Face model has one"):
        lm.save_pretrained(tmp_path / "hf", format="huggingface")
    with pytest.raises(ValueError, match="source_encoder_layers=-1 is negative"):
        kbert.BartConfig.preset("tiny", source_encoder_layers=-1)
