"""ELMo's biLM against bilm-tf's equations written out in NumPy below (bilm-tf is TF1
code that does not run on TensorFlow 2): bilm-tf-format folders written by the test
(random weights, odd sizes), stateless and stateful, and the HDF5 round trip."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from kbert.models.elmo import ELMo, ELMoConfig
from kbert.tokenizers.elmo import ELMoCharTokenizer

pytestmark = pytest.mark.parity

VARIANTS = {
    "skip-relu-proj": dict(lstm_dim=10, projection_dim=6, num_layers=2, cell_clip=0.8,
                           proj_clip=0.7, use_skip_connections=True, char_embedding_dim=5,
                           filters=((1, 3), (2, 5), (4, 7)), num_highway=2,
                           max_characters_per_token=9, activation="relu"),
    "noskip-tanh-3layers": dict(lstm_dim=7, projection_dim=7, num_layers=3, cell_clip=None,
                                proj_clip=None, use_skip_connections=False,
                                char_embedding_dim=3, filters=((2, 4), (3, 4)),
                                num_highway=1, max_characters_per_token=7,
                                activation="tanh"),
}


def _write_folder(folder, config: ELMoConfig, seed=0):
    """options.json and a weights.hdf5 of random values under bilm-tf's names."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    (folder / "options.json").write_text(json.dumps(config.to_reference_dict()))
    f, p, d = config.num_filters, config.projection_dim, config.lstm_dim
    out = min(p, d)
    shapes = {"char_embed": (config.num_characters - 1, config.char_embedding_dim)}
    for i, (width, count) in enumerate(config.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, config.char_embedding_dim, count)
        shapes[f"CNN/b_cnn_{i}"] = (count,)
    for k in range(config.num_highway):
        for name, shape in (("W_carry", (f, f)), ("b_carry", (f,)), ("W_transform", (f, f)),
                            ("b_transform", (f,))):
            shapes[f"CNN_high_{k}/{name}"] = shape
    if f != p:
        shapes["CNN_proj/W_proj"], shapes["CNN_proj/b_proj"] = (f, p), (p,)
    for direction in range(2):
        for i in range(config.num_layers):
            root = f"RNN_{direction}/RNN/MultiRNNCell/Cell{i}/LSTMCell"
            shapes[f"{root}/W_0"] = ((p if i == 0 else out) + out, 4 * d)
            shapes[f"{root}/B"] = (4 * d,)
            if p < d:
                shapes[f"{root}/W_P_0"] = (d, p)
    weights = {k: rng.normal(0, 0.5, s).astype("float32") for k, s in shapes.items()}
    with h5py.File(folder / "weights.hdf5", "w") as h5:
        for name, value in weights.items():
            h5.create_dataset(name, data=value)
    return weights


# ----------------------------------------------------------------- the NumPy reference
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_token_embeddings(w, config, ids):
    """bilm-tf's char CNN on Batcher ids [B, T, C] (with the +1 shift)."""
    table = np.vstack([np.zeros((1, config.char_embedding_dim)), w["char_embed"]])
    x = table[ids]  # (B, T, C, E)
    act = np.tanh if config.activation == "tanh" else (lambda v: np.maximum(v, 0))
    feats = []
    for i, (width, count) in enumerate(config.filters):
        kernel, bias = w[f"CNN/W_cnn_{i}"][0], w[f"CNN/b_cnn_{i}"]  # (width, E, n)
        steps = ids.shape[2] - width + 1
        conv = np.stack([np.einsum("btwe,wen->btn", x[:, :, s:s + width], kernel)
                         for s in range(steps)], axis=2) + bias
        feats.append(act(conv.max(axis=2)))
    h = np.concatenate(feats, axis=-1)
    for k in range(config.num_highway):
        p = f"CNN_high_{k}"
        carry = _sigmoid(h @ w[f"{p}/W_carry"] + w[f"{p}/b_carry"])
        transform = np.maximum(h @ w[f"{p}/W_transform"] + w[f"{p}/b_transform"], 0)
        h = carry * transform + (1 - carry) * h
    if "CNN_proj/W_proj" in w:
        h = h @ w["CNN_proj/W_proj"] + w["CNN_proj/b_proj"]
    return h


def reference_lstm(w, config, root, x, lengths, state):
    """dynamic_rnn of TF1's LSTMCell: returns outputs [B, T, P] and the final state."""
    c, m = (s.copy() for s in state)
    out = np.zeros(x.shape[:2] + (m.shape[1],))
    for t in range(x.shape[1]):
        z = np.concatenate([x[:, t], m], axis=1) @ w[f"{root}/W_0"] + w[f"{root}/B"]
        i, j, f, o = np.split(z, 4, axis=1)
        new_c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
        if config.cell_clip:
            new_c = np.clip(new_c, -config.cell_clip, config.cell_clip)
        new_m = _sigmoid(o) * np.tanh(new_c)
        if f"{root}/W_P_0" in w:
            new_m = new_m @ w[f"{root}/W_P_0"]
        if config.proj_clip:
            new_m = np.clip(new_m, -config.proj_clip, config.proj_clip)
        live = (t < lengths)[:, None]
        c, m = np.where(live, new_c, c), np.where(live, new_m, m)
        out[:, t] = np.where(live, new_m, 0.0)
    return out, (c, m)


def reverse_within(x, lengths):
    y = x.copy()
    for b, n in enumerate(lengths):
        y[b, :n] = x[b, :n][::-1]
    return y


def reference_bilm(w, config, ids, store=None):
    """bilm-tf's BidirectionalLanguageModel on Batcher ids (with <S> and </S>): the
    layers without the boundaries [B, W, 2P], and the updated state store."""
    lengths = (ids > 0).any(axis=2).sum(axis=1)
    tokens = reference_token_embeddings(w, config, ids)
    batch = ids.shape[0]
    layers_out = {}
    for d, direction in enumerate(("forward", "backward")):
        x = tokens if d == 0 else reverse_within(tokens, lengths)
        outs = []
        for i in range(config.num_layers):
            key = (direction, i)
            if store is not None:
                state = (store[key][0][:batch], store[key][1][:batch])
            else:
                out_dim = min(config.projection_dim, config.lstm_dim)
                state = (np.zeros((batch, config.lstm_dim)), np.zeros((batch, out_dim)))
            root = f"RNN_{d}/RNN/MultiRNNCell/Cell{i}/LSTMCell"
            out, (c, m) = reference_lstm(w, config, root, x, lengths, state)
            if store is not None:
                store[key][0][:batch], store[key][1][:batch] = c, m
            if i > 0 and config.use_skip_connections:
                out = out + x * (np.arange(x.shape[1])[None, :, None] < lengths[:, None, None])
            x = out
            outs.append(out if d == 0 else reverse_within(out, lengths))
        layers_out[direction] = outs
    layers = [np.concatenate([tokens, tokens], -1)] + [
        np.concatenate([f, b], -1) for f, b in zip(layers_out["forward"],
                                                   layers_out["backward"])]
    words = lengths - 2
    result = []
    for layer in layers:
        cut = np.zeros((batch, ids.shape[1] - 2, layer.shape[2]))
        for b, n in enumerate(words):
            cut[b, :n] = layer[b, 1:n + 1]
        result.append(cut)
    return result


def batcher_ids(tokenizer, sentences):
    """Batcher's ids: <S> words </S>, + 1, zero rows after."""
    words = [["<S>"] + s.split() + ["</S>"] for s in sentences]
    import tensorflow as tf

    return tokenizer(tf.ragged.constant(words, dtype=tf.string))["char_ids"].numpy()


BATCHES = [["the cat sat on the mat", "naïve", "a b c"], ["dogs 🙂 bark loudly", ""],
           ["é" * 6, "one two", "x"]]


@pytest.mark.parametrize("variant", VARIANTS)
def test_hidden_states_equal_bilm_tf_equations(tmp_path, variant):
    config = ELMoConfig(**VARIANTS[variant])
    weights = _write_folder(tmp_path / "elmo", config)
    model = ELMo.from_pretrained(tmp_path / "elmo")
    tokenizer = ELMoCharTokenizer(config.max_characters_per_token)
    for sentences in BATCHES:
        got = model(tokenizer(sentences))["hidden_states"]
        want = reference_bilm(weights, config, batcher_ids(tokenizer, sentences))
        assert len(got) == config.num_layers + 1
        for g, wnt in zip(got, want):
            np.testing.assert_allclose(g.numpy(), wnt, atol=1e-5)
        assert np.abs(want[-1]).max() > 0.05


@pytest.mark.parametrize("variant", VARIANTS)
def test_stateful_over_three_batches(tmp_path, variant):
    """States carry into the next call for the first B rows of the store; rows beyond
    the batch keep theirs."""
    config = ELMoConfig(**VARIANTS[variant])
    weights = _write_folder(tmp_path / "elmo", config, seed=1)
    model = ELMo.from_pretrained(tmp_path / "elmo", stateful=True, max_batch_size=4)
    tokenizer = ELMoCharTokenizer(config.max_characters_per_token)
    out_dim = min(config.projection_dim, config.lstm_dim)
    store = {(d, i): (np.zeros((4, config.lstm_dim)), np.zeros((4, out_dim)))
             for d in ("forward", "backward") for i in range(config.num_layers)}
    for sentences in BATCHES:  # batch sizes 3, 2, 3
        got = model(tokenizer(sentences))["hidden_states"]
        want = reference_bilm(weights, config, batcher_ids(tokenizer, sentences), store)
        for g, wnt in zip(got, want):
            np.testing.assert_allclose(g.numpy(), wnt, atol=1e-5)
    # The third batch differs from a fresh start: the states were carried.
    fresh = reference_bilm(weights, config, batcher_ids(tokenizer, BATCHES[2]))
    assert np.abs(fresh[-1] - want[-1]).max() > 1e-3
    model.reset_states()
    again = model(tokenizer(BATCHES[2]))["hidden_states"]
    np.testing.assert_allclose(again[-1].numpy(), fresh[-1], atol=1e-5)


def test_hdf5_round_trip_and_named_errors(tmp_path):
    config = ELMoConfig(**VARIANTS["skip-relu-proj"])
    _write_folder(tmp_path / "elmo", config)
    model = ELMo.from_pretrained(tmp_path / "elmo")
    model.save_pretrained(tmp_path / "again")
    again = ELMo.from_pretrained(tmp_path / "again")
    tokenizer = ELMoCharTokenizer(config.max_characters_per_token)
    x = tokenizer(BATCHES[0])
    for a, b in zip(model(x)["hidden_states"], again(x)["hidden_states"]):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with h5py.File(tmp_path / "again" / "weights.hdf5", "a") as h5:
        del h5["CNN_high_1/W_carry"]
    with pytest.raises(ValueError, match="missing variable CNN_high_1/W_carry"):
        ELMo.from_pretrained(tmp_path / "again")


def test_boundaries_kept_on_request(tmp_path):
    config = ELMoConfig(**VARIANTS["skip-relu-proj"])
    weights = _write_folder(tmp_path / "elmo", config)
    model = ELMo.from_pretrained(tmp_path / "elmo", keep_boundaries=True)
    tokenizer = ELMoCharTokenizer(config.max_characters_per_token)
    out = model(tokenizer(["a b", "c"]))
    assert out["hidden_states"][0].shape[1] == 4  # <S> a b </S>
    assert out["padding_mask"].numpy().tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    ids = batcher_ids(tokenizer, ["a b", "c"])
    tokens = reference_token_embeddings(weights, config, ids)
    np.testing.assert_allclose(out["hidden_states"][0].numpy()[0, :, :config.projection_dim],
                               tokens[0], atol=1e-5)


def test_registered_family_and_interface_features(tmp_path):
    from kbert.models import registry

    config = ELMoConfig(**VARIANTS["skip-relu-proj"])
    _write_folder(tmp_path / "elmo", config)
    family = registry.family_of_folder(tmp_path / "elmo")
    assert family.name == "elmo"
    tokenizer = family.tokenizer_class.from_pretrained(tmp_path / "elmo")
    assert tokenizer.max_characters_per_token == 9
    model = family.encoder_class.from_pretrained(tmp_path / "elmo")
    features = model.features(tokenizer(["the cat sat", "a"]))
    top = features["hidden_states"][-1].numpy()
    np.testing.assert_allclose(features["pooled_output"].numpy(),
                               np.stack([top[0, :3].mean(0), top[1, :1].mean(0)]),
                               atol=1e-6)
    assert model.hidden_size == 12 and model.num_layers == 2
