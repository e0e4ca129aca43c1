"""T5 (#32): `kbert.T5Seq2SeqLM` and `kbert.T5Tokenizer` against the references they
must equal, run here: `transformers`' `T5ForConditionalGeneration` (5.x, PyTorch) on
random-weight folders it writes (T5.1.0's tied, scaled output layer; v1.1's gated GELU
and its own `lm_head`), its `generate` (greedy, processors, beam search) and its
`T5Tokenizer`, and the `sentencepiece` library on a model it trains here."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import torch
import transformers

import kbert
from kbert.models import registry

pytestmark = pytest.mark.parity

CORPUS = ["The quick brown fox jumps over the lazy dog.",
          "Studies have shown that owning a dog is good for you!",
          "translate English to German: That is good.",
          "Ünïcödé text, numbers 12345 and   spaces.",
          "summarize: the cat sat on the mat; the dog sat on the log."]
PIECES = 64  # the SentencePiece model's size; + 100 sentinels


@pytest.fixture(scope="module")
def spiece(tmp_path_factory):
    """A SentencePiece unigram model trained here with T5's special ids (<pad> 0,
    </s> 1, <unk> 2, no <s>), as T5's spiece.model has them."""
    import sentencepiece

    folder = tmp_path_factory.mktemp("spiece")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 40), model_prefix=str(folder / "spiece"),
        vocab_size=PIECES, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, model_type="unigram",
        character_coverage=1.0, minloglevel=2)
    return folder / "spiece.model"


def _reference(tied: bool, **overrides):
    """A random `T5ForConditionalGeneration`: T5.1.0 (relu, tied and scaled) or v1.1
    (gated GELU, 3 decoder layers over 2 encoder layers)."""
    values = dict(vocab_size=PIECES + 100, d_model=32, d_kv=8, d_ff=48, num_layers=2,
                  num_decoder_layers=2 if tied else 3, num_heads=4, dropout_rate=0.0,
                  feed_forward_proj="relu" if tied else "gated-gelu",
                  tie_word_embeddings=tied, decoder_start_token_id=0,
                  relative_attention_num_buckets=8, relative_attention_max_distance=20)
    values.update(overrides)
    torch.manual_seed(0)
    return transformers.T5ForConditionalGeneration(transformers.T5Config(**values)).eval()


def _write(model, folder, spiece=None, untie=False):
    """The reference's folder; `untie`: a v1.1 file with an `lm_head.weight` of its
    own (transformers 5.x writes none: it ties; it reads one that differs untied)."""
    model.save_pretrained(folder)
    if untie:
        from safetensors.torch import load_file, save_file

        file = os.path.join(folder, "model.safetensors")
        tensors = load_file(file)
        torch.manual_seed(1)
        tensors["lm_head.weight"] = torch.randn_like(tensors["shared.weight"])
        save_file(tensors, file, metadata={"format": "pt"})
        config = json.loads((folder / "config.json").read_text())
        config["tie_word_embeddings"] = False
        config.pop("scale_decoder_outputs", None)  # a transformers 4.x config, as v1.1's
        (folder / "config.json").write_text(json.dumps(config))
        model = transformers.T5ForConditionalGeneration.from_pretrained(folder).eval()
        assert model.lm_head.weight is not model.shared.weight
    if spiece is not None:
        (folder / "spiece.model").write_bytes(spiece.read_bytes())
    return model


def _batch(seed=0, vocab=PIECES + 100):
    rng = np.random.default_rng(seed)
    enc = rng.integers(3, vocab, (3, 9)).astype("int32")
    enc_mask = np.ones_like(enc)
    enc_mask[1, 6:] = 0
    enc_mask[2, 3:] = 0
    dec = rng.integers(3, vocab, (3, 6)).astype("int32")
    dec_mask = np.ones_like(dec)
    dec_mask[2, 4:] = 0
    return enc, enc_mask, dec, dec_mask


def _logits(model, enc, enc_mask, dec, dec_mask):
    with torch.no_grad():
        return model(input_ids=torch.tensor(enc, dtype=torch.long),
                     attention_mask=torch.tensor(enc_mask),
                     decoder_input_ids=torch.tensor(dec, dtype=torch.long),
                     decoder_attention_mask=torch.tensor(dec_mask)).logits.numpy()


@pytest.mark.parametrize("tied", [True, False], ids=["t5.1.0", "v1.1"])
def test_logits_equal_transformers(tmp_path, tied):
    ref = _write(_reference(tied), tmp_path, untie=not tied)
    lm = kbert.T5Seq2SeqLM.from_pretrained(tmp_path)
    assert registry.family_of_folder(tmp_path).name == "t5"
    assert (lm.lm_head is None) == tied and lm.config.scale_decoder_outputs == tied
    assert lm.config.gated == (not tied) and lm.config.num_decoder_layers == (2 if tied else 3)
    enc, enc_mask, dec, dec_mask = _batch()
    want = _logits(ref, enc, enc_mask, dec, dec_mask)
    got = lm({"encoder_token_ids": enc, "encoder_padding_mask": enc_mask,
              "decoder_token_ids": dec, "decoder_padding_mask": dec_mask})["logits"].numpy()
    real = dec_mask.astype(bool)  # padded decoder positions are not compared
    np.testing.assert_allclose(got[real], want[real], atol=2e-5 * np.abs(want).max(), rtol=0)


def test_shift_right_equals_transformers(tmp_path):
    ref = _reference(True)
    lm = kbert.T5Seq2SeqLM(kbert.T5Config.preset("tiny", vocab_size=PIECES + 100))
    labels = np.array([[5, 6, 7, 1], [8, 1, -100, -100]])
    want = ref._shift_right(torch.tensor(labels)).numpy()
    np.testing.assert_array_equal(lm.shift_right(labels).numpy(), want)


@pytest.fixture(scope="module")
def diverse(tmp_path_factory, spiece):
    """A tied T5 with the gated GELU whose greedy continuations do not repeat one token
    (weights drawn at twice T5's scale: at T5's, a random model repeats its first
    token), its folder with the tokenizer, and the kbert model."""
    folder = tmp_path_factory.mktemp("t5")
    ref = _write(_reference(True, initializer_factor=2.0, feed_forward_proj="gated-gelu",
                            num_layers=3, num_decoder_layers=3), folder, spiece)
    return ref, folder, kbert.T5Seq2SeqLM.from_pretrained(folder)


def _generate(ref, enc, enc_mask, new, **options):
    with torch.no_grad():
        out = ref.generate(input_ids=torch.tensor(enc, dtype=torch.long),
                           attention_mask=torch.tensor(enc_mask), max_new_tokens=new,
                           min_new_tokens=new, **options)
    return out.numpy()[:, 1:]  # after the decoder's start token


@pytest.mark.parametrize("jit_compile", [True, False], ids=["xla", "graph"])
def test_greedy_and_processors_equal_transformers(diverse, jit_compile):
    ref, _, lm = diverse
    enc, enc_mask, _, _ = _batch(seed=3)
    want = _generate(ref, enc, enc_mask, 10, do_sample=False)
    assert len({tuple(np.unique(row)) for row in want}) == 3 and len(np.unique(want)) > 6
    got = lm.generate_ids(enc, enc_mask, 10, min_new_tokens=10, jit_compile=jit_compile)
    np.testing.assert_array_equal(got.numpy(), want)
    want = _generate(ref, enc, enc_mask, 10, do_sample=False, repetition_penalty=1.5,
                     no_repeat_ngram_size=2)
    got = lm.generate_ids(enc, enc_mask, 10, min_new_tokens=10, jit_compile=jit_compile,
                          repetition_penalty=1.5, no_repeat_ngram_size=2)
    np.testing.assert_array_equal(got.numpy(), want)


def test_beam_search_equals_transformers(diverse):
    ref, _, lm = diverse
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
        assert got["token_ids"][r, :n].tolist() == [t for t in want[r] if t not in (0, 1)][:n]
    np.testing.assert_allclose(got["scores"], out.sequences_scores.numpy(), atol=1e-4)


def test_tokenizer_equals_transformers_and_sentencepiece(spiece):
    import sentencepiece

    folder = spiece.parent
    tok = kbert.T5Tokenizer.from_pretrained(folder)
    ref = transformers.T5Tokenizer.from_pretrained(folder)
    sp = sentencepiece.SentencePieceProcessor(model_file=str(spiece))
    assert tok.vocab_size == len(ref) == PIECES + 100
    assert tok.sentinel_id(0) == ref.convert_tokens_to_ids("<extra_id_0>") == PIECES + 99
    texts = ["The quick brown fox.", "Hello <extra_id_0> world<extra_id_1>!",
             "  leading and trailing  ", "", "a</s>b <pad> c <unk>",
             "<extra_id_99> <extra_id_100> x", "Ünïcödé 12345", "zzz qqq 日本"]
    keras.utils.set_random_seed(5)  # clears TensorFlow's eager kernels: tf-text's
    got = tok.tokenize(texts).to_list()  # SentencePiece model went with them (see _run)
    for text, ids in zip(texts, got):
        assert ids == ref(text, add_special_tokens=False)["input_ids"], text
        if "<" not in text:  # no special token written: sentencepiece's own encoding
            assert ids == sp.encode(text), text
    packed = tok(texts, seq_length=12)
    want = ref(texts, max_length=12, truncation=True, padding="max_length")
    assert packed["token_ids"].numpy().tolist() == want["input_ids"]
    assert packed["padding_mask"].numpy().tolist() == want["attention_mask"]
    plain = [t for t in texts if "<" not in t]
    ids = tok.tokenize(plain)
    assert [s.decode() for s in tok.detokenize(ids).numpy()] == [
        ref.decode(i, skip_special_tokens=True) for i in ids.to_list()]


def test_text_to_text_equals_transformers(diverse):
    ref, folder, lm = diverse
    tok = transformers.T5Tokenizer.from_pretrained(folder)
    texts = ["summarize: the cat sat on the mat.", "translate English to German: good"]
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = ref.generate(**enc, max_new_tokens=12, do_sample=False)
    want = tok.batch_decode(out, skip_special_tokens=True)
    assert lm.generate(texts, max_new_tokens=12) == want
    assert lm.generate(texts[0], max_new_tokens=12) == want[0]


def test_save_round_trip_and_transformers_layout(spiece, tmp_path):
    _write(_reference(False), tmp_path / "ref", spiece, untie=True)  # v1.1: own lm_head
    lm = kbert.T5Seq2SeqLM.from_pretrained(tmp_path / "ref")
    rng = np.random.default_rng(0)
    for v in lm.weights:  # changed in kbert: the mapping is tested, not a copy of files
        v.assign(v.numpy() + rng.normal(0, 0.01, v.shape).astype("float32"))
    lm.save_pretrained(tmp_path / "kbert")
    again = kbert.T5Seq2SeqLM.from_pretrained(tmp_path / "kbert")
    assert json.loads((tmp_path / "kbert" / "config.json").read_text())["kbert_model"] == "t5"
    assert again.tokenizer is not None and again.lm_head is not None
    for a, b in zip(lm.weights, again.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    lm.save_pretrained(tmp_path / "hf", format="huggingface")
    loaded, info = transformers.T5ForConditionalGeneration.from_pretrained(
        tmp_path / "hf", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert loaded.lm_head.weight is not loaded.shared.weight
    enc, enc_mask, dec, dec_mask = _batch()
    want = _logits(loaded.eval(), enc, enc_mask, dec, dec_mask)
    got = lm({"encoder_token_ids": enc, "encoder_padding_mask": enc_mask,
              "decoder_token_ids": dec, "decoder_padding_mask": dec_mask})["logits"]
    real = dec_mask.astype(bool)
    np.testing.assert_allclose(got.numpy()[real], want[real],
                               atol=2e-5 * np.abs(want).max(), rtol=0)
    assert transformers.T5Tokenizer.from_pretrained(tmp_path / "hf").convert_tokens_to_ids(
        "<extra_id_0>") == again.tokenizer.sentinel_id(0)


# ------------------------------------------------------------------ span corruption
def test_span_mask_counts_and_spans_alternate():
    from kbert.models.t5.pretraining import random_spans_noise_mask

    for length, noise, spans in ((100, 15, 5), (512, 77, 26), (7, 1, 1), (1, 0, 0)):
        mask = random_spans_noise_mask(length, [[1, 2], [3, 4]]).numpy()
        assert mask.shape == (length,) and mask.sum() == noise
        runs = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int)])) == 1)
        assert len(runs) == spans and not mask[0]  # a kept span comes first
    first = random_spans_noise_mask(100, [[1, 2], [3, 4]]).numpy()
    assert np.array_equal(first, random_spans_noise_mask(100, [[1, 2], [3, 4]]).numpy())
    assert not np.array_equal(first, random_spans_noise_mask(100, [[5, 2], [3, 4]]).numpy())


def test_sentinels_and_lengths():
    """T5's example layout, and the lengths T5's random_spans_helper gives (568 tokens
    and 114 targets for 512 inputs, 70 and 14 for 64: tools/compare_t5_span_corruption.py
    runs it)."""
    from kbert.models.t5.pretraining import span_corruption_lengths, spans_to_sentinels

    tokens = np.arange(1, 11)
    mask = np.array([0, 0, 1, 1, 0, 0, 0, 1, 0, 0], bool)
    s = 99  # <extra_id_0>; <extra_id_1> is 98
    assert spans_to_sentinels(tokens, mask, s).numpy().tolist() == [1, 2, s, 5, 6, 7, s - 1, 9, 10]
    assert spans_to_sentinels(tokens, ~mask, s).numpy().tolist() == [s, 3, 4, s - 1, 8, s - 2]
    assert span_corruption_lengths(512) == (568, 114)
    assert span_corruption_lengths(64) == (70, 14)


def test_span_corruption_examples_rebuild_the_text(spiece):
    from kbert.models.t5.pretraining import span_corruption_dataset

    tok = kbert.T5Tokenizer.from_pretrained(spiece.parent)
    data = span_corruption_dataset(CORPUS * 3, tok, inputs_length=32, batch_size=2, seed=3)
    stream = np.concatenate([np.array(ids) for ids in tok.tokenize(CORPUS * 3).to_list()])
    rebuilt = []
    for features, labels in data:
        for row in range(2):
            enc = features["encoder_token_ids"][row].numpy()
            enc = enc[features["encoder_padding_mask"][row].numpy() > 0]
            target = labels["logits"][row].numpy()
            target = target[target >= 0]
            assert enc[-1] == target[-1] == tok.end_id
            dec = features["decoder_token_ids"][row].numpy()
            assert dec[0] == 0 and dec[1:len(target)].tolist() == target[:-1].tolist()
            spans, current = {}, None  # sentinel -> the tokens it stands for
            for t in target[:-1]:
                if t >= tok.pieces:
                    current = spans.setdefault(int(t), [])
                else:
                    current.append(int(t))
            for t in enc[:-1]:
                rebuilt.extend(spans.get(int(t), []) if t >= tok.pieces else [int(t)])
            noise = sum(len(v) for v in spans.values())
            assert abs(noise - 0.15 * (noise + sum(enc < tok.pieces) - 1)) <= 1
    assert rebuilt == stream[:len(rebuilt)].tolist() and len(rebuilt) >= 2 * 70


@pytest.mark.e2e
def test_pretrain_command_span_corruption_on_the_bundled_corpus(tmp_path):
    """`python -m kbert.tasks.pretrain --model t5` from scratch on the bundled corpus:
    a SentencePiece model trained on it (400 pieces + 100 sentinels) in a T5 folder,
    300 steps of a 2 x 64 model. Untrained, the loss is about ln(500) = 6.2; in runs
    here 3.18 (perplexity 24) after 300 steps."""
    import sentencepiece

    from kbert.tasks.pretrain import __main__ as cli
    from kbert.tasks.pretrain.corpus import write_corpus

    write_corpus(str(tmp_path / "text.txt"), 1000)
    sentencepiece.SentencePieceTrainer.train(
        input=str(tmp_path / "text.txt"), model_prefix=str(tmp_path / "spiece"),
        vocab_size=400, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, minloglevel=2)
    tok = kbert.T5Tokenizer((tmp_path / "spiece.model").read_bytes())
    kbert.T5Seq2SeqLM(kbert.T5Config.preset("tiny", vocab_size=tok.vocab_size)
                      ).save_pretrained(tmp_path / "t5", tokenizer=tok)
    out = tmp_path / "out"
    assert cli.main(["--model", "t5", "--init_from", str(tmp_path / "t5"), "--from_scratch",
                     "--preset", "demo", "--output_dir", str(out), "--corpus_paragraphs",
                     "1000", "--max_seq_length", "64", "--num_train_steps", "300",
                     "--num_warmup_steps", "30", "--learning_rate", "3e-3",
                     "--steps_per_loop", "100", "--train_batch_size", "16"]) == 0
    results = json.loads((out / "train_results.json").read_text())
    assert results["loss"] < 3.6 and results["perplexity"] < 40, results
    again = kbert.T5Seq2SeqLM.from_pretrained(out / "model")
    assert again.config.hidden_size == 64 and again.tokenizer.vocab_size == 500


@pytest.mark.parametrize("command, flags", [("ner", [])])
def test_task_commands_refuse_t5_with_one_line(spiece, tmp_path, capsys, command, flags):
    """NER as text to text is not built: the command says so before any work (GLUE and
    SQuAD are: tests/test_text_to_text.py)."""
    import importlib

    tok = kbert.T5Tokenizer.from_pretrained(spiece.parent)
    kbert.T5Seq2SeqLM(kbert.T5Config.preset("tiny", vocab_size=tok.vocab_size)
                      ).save_pretrained(tmp_path / "t5", tokenizer=tok)
    csv = tmp_path / "train.csv"
    csv.write_text("sentence,label\ngood,1\nbad,0\n")
    cli = importlib.import_module(f"kbert.tasks.{command}.__main__")
    argv = ["--init_from", str(tmp_path / "t5"), "--output_dir", str(tmp_path / "out"),
            *[f.format(csv=csv) for f in flags]]
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"holds a t5 model: kbert runs {command} on" in err[0], err
    assert not (tmp_path / "out").exists()


GENERATE_TEXTS = ["summarize: the cat sat on the mat.", "Hello <extra_id_0> world", "",
                  "translate English to German: good"]
LONG_TEXT = "the dog " * 300


@pytest.fixture(scope="module")
def generate_export(diverse, tmp_path_factory):
    """`python -m kbert.export --task generate` on the diverse T5's folder (max_new_tokens
    8, TF Serving 2.12's ops): {"dir", "code", "stdout", "stderr", "served": the C++
    loader's answer to GENERATE_TEXTS and LONG_TEXT, "hostile": its answers to the
    hostile requests of tests/generate_requests.py (`SEQ2SEQ_CASES`)}, all in the
    exporter's own load."""
    from kbert.export import check as check_lib
    from kbert.export.__main__ import main as export_main
    from tests import generate_requests as hostile
    from tests.conftest import run_cli

    _, folder, _ = diverse
    export_dir = tmp_path_factory.mktemp("generate") / "serving" / "t5" / "1"
    request = {"prompt": GENERATE_TEXTS + [LONG_TEXT]}
    # The exporter's own load in TF Serving's C++ loader answers `request` too; the
    # command's check takes that load's answers to the warmup requests for its C++ side.
    with check_lib.keep_served(also=[("serving_default", request)]
                               + hostile.also(hostile.SEQ2SEQ_CASES)):
        code, stdout, stderr = run_cli(export_main, [
            "--task", "generate", "--model_dir", folder, "--export_dir", export_dir,
            "--max_new_tokens", "8", "--serving_version", "2.12"])
        out = {"dir": str(export_dir), "code": code, "stdout": stdout, "stderr": stderr}
        if code == 0:
            out["served"] = check_lib.served_results(str(export_dir), [request])
            out["hostile"] = hostile.answers(str(export_dir), hostile.SEQ2SEQ_CASES)
    return out


@pytest.mark.e2e
@pytest.mark.subprocess
def test_generate_export_answers_as_the_model_through_the_servers_loader(diverse,
                                                                        generate_export):
    """The `generate` SavedModel of a T5 folder (`python -m kbert.export --task
    generate`): both loaders run its warmup requests (the command's check), ops are TF
    Serving 2.12's, and TF Serving's C++ loader answers what `generate` answers; an
    input past the tokenizer's 512 tokens keeps its first 511 and `</s>`."""
    from kbert.export.generate_graph import read_settings

    lm = diverse[2]
    assert generate_export["code"] == 0, generate_export["stderr"][-2000:]
    assert read_settings(generate_export["dir"])["max_prompt_tokens"] == 512
    # The command's check: ops of 2.12, the warmup requests of every signature in both
    # loaders (fresh processes, nothing of kbert, Keras or torch imported).
    stdout = generate_export["stdout"]
    assert "OK: " in stdout and "tensorflow_model_server 2.12" in stdout
    got = generate_export["served"][0]["text"]["value"]
    assert got[:4] == lm.generate(GENERATE_TEXTS, max_new_tokens=8)
    ids = lm.tokenizer.encoder_ids([LONG_TEXT]).to_list()[0]
    assert len(ids) > 512
    cut = np.array([ids[:511] + [1]], "int32")
    new = lm.generate_ids(cut, np.ones_like(cut), 8).numpy()[0].tolist()
    new = new[:new.index(1)] if 1 in new else new
    assert got[4] == lm.tokenizer.detokenize([new]).numpy()[0].decode()


@pytest.mark.subprocess
def test_generate_export_gives_empty_batches_empty_outputs(generate_export):
    """Hostile requests (#49): an empty batch in both signatures."""
    from tests import generate_requests as hostile

    assert generate_export["code"] == 0, generate_export["stderr"][-2000:]
    hostile.check_empty_batches(generate_export["hostile"]["empty"])


@pytest.mark.subprocess
def test_generate_export_reads_the_text_after_a_nul_byte(generate_export):
    """Hostile requests (#49): the text after a NUL byte reaches the encoder."""
    from tests import generate_requests as hostile

    assert generate_export["code"] == 0, generate_export["stderr"][-2000:]
    hostile.check_nul_byte(generate_export["hostile"]["nul"])
