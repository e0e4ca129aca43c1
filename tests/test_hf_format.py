"""`save_pretrained(path, format="huggingface")`: folders that `transformers` loads, with
outputs equal to kbert's (weights changed in kbert first, so the mapping is what is
tested, not a copy of the files read)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers

import kbert
from tests.test_gpt import _batch, _reference, _reference_logits


def _perturb(model, seed=0):
    """Every weight moved, as a fine-tune would."""
    rng = np.random.default_rng(seed)
    for v in model.weights:
        if v.dtype == "float32" and "seed" not in v.path:
            v.assign(v.numpy() + rng.normal(0, 0.01, v.shape).astype("float32"))


def test_bert_folder_loads_in_transformers(minilm_dir, tmp_path):
    encoder = kbert.BertEncoder.from_pretrained(minilm_dir)
    tokenizer = kbert.BertTokenizer.from_pretrained(minilm_dir)
    _perturb(encoder)
    encoder.save_pretrained(tmp_path / "hf", tokenizer=tokenizer, format="huggingface")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["model_type"] == "bert" and "kbert_model" not in config
    texts = ["Saved for transformers.", "A second, longer sentence to pad the other."]
    inputs = tokenizer(texts, seq_length=16)
    ref_tok = transformers.BertTokenizer.from_pretrained(tmp_path / "hf")
    want_ids = ref_tok(texts, max_length=16, padding="max_length", truncation=True)
    assert inputs["token_ids"].numpy().tolist() == want_ids["input_ids"]
    ref, info = transformers.BertModel.from_pretrained(tmp_path / "hf",
                                                       output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ref.eval()
    with torch.no_grad():
        want = ref(input_ids=torch.tensor(want_ids["input_ids"]),
                   attention_mask=torch.tensor(want_ids["attention_mask"]))
    got = encoder(inputs)
    real = inputs["padding_mask"].numpy()[..., None].astype(bool)
    np.testing.assert_allclose(got["sequence_output"].numpy() * real,
                               want.last_hidden_state.numpy() * real, atol=1e-5)
    np.testing.assert_allclose(got["pooled_output"].numpy(), want.pooler_output.numpy(),
                               atol=1e-5)
    # kbert reads its own Hugging Face folder back as any other.
    again = kbert.BertEncoder.from_pretrained(tmp_path / "hf")
    for a, b in zip(again.weights, encoder.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("kind, cls", [("gpt2", "GPT2LMHeadModel"),
                                       ("openai-gpt", "OpenAIGPTLMHeadModel")])
def test_gpt_folders_load_in_transformers(tmp_path, kind, cls):
    _reference(kind).save_pretrained(tmp_path / "src")
    lm = kbert.GPTLanguageModel.from_pretrained(tmp_path / "src")
    _perturb(lm.decoder, seed=1)
    lm.save_pretrained(tmp_path / "hf", format="huggingface")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == [cls]
    ref, info = getattr(transformers, cls).from_pretrained(tmp_path / "hf",
                                                           output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ref.eval()
    ids, mask = _batch()
    want = _reference_logits(ref, ids, mask)
    got = lm({"token_ids": ids, "padding_mask": mask})["logits"].numpy()
    real = mask[..., None].astype(bool)
    np.testing.assert_allclose(got * real, want * real, atol=1e-4)


def test_roberta_folders_load_in_transformers(tmp_path):
    torch.manual_seed(0)
    config = transformers.RobertaConfig(
        vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=66, type_vocab_size=1,
        pad_token_id=1, bos_token_id=0, eos_token_id=2)
    transformers.RobertaForMaskedLM(config).eval().save_pretrained(tmp_path / "mlm")
    transformers.RobertaModel(config).eval().save_pretrained(tmp_path / "model")
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 120, (2, 9))
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    ids = np.where(mask == 1, ids, 1)
    real = mask[..., None].astype(bool)
    for folder, kbert_cls, ref_cls, output in (
            ("model", kbert.RobertaEncoder, transformers.RobertaModel, "sequence_output"),
            ("mlm", kbert.RobertaMaskedLM, transformers.RobertaForMaskedLM, "logits")):
        model = kbert_cls.from_pretrained(tmp_path / folder)
        _perturb(model, seed=2)
        model.save_pretrained(tmp_path / f"{folder}_hf", format="huggingface")
        ref, info = ref_cls.from_pretrained(tmp_path / f"{folder}_hf", output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"], (folder, info)
        ref.eval()
        with torch.no_grad():
            out = ref(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
        want = out.last_hidden_state if output == "sequence_output" else out.logits
        got = model({"token_ids": ids, "padding_mask": mask})[output].numpy()
        np.testing.assert_allclose(got * real, want.numpy() * real, atol=1e-4)


def test_formats_kbert_cannot_write_are_refused(tmp_path):
    elmo = kbert.ELMo(kbert.ELMoConfig.preset("tiny"))
    with pytest.raises(NotImplementedError, match="ELMo: no Hugging Face layout to write"):
        elmo.save_pretrained(tmp_path / "x", format="huggingface")
    encoder = kbert.BertEncoder(kbert.BertConfig.preset("tiny", vocab_size=40))
    with pytest.raises(ValueError, match=r"format='onnx'\): use one of kbert, huggingface"):
        encoder.save_pretrained(tmp_path / "x", format="onnx")
    assert not (tmp_path / "x").exists()
