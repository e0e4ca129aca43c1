"""The `elmo` SavedModel in a fresh process (only tensorflow and tensorflow_text)
against the outputs in Python, batches of 1 and 32, empty strings included."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.export.check import keep_served, run_fresh
from kbert.export.elmo_graph import elmo_outputs, export_elmo

pytestmark = [pytest.mark.e2e, pytest.mark.subprocess]

TEXTS = ["The cat sat on the mat .", "", "naïve café 数字 🙂", "one", "  two  words  "]


def test_elmo_export_equals_python_in_a_fresh_process(tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    config = kbert.ELMoConfig.preset("tiny")
    model = kbert.ELMo(config)
    tokenizer = kbert.ELMoCharTokenizer(config.max_characters_per_token)
    mix = kbert.layers.ScalarMix(3, name="elmo_mix")
    mix([tf.zeros([1, 1, model.hidden_size])] * 3)
    mix.scalars.assign([0.2, -0.4, 0.9])
    mix.gamma.assign(1.3)
    export = tmp_path / "serving" / "elmo" / "1"
    batch32 = (TEXTS * 7)[:32]
    # `token_ids`: the tokenizer's own char_ids in, the same layers out. Every request
    # after one load by each loader (the C++ loader's: the exporter's own, `keep_served`).
    inputs = {k: v.numpy().tolist() for k, v in tokenizer(tf.constant(TEXTS)).items()}
    requests = [{"text": [TEXTS[0]]}, {"text": [""]}, {"text": batch32}, inputs,
                {"text": TEXTS}]
    names = ["serving_default"] * 3 + ["token_ids", "serving_default"]
    with keep_served(also=list(zip(names, requests))):
        export_elmo(model, tokenizer, str(export), mix, serving_version="2.12")
        assert kbert.export.check.check(str(export), "2.12")
        fresh = run_fresh(str(export), requests, signature=names)
    assert fresh["modules"] == []
    for texts, result in zip([[TEXTS[0]], [""], batch32], fresh["results"]):
        want = {k: v.numpy() for k, v in elmo_outputs(model, tokenizer, mix,
                                                       tf.constant(texts)).items()}
        assert set(result) == {"word_emb", "lstm_outputs1", "lstm_outputs2", "elmo",
                               "default", "sequence_len"}
        for name, value in want.items():
            got = np.array(result[name]["value"]).reshape(result[name]["shape"])
            np.testing.assert_allclose(got, value, atol=1e-5, err_msg=name)
    raw, by_text = fresh["results"][3:]
    assert set(raw) == set(by_text)
    for name in raw:
        np.testing.assert_allclose(raw[name]["value"], by_text[name]["value"], atol=1e-6,
                                   err_msg=name)
    lengths = np.array(fresh["results"][2]["sequence_len"]["value"])
    assert lengths.tolist()[:5] == [7, 0, 4, 1, 2]
    empty = fresh["results"][1]
    assert empty["sequence_len"]["value"] == [0] and not any(empty["default"]["value"])


def test_stateful_models_are_not_exported(tmp_path):
    model = kbert.ELMo(kbert.ELMoConfig.preset("tiny"), stateful=True)
    with pytest.raises(ValueError, match="export a stateless ELMo"):
        export_elmo(model, kbert.ELMoCharTokenizer(12), str(tmp_path / "x" / "1"))


def test_export_command_from_a_bilm_tf_folder(tmp_path, capsys):

    from test_elmo import VARIANTS, _write_folder

    config = kbert.ELMoConfig(**VARIANTS["skip-relu-proj"])
    _write_folder(tmp_path / "elmo", config)
    export = tmp_path / "serving" / "elmo" / "1"
    from kbert.export.__main__ import main as export_main
    from tests.conftest import run_cli

    from kbert.export.check import keep_served, served_results

    with keep_served(also=[{"text": ["a b c", ""]}]):  # answered in the exporter's C++ load
        code, _, stderr = run_cli(export_main, ["--model_dir", tmp_path / "elmo", "--task",
                                                "elmo", "--export_dir", export, "--no_check"],
                                  capsys)
        assert code == 0, stderr[-3000:]
        fresh = served_results(str(export), [{"text": ["a b c", ""]}])
    assert fresh[0]["elmo"]["shape"] == [2, 3, 12]
