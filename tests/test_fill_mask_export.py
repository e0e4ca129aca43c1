"""The `fill_mask` SavedModel of a `BertPretrainer` (`python -m kbert.export --task
fill_mask`): in a fresh process with only TensorFlow and tensorflow-text it returns what
the Python model gives, for batches of one and several texts with no, one and two
masks, empty text included; the in-graph inputs are those of the Python tokenizer."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.export.fill_mask_graph import fill_mask_inputs

TEXTS = ["the cat sat on the [MASK] .", "[MASK] dog ran to the [MASK]", "no mask here",
         "", "[MASK]"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    words = "the cat sat on mat dog ran to park a no mask here".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "##s", ".", "##at"]
    keras.utils.set_random_seed(0)
    config = kbert.BertConfig.preset("tiny", vocab_size=len(vocab))
    model = kbert.BertPretrainer(kbert.BertEncoder(config))
    model({"token_ids": tf.zeros([1, 4], tf.int32), "segment_ids": tf.zeros([1, 4], tf.int32),
           "padding_mask": tf.ones([1, 4], tf.int32),
           "masked_lm_positions": tf.zeros([1, 1], tf.int32)})
    path = tmp_path_factory.mktemp("pre") / "bert"
    model.save_pretrained(path, tokenizer=kbert.BertTokenizer(vocab))
    return path


def test_inputs_put_the_mask_token_where_the_text_says(folder):
    tok = kbert.BertTokenizer.from_pretrained(folder)
    x = fill_mask_inputs(tok, tf.constant(TEXTS), 12)
    ids = x["token_ids"].numpy()
    want = tok(["the cat sat on the", "dog ran to the", "no mask here", "", ""],
               seq_length=12)["token_ids"].numpy()
    m = tok.mask_id
    assert ids[0].tolist()[:8] == want[0].tolist()[:6] + [m, tok.token_to_id(".")]
    assert ids[1].tolist()[:7] == [tok.cls_id, m, *want[1].tolist()[1:5], m]
    assert x["mask_count"].numpy().tolist() == [1, 2, 0, 0, 1]
    assert x["masked_lm_positions"].numpy().tolist() == [[6, 0], [1, 6], [0, 0], [0, 0],
                                                        [1, 0]]


@pytest.mark.subprocess
def test_export_in_a_fresh_process_equals_python(folder, tmp_path):
    from kbert.export import __main__ as export_cli
    from kbert.export.check import keep_served, served_results

    export = tmp_path / "serving" / "fill" / "1"
    model = kbert.BertPretrainer.from_pretrained(folder)
    tok = kbert.BertTokenizer.from_pretrained(folder)
    vocab = np.array(tok.vocabulary)
    # Both signatures after one load by TF Serving's C++ loader (the exporter's, before
    # the export is moved into place).
    x = fill_mask_inputs(tok, tf.constant(TEXTS), 16)
    x.pop("mask_count")
    requests = [{"text": [TEXTS[0]]}, {"text": TEXTS},
                {k: v.numpy().tolist() for k, v in x.items()}]
    names = ["serving_default"] * 2 + ["token_ids"]
    with keep_served(also=list(zip(names, requests))):
        # The command's check runs the warmup requests in both loaders (fresh processes).
        assert export_cli.main(["--model_dir", str(folder), "--task", "fill_mask",
                                "--export_dir", str(export), "--top_k", "3",
                                "--seq_length", "16"]) == 0
        answers = served_results(str(export), requests, names)
    # Both signatures are warmed at load (#51 item 5).
    warm = kbert.export.read_warmup_requests(str(export), with_signatures=True)
    assert warm[-1][0] == "token_ids" and warm[-1][1]["masked_lm_positions"] == [[1], [1]]
    for batch, fresh in zip(([TEXTS[0]], TEXTS), answers):
        x = fill_mask_inputs(tok, tf.constant(batch), 16)
        count = x.pop("mask_count").numpy()
        probs = tf.nn.softmax(model(x)["mlm_logits"]).numpy()
        masks = probs.shape[1]
        got_p = np.array(fresh["probabilities"]["value"]).reshape(len(batch), masks, 3)
        got_t = np.array(fresh["tokens"]["value"]).reshape(len(batch), masks, 3)
        assert fresh["mask_count"]["value"] == count.tolist()
        for r in range(len(batch)):
            for k in range(masks):
                if k >= count[r]:
                    assert (got_t[r, k] == "").all() and (got_p[r, k] == 0).all()
                    continue
                top = np.argsort(-probs[r, k], kind="stable")[:3]
                np.testing.assert_allclose(got_p[r, k], probs[r, k][top], atol=1e-5)
                assert got_t[r, k].tolist() == vocab[top].tolist()
    # token_ids: the pretrainer's own inputs in, its masked-LM logits out
    x = fill_mask_inputs(tok, tf.constant(TEXTS), 16)
    x.pop("mask_count")
    raw = answers[2]["mlm_logits"]
    want = model(x)["mlm_logits"].numpy()
    assert raw["shape"] == list(want.shape)
    np.testing.assert_allclose(np.reshape(raw["value"], want.shape), want, rtol=1e-5,
                               atol=1e-5)
