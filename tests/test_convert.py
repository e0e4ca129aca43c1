"""kbert.convert: hooks, readers and errors that name the variable; kbert.internals."""

import numpy as np
import pytest

from kbert import convert


def test_split_recovers_the_parts_of_a_fused_tensor():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(5, 7)) for _ in range(3))
    fused = np.concatenate([q, k, v], axis=-1)  # GPT-2's c_attn: [H, 3H]
    for i, part in enumerate((q, k, v)):
        np.testing.assert_array_equal(convert.split(3, i)([fused]), part)
    np.testing.assert_array_equal(convert.concat()([q, k, v]), fused)
    with pytest.raises(ValueError, match="does not split in 3"):
        convert.split(3, 0)([np.zeros((5, 8))])


def test_reorder_gates_moves_whole_blocks():
    blocks = [np.full((2, 3), g) for g in range(4)]  # gates 0..3 along the last axis
    fused = np.concatenate(blocks, axis=-1)
    out = convert.reorder_gates([2, 0, 3, 1])([fused])
    assert out[0].tolist() == [2, 2, 2, 0, 0, 0, 3, 3, 3, 1, 1, 1]
    bias = convert.reorder_gates([1, 0], axis=0)([np.arange(4.0)])
    assert bias.tolist() == [2.0, 3.0, 0.0, 1.0]


def test_convert_names_every_problem_at_once():
    tensors = {"a.weight": np.zeros((3, 2)), "b.fused": np.zeros((2, 6)),
               "extra.weight": np.zeros(1), "head.weight": np.zeros(1)}
    rules = [convert.Rule("A", ("a.weight",), convert.transpose),
             convert.Rule("Q", ("b.fused",), convert.split(3, 0)),
             convert.Rule("K", ("b.fused",), convert.split(3, 1)),
             convert.Rule("C", ("c.weight",))]
    shapes = {"A": (2, 3), "Q": (2, 2), "K": (2, 3), "C": (4,)}
    with pytest.raises(ValueError) as err:
        convert.convert(tensors, rules, shapes, "model.safetensors", "MyModel",
                        owned=lambda k: not k.startswith("head."),
                        display={"a.weight": "transformer.a.weight"})
    text = str(err.value)
    assert text.startswith("model.safetensors: cannot load into MyModel:")
    assert "variable b.fused has shape (2, 2), expected (2, 3)" in text
    assert "missing variable c.weight (for C)" in text
    assert "unexpected variable extra.weight" in text
    assert "head.weight" not in text  # not the model's: ignored
    shapes["K"] = (2, 2)
    rules[-1] = convert.Rule("C", ("extra.weight",))
    shapes["C"] = (1,)
    values = convert.convert(tensors, rules, shapes, "f", owned=lambda k: False)
    assert sorted(values) == ["A", "C", "K", "Q"] and values["A"].shape == (2, 3)


def test_hdf5_reader_gives_full_dataset_paths(tmp_path):
    import h5py

    path = tmp_path / "weights.hdf5"
    with h5py.File(path, "w") as f:
        f["char_embed"] = np.arange(6.0).reshape(3, 2)
        f.create_dataset("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0", data=np.ones((4, 8)))
    tensors = convert.read_hdf5(str(path))
    assert sorted(tensors) == ["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0", "char_embed"]
    np.testing.assert_array_equal(tensors["char_embed"], np.arange(6.0).reshape(3, 2))
    (tmp_path / "bad.hdf5").write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match=r"bad\.hdf5: cannot read HDF5"):
        convert.read_hdf5(str(tmp_path / "bad.hdf5"))


def test_truncated_safetensors_names_the_file(tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({"w": np.ones((64, 64), "float32")}, str(path))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"model\.safetensors: cannot read safetensors"):
        convert.read_safetensors(str(path))
    with pytest.raises(ValueError, match="unknown weights format"):
        convert.read_weights_file("weights.npz")


def test_internals_refuse_other_versions(monkeypatch):
    import keras

    from kbert import internals

    internals.check()  # the installed versions are the supported ones
    internals.check.cache_clear()
    monkeypatch.setattr(keras, "__version__", "4.0.0")
    with pytest.raises(internals.UnsupportedVersionError, match="Keras 4.0.0"):
        internals.check()
    monkeypatch.undo()
    internals.check.cache_clear()
    # A Keras without one of the hooks the optimizer overrides (simulated by asking
    # for one that no Keras has).
    monkeypatch.setattr(internals, "OPTIMIZER_HOOKS",
                        internals.OPTIMIZER_HOOKS + ("_hook_of_another_keras",))
    with pytest.raises(internals.UnsupportedVersionError,
                       match=r"missing private APIs: keras\.optimizers\.Optimizer\._hook_of"):
        internals.check()
    monkeypatch.undo()
    internals.check.cache_clear()
    # ... or a built Adam without the slot lists the fused update reads.
    monkeypatch.setattr(internals, "ADAM_STATE", internals.ADAM_STATE + ("_slots_elsewhere",))
    with pytest.raises(internals.UnsupportedVersionError,
                       match=r"keras\.optimizers\.Adam\._slots_elsewhere \(built\)"):
        internals.check()
    monkeypatch.undo()
    internals.check.cache_clear()
    internals.check()
