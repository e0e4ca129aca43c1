"""LoRA (`kbert.enable_lora`, `merge_lora`, `save_lora`, `load_lora`) on the real
pretrained MiniLM, and `--lora_rank` in the GLUE command."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

import kbert
from kbert.models.lora import lora_layers

TEXTS = ["LoRA adapts a frozen encoder.", "Only the adapters and the head train here!"]


@pytest.fixture
def minilm(minilm_dir):
    return (kbert.BertEncoder.from_pretrained(minilm_dir),
            kbert.BertTokenizer.from_pretrained(minilm_dir))


def _values(model):
    return {v.path: np.array(v.numpy()) for v in model.weights
            if not v.path.endswith("seed_generator_state")}


def test_only_adapters_and_head_train(minilm):
    from kbert.tasks.glue.model import build_classifier

    encoder, tokenizer = minilm
    model = build_classifier(encoder, 2)
    paths = kbert.enable_lora(model, 4)
    assert len(paths) == 12 and all(p.endswith(("/query", "/value")) for p in paths)
    trainable = {v.path for v in model.trainable_weights}
    assert {p for p in trainable if "lora_kernel" in p} and all(
        "lora_kernel" in p or not p.startswith("transformer_layer") for p in trainable)
    x = {k: np.asarray(v) for k, v in tokenizer(TEXTS * 8, seq_length=16).items()}
    y = np.array([0, 1] * 8)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
    before = _values(model)
    model.fit(x, {"logits": y}, batch_size=8, epochs=2, verbose=0)
    after = _values(model)
    changed = {p for p in before if not np.array_equal(before[p], after[p])}
    adapters = {p for p in before if "lora_kernel" in p}
    head = {p for p in before if p.startswith("classifier")}
    assert adapters and head
    # Every adapter and the head changed, nothing of the base (the pooler is no LoRA
    # target: frozen like the rest of the encoder).
    assert changed == adapters | head, sorted(changed ^ (adapters | head))[:5]


def test_merged_and_reloaded_adapters_give_the_adapted_outputs(minilm, minilm_dir, tmp_path,
                                                               monkeypatch):
    import gc

    encoder, tokenizer = minilm
    x = tokenizer(TEXTS, seq_length=16)
    plain = np.asarray(encoder(x)["sequence_output"])
    kbert.enable_lora(encoder, 4, targets=["query", "value", "intermediate"], alpha=8)
    rng = np.random.default_rng(0)
    for layer in lora_layers(encoder):  # as after training: B is no longer zero
        layer.lora_kernel_b.assign(rng.normal(0, 0.02, layer.lora_kernel_b.shape))
    adapted = np.asarray(encoder(x)["sequence_output"])
    assert np.abs(adapted - plain).max() > 1e-2
    kbert.save_lora(encoder, tmp_path / "adapter")
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["rank"] == 4 and config["alpha"] == 8 and len(config["layers"]) == 18
    fresh = kbert.BertEncoder.from_pretrained(minilm_dir)
    kbert.load_lora(fresh, tmp_path / "adapter")
    np.testing.assert_array_equal(np.asarray(fresh(x)["sequence_output"]), adapted)
    # One full garbage collection for the merge, not Keras' one per dropped adapter
    # (36 here; each takes about a second in a process holding a few million objects).
    collections = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: collections.append(generation))
    assert kbert.merge_lora(encoder) == 18
    assert collections == [2]
    monkeypatch.undo()
    merged = np.asarray(encoder(x)["sequence_output"])
    np.testing.assert_allclose(merged, adapted, atol=1e-5)
    # A plain model again: the variables of a fresh load, and a config without LoRA.
    base = kbert.BertEncoder.from_pretrained(minilm_dir)
    assert [v.path for v in encoder.weights] == [v.path for v in base.weights]
    assert not lora_layers(encoder)
    assert all(v.trainable for v in encoder.weights if "seed" not in v.path)


def test_errors_name_what_is_wrong(minilm, tmp_path):
    encoder, _ = minilm
    with pytest.raises(ValueError, match=r"LoRA targets \['qkv'\] match no Dense layer of "
                                         r".*its Dense layers end in attention_output, "
                                         r"intermediate, key, output, pooler, query, value"):
        kbert.enable_lora(encoder, 4, targets=["qkv"])
    with pytest.raises(ValueError, match="must be a whole number of at least 1"):
        kbert.enable_lora(encoder, 0)
    kbert.enable_lora(encoder, 2)
    with pytest.raises(ValueError, match="LoRA is enabled already"):
        kbert.enable_lora(encoder, 2)
    with pytest.raises(FileNotFoundError, match="no adapter_config.json"):
        kbert.load_lora(encoder, tmp_path)


def test_int8_base_with_float_adapters():
    """QLoRA-style: Keras' int8 Dense adds the float adapters in its call; merging
    would requantize, so kbert refuses it. (A tiny encoder: quantizing is slow.)"""
    from tests.conftest import TINY_VOCAB

    tokenizer = kbert.BertTokenizer(list(TINY_VOCAB))
    encoder = kbert.BertEncoder(kbert.BertConfig.preset("tiny", vocab_size=len(TINY_VOCAB)))
    x = tokenizer(["the cat sat", "a dog"], seq_length=8)
    encoder(x)
    encoder.quantize("int8")
    before = np.asarray(encoder(x)["sequence_output"])
    kbert.enable_lora(encoder, 4)
    layer = lora_layers(encoder)[0]
    assert layer.quantization_mode == "int8" and layer.lora_kernel_a.dtype == "float32"
    assert {v.path.rsplit("/", 1)[-1] for v in encoder.trainable_weights} == {
        "lora_kernel_a", "lora_kernel_b"}
    np.testing.assert_array_equal(np.asarray(encoder(x)["sequence_output"]), before)
    layer.lora_kernel_b.assign(np.full(layer.lora_kernel_b.shape, 0.05, np.float32))
    assert np.abs(np.asarray(encoder(x)["sequence_output"]) - before).max() > 1e-3
    with pytest.raises(NotImplementedError, match="merging LoRA into a int8 kernel"):
        kbert.merge_lora(encoder)


@pytest.mark.e2e
def test_glue_command_with_lora_rank(minilm_dir, tmp_path):
    from kbert.export.folder import load_task_folder
    from kbert.tasks.glue import __main__ as glue_cli
    from test_own_data import write_own_task

    train, dev, _, _ = write_own_task(str(tmp_path), n_train=400, n_dev=100, n_test=2)
    out = tmp_path / "out"
    assert glue_cli.main(["--train_file", train, "--validation_file", dev,
                          "--output_dir", str(out), "--init_from", minilm_dir,
                          "--lora_rank", "4", "--max_seq_length", "12",
                          "--learning_rate", "3e-3", "--num_train_epochs", "3",
                          "--train_batch_size", "16"]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert results["eval_accuracy"] >= 0.9, results
    assert json.loads((out / "adapter" / "adapter_config.json").read_text())["rank"] == 4
    # The task folder holds the merged, plain model: no adapter variables.
    _, model, _, _ = load_task_folder(str(out))
    assert not [v for v in model.weights if "lora" in v.path]


@pytest.mark.e2e
def test_ner_command_with_lora_rank(minilm_dir, tmp_path, capsys):
    from kbert.export.folder import load_task_folder
    from kbert.tasks.ner import __main__ as ner_cli
    from ner_fixtures import make_sentences, write_conll

    train = write_conll(str(tmp_path / "eng.train"), make_sentences(200, seed=0))
    out = tmp_path / "out"
    assert ner_cli.main(["--train_file", train, "--dev_file", train, "--output_dir", str(out),
                         "--init_from", minilm_dir, "--lora_rank", "4", "--lora_targets",
                         "query,value,intermediate", "--max_seq_length", "32",
                         "--num_train_epochs", "1", "--learning_rate", "3e-3"]) == 0
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["rank"] == 4 and len(config["layers"]) == 18
    assert json.loads((out / "eval_results.json").read_text())["eval_f1"] > 0
    _, model, _, _ = load_task_folder(str(out))
    assert not [v for v in model.weights if "lora" in v.path]
    capsys.readouterr()
    for argv, line in (
            (["--lora_rank", "4"], "error: --lora_rank 4: adapts a pretrained encoder; give "
                                   "--init_from"),
            (["--init_from", minilm_dir, "--lora_rank", "4", "--mode", "feature"],
             "error: --lora_rank 4: the feature mode trains no encoder weight (a frozen "
             "encoder); use --mode finetune"),
            (["--lora_targets", "query"], "error: --lora_targets: goes with --lora_rank")):
        with pytest.raises(SystemExit) as exit_:
            ner_cli.main(["--train_file", train, "--output_dir", str(tmp_path / "x"), *argv])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == line
