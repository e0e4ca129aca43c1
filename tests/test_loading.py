"""Loading at scale (`from_pretrained`): no random values computed for the weights a
folder provides, tensors read and assigned one at a time, bfloat16 straight from the
file, and the streaming safetensors writer. Each format's load is compared with the
slow path it replaced: the model built with its initializers, every tensor read at once
by the format's own library (`safetensors.numpy.load_file`, `torch.load`,
`tf.train.load_checkpoint`, `h5py`), then assigned."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert import BertEncoder
from kbert.convert import folders, initialization
from tests.conftest import odd_config, random_inputs


def _slow_tensors(path: str, kind: str) -> dict:
    """Every tensor of a file at once, read by the format's own library."""
    if kind == "safetensors":
        from safetensors.numpy import load_file

        return load_file(path)
    if kind == "bin":
        import torch

        return {k: v.numpy() for k, v in torch.load(path, weights_only=True).items()}
    if kind == "tf":
        reader = tf.train.load_checkpoint(path)
        return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    import h5py

    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset)
                     else None)
    return out


def _same_variables(fast, slow):
    """Every variable identical: the same paths (less the model's own name), dtypes and
    values."""
    assert len(fast.weights) == len(slow.weights)
    for a, b in zip(fast.weights, slow.weights):
        assert a.path.split("/", 1)[-1] == b.path.split("/", 1)[-1]
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()),
                                      err_msg=a.path)


def _bert_slow(config, tensors, fmt, prefix=""):
    from kbert.models.bert import checkpoints

    encoder = BertEncoder(config)
    if fmt == "hf":
        tensors = {checkpoints.SPEC.normalize(k.removeprefix(prefix)): v
                   for k, v in tensors.items()}
    elif fmt == "google":
        tensors = {k: v for k, v in tensors.items() if k.startswith("bert/")
                   and not k.endswith(("/adam_m", "/adam_v"))}
    checkpoints.assign(encoder, tensors, fmt, "slow path")
    return encoder


def test_bert_formats_equal_the_slow_path(tmp_path):
    import torch

    from tests.test_checkpoints import _write_google_checkpoint, _write_hf_folder

    source = BertEncoder(odd_config())
    config = source.config
    source.save_pretrained(tmp_path / "kbert")
    _write_hf_folder(source, tmp_path / "hf")
    _write_google_checkpoint(source, tmp_path / "google")
    (tmp_path / "bin").mkdir()  # a BertForPreTraining-style .bin (names under bert.)
    from safetensors.torch import load_file as torch_load_file

    torch.save({"bert." + k: v for k, v in
                torch_load_file(str(tmp_path / "hf" / "model.safetensors")).items()},
               tmp_path / "bin" / "pytorch_model.bin")
    (tmp_path / "bin" / "config.json").write_text((tmp_path / "hf" / "config.json").read_text())
    cases = {
        "kbert": (_slow_tensors(str(tmp_path / "kbert" / "model.safetensors"), "safetensors"),
                  "kbert", ""),
        "hf": (_slow_tensors(str(tmp_path / "hf" / "model.safetensors"), "safetensors"),
               "hf", ""),
        "bin": (_slow_tensors(str(tmp_path / "bin" / "pytorch_model.bin"), "bin"), "hf",
                "bert."),
        "google": (_slow_tensors(str(tmp_path / "google" / "bert_model.ckpt"), "tf"),
                   "google", ""),
    }
    for folder, (tensors, fmt, prefix) in cases.items():
        fast = BertEncoder.from_pretrained(tmp_path / folder)
        _same_variables(fast, _bert_slow(config, tensors, fmt, prefix))
        _same_variables(fast, source)  # and both are the weights written


def test_gpt_and_roberta_and_elmo_formats_equal_the_slow_path(tmp_path):
    from kbert.models.elmo import ELMo, ELMoConfig
    from kbert.models.gpt import checkpoints as gpt_checkpoints
    from kbert.models.roberta import checkpoints as roberta_checkpoints
    from tests.test_elmo import VARIANTS, _write_folder
    from tests.test_gpt import _reference, _write_openai_checkpoint

    ref = _reference("gpt2", seed=3)
    ref.save_pretrained(tmp_path / "gpt_hf")
    _write_openai_checkpoint(ref, tmp_path / "gpt_openai")
    hf = _slow_tensors(str(tmp_path / "gpt_hf" / "model.safetensors"), "safetensors")
    openai = _slow_tensors(str(tmp_path / "gpt_openai" / "model.ckpt"), "tf")
    for folder, tensors in (("gpt_hf", hf), ("gpt_openai", openai)):
        fast = kbert.GPTDecoder.from_pretrained(tmp_path / folder)
        config, lazy, display, fmt, source = gpt_checkpoints.read_checkpoint(tmp_path / folder)
        eager = {name: lazy[name] for name in lazy}  # the names kbert's reader gives
        if fmt == "hf":  # ... equal to the library's own reading, renamed
            assert all(np.array_equal(eager[k.removeprefix("transformer.")], v)
                       for k, v in tensors.items() if k.startswith("transformer."))
        slow = kbert.GPTDecoder(config, name="gpt_decoder")
        gpt_checkpoints.assign(slow, eager, source)
        _same_variables(fast, slow)
    fast.save_pretrained(tmp_path / "gpt_kbert")
    again = kbert.GPTDecoder.from_pretrained(tmp_path / "gpt_kbert")
    _same_variables(again, fast)

    import transformers

    transformers.RobertaModel(transformers.RobertaConfig(
        vocab_size=61, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=23, max_position_embeddings=20, type_vocab_size=1,
        pad_token_id=1)).save_pretrained(tmp_path / "roberta")
    fast = kbert.RobertaEncoder.from_pretrained(tmp_path / "roberta")
    slow = kbert.RobertaEncoder(fast.config)
    tensors = _slow_tensors(str(tmp_path / "roberta" / "model.safetensors"), "safetensors")
    roberta_checkpoints._assign(slow, {k.removeprefix("roberta."): v for k, v in tensors.items()},
                                {}, "slow path", roberta_checkpoints._encoder_owned)
    _same_variables(fast, slow)

    config = ELMoConfig(**VARIANTS["skip-relu-proj"])
    _write_folder(tmp_path / "elmo", config)
    fast = ELMo.from_pretrained(tmp_path / "elmo")
    slow = ELMo(config)
    tensors = _slow_tensors(str(tmp_path / "elmo" / "weights.hdf5"), "hdf5")
    targets = slow.weight_map()
    for name, var in targets.items():
        var.assign(tensors[name])
    for a, b in zip(fast.weights, slow.weights):  # the file's weights, and the rest as new
        if any(a is v for v in fast.weight_map().values()):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def _raising_initializers(monkeypatch):
    """Every Keras initializer class raises when called."""
    calls = []
    for name in dir(keras.initializers):
        cls = getattr(keras.initializers, name)
        if isinstance(cls, type) and issubclass(cls, keras.initializers.Initializer):
            def refuse(self, shape, dtype=None, _name=name):
                calls.append((_name, tuple(shape)))
                raise RuntimeError(f"{_name} called for a weight of shape {tuple(shape)}")
            monkeypatch.setattr(cls, "__call__", refuse)
    return calls


def test_from_pretrained_computes_no_initial_values_for_loaded_weights(tmp_path, monkeypatch):
    from tests.test_gpt import _reference

    BertEncoder(odd_config()).save_pretrained(tmp_path / "bert")
    _reference("openai-gpt").save_pretrained(tmp_path / "gpt")
    calls = _raising_initializers(monkeypatch)
    with pytest.raises(RuntimeError, match="called for a weight"):
        BertEncoder(odd_config())  # the patch bites where a model is built as usual
    calls.clear()
    encoder = BertEncoder.from_pretrained(tmp_path / "bert")
    decoder = kbert.GPTLanguageModel.from_pretrained(tmp_path / "gpt")
    assert calls == []
    monkeypatch.undo()
    _same_variables(encoder, BertEncoder.from_pretrained(tmp_path / "bert"))
    inputs = random_inputs(vocab=101, types=1)
    del inputs["segment_ids"]
    assert np.isfinite(decoder(inputs)["logits"]).all()


def test_weights_no_tensor_provides_get_their_own_initializers():
    """Inside `initialization.deferred()`, a variable the loader assigns never runs its
    initializer; one it does not (a weight a format lacks, a dropout's seed state) gets
    its initializer's value when the block ends."""
    def refuse(shape, dtype=None):
        raise RuntimeError("the kernel's initializer ran")

    with initialization.deferred():
        layer = keras.layers.Dense(3, kernel_initializer=refuse,
                                   bias_initializer=keras.initializers.Constant(0.5))
        layer.build((None, 2))
        kernel = np.arange(6, dtype="float32").reshape(2, 3)
        kbert.convert.load_into({"kernel": layer.kernel}, {"kernel": kernel},
                                [kbert.convert.Rule("kernel", ("kernel",))], "test")
    np.testing.assert_array_equal(layer.kernel.numpy(), kernel)
    np.testing.assert_array_equal(layer.bias.numpy(), [0.5, 0.5, 0.5])
    # A dropout's seed generator state is Keras' own: initialized as Keras does it.
    with initialization.deferred():
        dropout = keras.layers.Dropout(0.5, seed=7)
    fresh = keras.layers.Dropout(0.5, seed=7)
    np.testing.assert_array_equal(dropout.seed_generator.state.numpy(),
                                  fresh.seed_generator.state.numpy())


def test_a_failed_load_leaves_no_deferred_state(tmp_path):
    BertEncoder(odd_config()).save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="cannot load into BertEncoder"):
        BertEncoder.from_pretrained(tmp_path / "bert", num_layers=4)
    assert initialization._active.get() is None
    encoder = BertEncoder(odd_config())  # initializers run as usual again
    assert np.abs(encoder.weights[0].numpy()).max() > 0


def test_bfloat16_loads_straight_into_bfloat16_variables(tmp_path):
    from tests.test_gpt import _reference

    _reference("gpt2").save_pretrained(tmp_path / "gpt")
    f32 = kbert.GPTDecoder.from_pretrained(tmp_path / "gpt")
    bf16 = kbert.GPTDecoder.from_pretrained(tmp_path / "gpt", dtype="bfloat16")
    pairs = [(a, b) for a, b in zip(f32.weights, bf16.weights) if "seed" not in a.path]
    assert {b.dtype for _, b in pairs} == {"bfloat16"}
    for a, b in pairs:
        np.testing.assert_array_equal(
            tf.cast(a.value, tf.bfloat16).numpy().astype("float32"),
            np.asarray(b.numpy()).astype("float32"), err_msg=a.path)


def test_the_streaming_writer_is_a_safetensors_file(tmp_path):
    """What `safetensors` reads back; the header's data offset 8-byte aligned; float32
    and int8 tensors; a shape the header did not announce is refused."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    rng = np.random.default_rng(0)
    values = {"b": rng.normal(size=(3, 5)).astype("float32"),
              "a.weight": rng.normal(size=(7,)).astype("float32"),
              "q": rng.integers(-127, 127, size=(4, 2)).astype("int8")}
    lazy = kbert.convert.LazyTensors({k: (lambda k=k: values[k]) for k in values},
                                     {k: v.shape for k, v in values.items()})
    path = str(tmp_path / "x.safetensors")
    folders.write_safetensors(path, lazy, {"format": "pt"}, dtypes={"q": "int8"})
    back = load_file(path)
    assert sorted(back) == sorted(values)
    for k, v in values.items():
        assert back[k].dtype == v.dtype
        np.testing.assert_array_equal(back[k], v)
    with safe_open(path, "numpy") as f:
        assert f.metadata() == {"format": "pt"}
    header_size = int.from_bytes(open(path, "rb").read(8), "little")
    assert (8 + header_size) % 8 == 0
    assert json.loads(open(path, "rb").read(8 + header_size)[8:])["b"]["dtype"] == "F32"
    wrong = kbert.convert.LazyTensors({"b": lambda: values["b"]}, {"b": (5, 3)})
    with pytest.raises(ValueError, match=r"b is \[3, 5\], its header says \[5, 3\]"):
        folders.write_safetensors(str(tmp_path / "y.safetensors"), wrong)


def test_variables_never_share_memory_with_each_other_or_the_callers_arrays(tmp_path):
    """A reader's fresh buffer is handed to its variable without a copy (DLPack); a
    source two targets read, and a caller's own arrays, are copied: writing one variable
    (as training does) changes nothing else."""
    from safetensors.numpy import save_file

    w = np.arange(12, dtype="float32").reshape(3, 4)
    save_file({"w": w, "b": np.ones(4, "float32")}, str(tmp_path / "x.safetensors"))
    first, second, bias = (keras.Variable(np.zeros((3, 4), "float32")),
                           keras.Variable(np.zeros((3, 4), "float32")),
                           keras.Variable(np.zeros(4, "float32")))
    variables = {"first": first, "second": second, "bias": bias}
    rules = [kbert.convert.Rule("first", ("w",)), kbert.convert.Rule("second", ("w",)),
             kbert.convert.Rule("bias", ("b",))]
    kbert.convert.load_into(dict(variables), kbert.convert.read_safetensors(
        str(tmp_path / "x.safetensors")), rules, "x.safetensors")
    first.assign_add(np.ones((3, 4), "float32"))
    bias.assign_add(np.ones(4, "float32"))
    np.testing.assert_array_equal(second.numpy(), w)
    np.testing.assert_array_equal(first.numpy(), w + 1)
    np.testing.assert_array_equal(bias.numpy(), 2 * np.ones(4))
    mine = {"w": w.copy(), "b": np.ones(4, "float32")}
    kbert.convert.load_into(dict(variables), mine, rules, "a dict")
    mine["w"][:] = -1
    first.assign_add(np.ones((3, 4), "float32"))
    np.testing.assert_array_equal(second.numpy(), w)
    np.testing.assert_array_equal(first.numpy(), w + 1)


def test_a_bfloat16_export_of_a_model_folder_loads_straight_into_bfloat16(tmp_path):
    """`python -m kbert.export --dtype bfloat16` of a model folder: the model loaded
    with `dtype="bfloat16"` is what `cast_model` makes of the float32 one (the same
    policies, variables and outputs), without the float32 copy."""
    from kbert.export.folder import _model_folder, cast_model
    from tests.gpt_fixtures import word_tokenizer
    from tests.test_gpt import _reference

    _reference("gpt2").save_pretrained(tmp_path / "gpt")
    word_tokenizer(["red", "blue"]).save_pretrained(tmp_path / "gpt")
    _, straight, _ = _model_folder(str(tmp_path / "gpt"), "generate", "bfloat16")
    cast = cast_model(kbert.GPTLanguageModel.from_pretrained(tmp_path / "gpt"), "bfloat16")
    assert ([layer.dtype_policy.name for layer in straight._flatten_layers()]
            == [layer.dtype_policy.name for layer in cast._flatten_layers()])
    _same_variables(straight, cast)
    ids = np.array([[5, 7, 9, 11]], "int32")
    inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    np.testing.assert_array_equal(straight(inputs)["logits"], cast(inputs)["logits"])


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_int8_loads_tensor_by_tensor_equal_to_quantizing_after_the_load(tmp_path, family):
    """`from_pretrained(quantize="int8")` quantizes each layer as its kernel loads: the
    same int8 weights, scales and outputs as `model.quantize("int8")` after a float
    load. ELMo refuses (its LSTMs), as `quantize` does; a dtype beside it is refused."""
    from tests.test_gpt import _reference

    if family == "gpt2":
        _reference("gpt2").save_pretrained(tmp_path / "m")
        cls, inputs = kbert.GPTDecoder, random_inputs(vocab=101, types=1)
        del inputs["segment_ids"]
    else:  # (RoBERTa's loader notes its model for quantizing in the same way)
        BertEncoder(odd_config()).save_pretrained(tmp_path / "m")
        cls, inputs = BertEncoder, random_inputs()
    loaded = cls.from_pretrained(tmp_path / "m", quantize="int8")
    after = cls.from_pretrained(tmp_path / "m")
    after.quantize("int8")
    assert loaded.quantization_mode_of_layers() == "int8"
    _same_variables(loaded, after)
    got, want = loaded(inputs), after(inputs)
    for key in want:
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]))
    with pytest.raises(ValueError, match="quantize='int8' and dtype='bfloat16': give one"):
        cls.from_pretrained(tmp_path / "m", quantize="int8", dtype="bfloat16")


def test_elmo_refuses_an_int8_load(tmp_path):
    from kbert.models.elmo import ELMo

    with pytest.raises(NotImplementedError, match="ELMo: quantize\\('int8'\\): its biLSTM"):
        ELMo.from_pretrained(tmp_path, quantize="int8")


def test_a_float16_folder_loads_into_float32_variables(tmp_path):
    """Hub checkpoints are often stored in float16 (`F16` safetensors): read by offset in
    their own dtype, cast by TensorFlow on assignment, equal to torch's upcast."""
    import torch

    from tests.test_gpt import _reference

    ref = _reference("gpt2").half()
    ref.save_pretrained(tmp_path / "fp16")
    state = {k.removeprefix("transformer."): v.float().numpy() for k, v in ref.state_dict().items()}
    decoder = kbert.GPTDecoder.from_pretrained(tmp_path / "fp16")
    assert {v.dtype for v in decoder.weights if "seed" not in v.path} == {"float32"}
    np.testing.assert_array_equal(decoder.token_embedding.embeddings.numpy(), state["wte.weight"])
    np.testing.assert_array_equal(decoder.transformer_layers[0].intermediate.kernel.numpy(),
                                  state["h.0.mlp.c_fc.weight"])
    assert torch.float16 in {v.dtype for v in ref.state_dict().values()}


@pytest.mark.parametrize("safe", [True, False], ids=["safetensors", "bin"])
def test_a_sharded_folder_loads_as_the_whole_file(tmp_path, safe):
    """Hub repos of large models hold shards and an index (`model.safetensors.index.json`,
    `pytorch_model.bin.index.json`), as `transformers` writes them past `max_shard_size`."""
    from tests.test_gpt import _reference

    ref = _reference("gpt2", seed=5)
    ref.save_pretrained(tmp_path / "whole")
    if safe:
        ref.save_pretrained(tmp_path / "shards", max_shard_size="40KB")
    else:  # transformers 5 writes safetensors only; its 4.x layout of .bin shards
        import torch

        ref.config.save_pretrained(tmp_path / "shards")
        state = ref.state_dict()
        names = sorted(state)
        groups = [names[i::5] for i in range(5)]
        weight_map = {}
        for i, group in enumerate(groups):
            shard = f"pytorch_model-{i + 1:05d}-of-00005.bin"
            torch.save({n: state[n].clone() for n in group}, tmp_path / "shards" / shard)
            weight_map.update({n: shard for n in group})
        (tmp_path / "shards" / "pytorch_model.bin.index.json").write_text(
            json.dumps({"metadata": {}, "weight_map": weight_map}))
    index = "model.safetensors.index.json" if safe else "pytorch_model.bin.index.json"
    assert (tmp_path / "shards" / index).exists()
    assert len({*json.loads((tmp_path / "shards" / index).read_text())["weight_map"].values()}) > 2
    _same_variables(kbert.GPTDecoder.from_pretrained(tmp_path / "shards"),
                    kbert.GPTDecoder.from_pretrained(tmp_path / "whole"))
    os.remove(next((tmp_path / "shards").glob("model-00002-*" if safe else "pytorch_model-00002-*")))
    with pytest.raises(FileNotFoundError, match=f"{index}: names shard .*00002-of"):
        kbert.GPTDecoder.from_pretrained(tmp_path / "shards")
