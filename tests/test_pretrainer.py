"""`BertPretrainer` against `transformers.BertForPreTraining` on the same weights (a
Hugging Face folder written by transformers), Google-layout checkpoints with `cls/*`,
the kbert folder round trip, and the losses and metrics of `run_pretraining.py`."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kbert
from tests.conftest import odd_config, random_inputs, write_tf1_checkpoint
from kbert.models.bert import checkpoints
from kbert.models.bert.pretrainer import BertPretrainer

pytestmark = pytest.mark.parity


def _inputs(seed=0, batch=5, seq=9, predictions=4):
    x = random_inputs(batch=batch, seq=seq, seed=seed)
    rng = np.random.default_rng(seed + 1)
    lengths = x["padding_mask"].sum(1)
    x["masked_lm_positions"] = np.stack([rng.integers(0, n, predictions) for n in lengths]
                                        ).astype("int32")
    return x


def _hf_folder(folder):
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = odd_config()
    hf_cfg = transformers.BertConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size,
        hidden_act="gelu", max_position_embeddings=cfg.max_position_embeddings,
        type_vocab_size=cfg.type_vocab_size, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)
    model = transformers.BertForPreTraining(hf_cfg).eval()
    with torch.no_grad():  # every head weight away from its initial value
        for name, p in model.named_parameters():
            if name.startswith("cls."):
                p.add_(torch.randn_like(p) * 0.3)
    model.save_pretrained(folder)
    return model


def test_logits_equal_transformers_bert_for_pretraining(tmp_path):
    import torch

    ref = _hf_folder(tmp_path / "hf")
    model = BertPretrainer.from_pretrained(tmp_path / "hf")
    x = _inputs()
    out = model(x)
    with torch.no_grad():
        theirs = ref(input_ids=torch.tensor(x["token_ids"]).long(),
                     token_type_ids=torch.tensor(x["segment_ids"]).long(),
                     attention_mask=torch.tensor(x["padding_mask"]).long())
    want_mlm = np.take_along_axis(theirs.prediction_logits.numpy(),
                                  x["masked_lm_positions"][:, :, None], axis=1)
    assert out["mlm_logits"].shape == (5, 4, 99) and out["nsp_logits"].shape == (5, 2)
    np.testing.assert_allclose(out["mlm_logits"].numpy(), want_mlm, atol=1e-4)
    np.testing.assert_allclose(out["nsp_logits"].numpy(),
                               theirs.seq_relationship_logits.numpy(), atol=1e-4)
    # The output bias is the head's own (not zero, not the decoder's tie).
    np.testing.assert_allclose(model.output_bias.numpy(),
                               ref.cls.predictions.bias.detach().numpy(), atol=0)


def _write_google(model, folder, drop=None):
    folder.mkdir(parents=True)
    values = {n: v.numpy() for n, v in checkpoints.variable_map(model.encoder).items()}
    values.update({n: v.numpy() for n, v in model.head_variables().items()})
    values["global_step"] = np.array(7, "int64")
    values["cls/predictions/output_bias/adam_m"] = values["cls/predictions/output_bias"]
    if drop:
        del values[drop]
    write_tf1_checkpoint(values, str(folder / "bert_model.ckpt"))
    c = model.encoder.config
    (folder / "bert_config.json").write_text(json.dumps(dict(
        attention_probs_dropout_prob=0.0, hidden_act="gelu", hidden_dropout_prob=0.0,
        hidden_size=c.hidden_size, initializer_range=0.02, intermediate_size=c.intermediate_size,
        max_position_embeddings=c.max_position_embeddings, num_attention_heads=c.num_heads,
        num_hidden_layers=c.num_layers, type_vocab_size=c.type_vocab_size,
        vocab_size=c.vocab_size)))


def _random_pretrainer(seed=3):
    import keras

    keras.utils.set_random_seed(seed)
    model = BertPretrainer(kbert.BertEncoder(odd_config(hidden_act="gelu_tanh")))
    model(_inputs())
    rng = np.random.default_rng(seed)
    for var in model.head_variables().values():
        var.assign(var.numpy() + rng.normal(0, 0.3, var.shape).astype("float32"))
    return model


def test_google_checkpoint_with_cls_heads_loads_with_the_same_outputs(tmp_path):
    source = _random_pretrainer()
    _write_google(source, tmp_path / "google")
    loaded = BertPretrainer.from_pretrained(tmp_path / "google")
    assert loaded.encoder.config.hidden_act == "gelu_tanh"  # what modeling.py computes
    x = _inputs(seed=4)
    for key in ("mlm_logits", "nsp_logits"):
        np.testing.assert_allclose(loaded(x)[key].numpy(), source(x)[key].numpy(), atol=1e-5)
    _write_google(source, tmp_path / "dropped", drop="cls/seq_relationship/output_bias")
    with pytest.raises(ValueError, match="missing variable cls/seq_relationship/output_bias"):
        BertPretrainer.from_pretrained(tmp_path / "dropped")


def test_kbert_folder_round_trip_and_the_encoder_alone(tmp_path):
    source = _random_pretrainer()
    source.save_pretrained(tmp_path / "kb")
    loaded = BertPretrainer.from_pretrained(tmp_path / "kb")
    x = _inputs(seed=5)
    for key in ("mlm_logits", "nsp_logits"):
        np.testing.assert_array_equal(loaded(x)[key].numpy(), source(x)[key].numpy())
    # The task commands' --init_from reads the same folder as an encoder.
    encoder = kbert.BertEncoder.from_pretrained(tmp_path / "kb")
    enc_inputs = {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    np.testing.assert_array_equal(encoder(enc_inputs)["pooled_output"].numpy(),
                                  source.encoder(enc_inputs)["pooled_output"].numpy())
    kbert.BertEncoder(odd_config()).save_pretrained(tmp_path / "plain")
    with pytest.raises(FileNotFoundError, match="no pretraining_heads.safetensors"):
        BertPretrainer.from_pretrained(tmp_path / "plain")


def test_losses_and_metrics_are_run_pretrainings():
    model = _random_pretrainer()
    x = _inputs(seed=6)
    rng = np.random.default_rng(6)
    y = {"masked_lm_ids": rng.integers(0, 99, (5, 4)).astype("int32"),
         "masked_lm_weights": np.array([[1, 1, 1, 0]] * 4 + [[1, 0, 0, 0]], "float32"),
         "next_sentence_labels": np.array([[0], [1], [1], [0], [1]], "int32")}
    out = model(x)
    loss = float(model.compute_loss(x, y, out, training=False))
    mlm, nsp = out["mlm_logits"].numpy(), out["nsp_logits"].numpy()

    def log_softmax(z):
        z = z - z.max(-1, keepdims=True)
        return z - np.log(np.exp(z).sum(-1, keepdims=True))

    nll = -np.take_along_axis(log_softmax(mlm), y["masked_lm_ids"][..., None], -1)[..., 0]
    w = y["masked_lm_weights"]
    labels = y["next_sentence_labels"][:, 0]
    nsp_nll = -log_softmax(nsp)[np.arange(5), labels]
    want = (w * nll).sum() / (w.sum() + 1e-5) + nsp_nll.mean()
    np.testing.assert_allclose(loss, want, rtol=1e-5)
    got = {m.name: float(m.result()) for m in model.metrics if m.name != "loss"}
    np.testing.assert_allclose(got["masked_lm_loss"], (w * nll).sum() / w.sum(), rtol=1e-5)
    np.testing.assert_allclose(got["masked_lm_accuracy"],
                               ((mlm.argmax(-1) == y["masked_lm_ids"]) * w).sum() / w.sum())
    np.testing.assert_allclose(got["next_sentence_accuracy"],
                               (nsp.argmax(-1) == labels).mean())
    np.testing.assert_allclose(got["next_sentence_loss"], nsp_nll.mean(), rtol=1e-5)
