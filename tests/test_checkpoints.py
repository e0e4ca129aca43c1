"""Loading and saving weights: kbert, Hugging Face, Google TF1 folders."""

import os

import numpy as np
import pytest

from kbert import BertConfig, BertEncoder, BertTokenizer
from kbert.models.bert import checkpoints
from tests.conftest import TINY_VOCAB, odd_config, random_inputs, write_tf1_checkpoint


def _outputs_equal(a, b, inputs, atol=0.0):
    m = inputs["padding_mask"].astype(bool)
    x, y = a(inputs), b(inputs)
    np.testing.assert_allclose(x["sequence_output"].numpy()[m], y["sequence_output"].numpy()[m],
                               atol=atol, rtol=0)
    np.testing.assert_allclose(x["pooled_output"].numpy(), y["pooled_output"].numpy(),
                               atol=atol, rtol=0)


def test_google_to_hf_names():
    assert checkpoints.google_to_hf("bert/encoder/layer_10/attention/self/query/kernel") == \
        ("encoder.layer.10.attention.self.query.weight", True)
    assert checkpoints.google_to_hf("bert/embeddings/LayerNorm/gamma") == \
        ("embeddings.LayerNorm.weight", False)
    assert checkpoints.google_to_hf("bert/embeddings/word_embeddings") == \
        ("embeddings.word_embeddings.weight", False)
    assert checkpoints.google_to_hf("bert/pooler/dense/bias") == ("pooler.dense.bias", False)


def test_save_pretrained_round_trip_is_exact(tmp_path):
    encoder = BertEncoder(odd_config())
    tok = BertTokenizer(TINY_VOCAB, lowercase=False)
    encoder.save_pretrained(tmp_path / "kb", tokenizer=tok)
    assert sorted(os.listdir(tmp_path / "kb")) == ["config.json", "model.safetensors",
                                                   "tokenizer_config.json", "vocab.txt"]
    loaded = BertEncoder.from_pretrained(tmp_path / "kb")
    assert loaded.config == encoder.config
    for name, var in checkpoints.variable_map(loaded).items():
        np.testing.assert_array_equal(var.numpy(), checkpoints.variable_map(encoder)[name].numpy())
    _outputs_equal(encoder, loaded, random_inputs())
    assert not BertTokenizer.from_pretrained(tmp_path / "kb").lowercase


def test_save_pretrained_is_atomic(tmp_path, monkeypatch):
    first = BertEncoder(odd_config())
    first.save_pretrained(tmp_path / "kb")
    before = (tmp_path / "kb" / "model.safetensors").read_bytes()
    from kbert.convert import folders

    def crash(path, tensors, metadata=None, **kwargs):
        with open(path, "wb") as f:
            f.write(b"half a file")
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(folders, "write_safetensors", crash)
    with pytest.raises(KeyboardInterrupt):
        BertEncoder(odd_config(hidden_size=16, num_heads=2)).save_pretrained(tmp_path / "kb")
    assert (tmp_path / "kb" / "model.safetensors").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["kb"]  # no temporary folder left behind
    BertEncoder.from_pretrained(tmp_path / "kb")


def _write_hf_folder(encoder, folder, hidden_act="gelu", prefix=""):
    """Writes a Hugging Face folder with transformers' own save_pretrained."""
    import torch
    import transformers

    cfg = encoder.config
    hf_cfg = transformers.BertConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size,
        hidden_act=hidden_act, max_position_embeddings=cfg.max_position_embeddings,
        type_vocab_size=cfg.type_vocab_size, layer_norm_eps=cfg.layer_norm_epsilon)
    model = transformers.BertModel(hf_cfg).eval()
    state = {}
    for name, var in checkpoints.variable_map(encoder).items():
        hf_name, transpose = checkpoints.google_to_hf(name)
        value = var.numpy().T if transpose else var.numpy()
        state[hf_name] = torch.tensor(np.ascontiguousarray(value))
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("position_ids" in m for m in missing), (missing, unexpected)
    model.save_pretrained(folder)
    return model


@pytest.mark.parity
@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_hf_folder_loads_with_transformers_outputs(tmp_path, hidden_act):
    import torch
    source = BertEncoder(odd_config(hidden_act=hidden_act))
    ref = _write_hf_folder(source, tmp_path / "hf", hidden_act)
    assert (tmp_path / "hf" / "model.safetensors").exists()
    encoder = BertEncoder.from_pretrained(tmp_path / "hf")
    assert encoder.config.hidden_act == {"gelu": "gelu", "gelu_new": "gelu_tanh"}[hidden_act]
    inputs = random_inputs()
    out = encoder(inputs)
    with torch.no_grad():
        r = ref(**{"input_ids": torch.tensor(inputs["token_ids"]).long(),
                   "token_type_ids": torch.tensor(inputs["segment_ids"]).long(),
                   "attention_mask": torch.tensor(inputs["padding_mask"]).long()})
    m = inputs["padding_mask"].astype(bool)
    assert np.abs(out["sequence_output"].numpy()[m] - r.last_hidden_state.numpy()[m]).max() < 1e-5
    assert np.abs(out["pooled_output"].numpy() - r.pooler_output.numpy()).max() < 1e-5


@pytest.mark.parity
def test_hf_pytorch_bin_with_task_head_prefix(tmp_path):
    import torch
    source = BertEncoder(odd_config())
    state = {"cls.predictions.bias": torch.zeros(99)}  # a head the encoder ignores
    for name, var in checkpoints.variable_map(source).items():
        hf_name, transpose = checkpoints.google_to_hf(name)
        hf_name = hf_name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta")  # the oldest Hugging Face names
        value = var.numpy().T if transpose else var.numpy()
        state["bert." + hf_name] = torch.tensor(np.ascontiguousarray(value))
    (tmp_path / "old").mkdir()
    torch.save(state, tmp_path / "old" / "pytorch_model.bin")
    (tmp_path / "old" / "config.json").write_text(
        '{"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, '
        '"intermediate_size": 37, "vocab_size": 99, "type_vocab_size": 3, '
        '"max_position_embeddings": 40, "hidden_dropout_prob": 0.0, '
        '"attention_probs_dropout_prob": 0.0}')
    encoder = BertEncoder.from_pretrained(tmp_path / "old")
    _outputs_equal(source, encoder, random_inputs())
    # transformers reads the same file (its prefix and old LayerNorm names) to the same
    # outputs: the reference, not kbert, says what the file holds.
    import transformers

    ref, info = transformers.BertModel.from_pretrained(tmp_path / "old",
                                                       output_loading_info=True)
    assert not info["missing_keys"] and info["unexpected_keys"] == {"cls.predictions.bias"}
    inputs = random_inputs()
    out = encoder(inputs)
    with torch.no_grad():
        r = ref.eval()(input_ids=torch.tensor(inputs["token_ids"]).long(),
                       token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
                       attention_mask=torch.tensor(inputs["padding_mask"]).long())
    m = inputs["padding_mask"].astype(bool)
    assert np.abs(out["sequence_output"].numpy()[m] - r.last_hidden_state.numpy()[m]).max() < 1e-5
    assert np.abs(out["pooled_output"].numpy() - r.pooler_output.numpy()).max() < 1e-5


@pytest.mark.parity
def test_real_minilm_matches_transformers(minilm_dir):
    """The real pretrained MiniLM-L6 (Hugging Face folder) against transformers.BertModel."""
    import torch
    import transformers
    encoder = BertEncoder.from_pretrained(minilm_dir)
    tok = BertTokenizer.from_pretrained(minilm_dir)
    a = ["The quick brown fox jumps over the lazy dog.", "Héllo wörld! 北京欢迎你。",
         "kbert loads real checkpoints " * 12, ""]
    b = ["Is it quick?", "", "Yes, it does.", "short"]
    inputs = {k: v.numpy() for k, v in tok(a, b, seq_length=64).items()}
    out = encoder(inputs)
    ref = transformers.BertModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        r = ref(input_ids=torch.tensor(inputs["token_ids"]).long(),
                token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
                attention_mask=torch.tensor(inputs["padding_mask"]).long())
    m = inputs["padding_mask"].astype(bool)
    seq_diff = np.abs(out["sequence_output"].numpy()[m] - r.last_hidden_state.numpy()[m]).max()
    pool_diff = np.abs(out["pooled_output"].numpy() - r.pooler_output.numpy()).max()
    assert seq_diff <= 1e-4 and pool_diff <= 1e-4, (seq_diff, pool_diff)
    for ours, theirs in zip(out["hidden_states"], ref(
            input_ids=torch.tensor(inputs["token_ids"]).long(),
            token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
            attention_mask=torch.tensor(inputs["padding_mask"]).long(),
            output_hidden_states=True).hidden_states):
        assert np.abs(ours.numpy()[m] - theirs.detach().numpy()[m]).max() <= 1e-4


def _write_google_checkpoint(encoder, folder, drop=None, reshape=None, extra=None):
    """Writes a TF1 name-based checkpoint with Google's original variable names."""
    folder.mkdir(parents=True, exist_ok=True)
    values = {n: v.numpy() for n, v in checkpoints.variable_map(encoder).items()}
    values["cls/predictions/output_bias"] = np.zeros([encoder.config.vocab_size], "float32")
    values["global_step"] = np.array(1000, "int64")
    values["bert/embeddings/word_embeddings/adam_m"] = values["bert/embeddings/word_embeddings"]
    if drop:
        del values[drop]
    if reshape:
        values[reshape] = values[reshape][..., :-1]
    if extra:
        values[extra] = np.zeros([3], "float32")
    write_tf1_checkpoint(values, str(folder / "bert_model.ckpt"))
    cfg = encoder.config
    (folder / "bert_config.json").write_text(
        '{"attention_probs_dropout_prob": 0.0, "hidden_act": "gelu", '
        '"hidden_dropout_prob": 0.0, "hidden_size": %d, "initializer_range": 0.02, '
        '"intermediate_size": %d, "max_position_embeddings": %d, "num_attention_heads": %d, '
        '"num_hidden_layers": %d, "type_vocab_size": %d, "vocab_size": %d}'
        % (cfg.hidden_size, cfg.intermediate_size, cfg.max_position_embeddings, cfg.num_heads,
           cfg.num_layers, cfg.type_vocab_size, cfg.vocab_size))
    (folder / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")


def test_google_checkpoint_loads_with_identical_outputs(tmp_path):
    source = BertEncoder(odd_config(hidden_act="gelu_tanh"))
    _write_google_checkpoint(source, tmp_path / "uncased_L-3_H-32_A-4")
    loaded = BertEncoder.from_pretrained(tmp_path / "uncased_L-3_H-32_A-4")
    assert loaded.config.hidden_act == "gelu_tanh"  # what modeling.py computes
    _outputs_equal(source, loaded, random_inputs())
    tok = BertTokenizer.from_pretrained(tmp_path / "uncased_L-3_H-32_A-4")
    assert tok.lowercase and tok.vocabulary == TINY_VOCAB


@pytest.mark.parametrize("problem,message", [
    ("drop", "missing variable bert/encoder/layer_1/attention/self/key/kernel"),
    ("reshape", r"variable bert/encoder/layer_2/output/dense/kernel has shape \(37, 31\), "
                r"expected \(37, 32\)"),
    ("extra", "unexpected variable bert/encoder/layer_7/output/dense/bias"),
])
def test_corrupted_google_checkpoint_names_the_variable(tmp_path, problem, message):
    source = BertEncoder(odd_config(hidden_act="gelu_tanh"))
    kwargs = {"drop": {"drop": "bert/encoder/layer_1/attention/self/key/kernel"},
              "reshape": {"reshape": "bert/encoder/layer_2/output/dense/kernel"},
              "extra": {"extra": "bert/encoder/layer_7/output/dense/bias"}}[problem]
    _write_google_checkpoint(source, tmp_path / "g", **kwargs)
    with pytest.raises(ValueError, match=message):
        BertEncoder.from_pretrained(tmp_path / "g")


def test_truncated_google_checkpoint_names_the_file(tmp_path):
    source = BertEncoder(odd_config(hidden_act="gelu_tanh"))
    _write_google_checkpoint(source, tmp_path / "g")
    data = next((tmp_path / "g").glob("bert_model.ckpt.data-*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"bert_model\.ckpt.*(variable bert/|cannot read)"):
        BertEncoder.from_pretrained(tmp_path / "g")


def test_hf_mismatch_names_variable(tmp_path):
    from safetensors.numpy import save_file

    source = BertEncoder(odd_config())
    tensors = {}
    for name, var in checkpoints.variable_map(source).items():
        hf_name, transpose = checkpoints.google_to_hf(name)
        tensors[hf_name] = np.ascontiguousarray(var.numpy().T if transpose else var.numpy())
    del tensors["pooler.dense.weight"]
    tensors["encoder.layer.0.attention.self.query.weight"] = np.zeros((32, 31), "float32")
    (tmp_path / "hf").mkdir()
    save_file(tensors, str(tmp_path / "hf" / "model.safetensors"))
    (tmp_path / "hf" / "config.json").write_text(
        '{"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, '
        '"intermediate_size": 37, "vocab_size": 99, "type_vocab_size": 3, '
        '"max_position_embeddings": 40}')
    with pytest.raises(ValueError) as err:
        BertEncoder.from_pretrained(tmp_path / "hf")
    text = str(err.value)
    assert "model.safetensors" in text
    assert "missing variable pooler.dense.weight" in text
    assert "encoder.layer.0.attention.self.query.weight has shape (31, 32)" in text


def test_unknown_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        BertEncoder.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="nope: no such model folder, and not a "
                                                "Hugging Face Hub repo id"):
        BertEncoder.from_pretrained(tmp_path / "nope")


def test_config_overrides(tmp_path):
    BertEncoder(odd_config(dropout=0.1)).save_pretrained(tmp_path / "kb")
    assert BertEncoder.from_pretrained(tmp_path / "kb", dropout=0.0).config.dropout == 0.0
    assert BertConfig.from_json_file(tmp_path / "kb" / "config.json").dropout == 0.1
