"""T5 and BART train with `model.fit` under the default strategy and MirroredStrategy on
two logical CPUs (conftest) with the same losses, on a copy task (the decoder writes the
encoder's input) whose loss falls (from ln(140) = 4.9; 40 steps of a tiny model)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert import training
from kbert.models.metrics import lm_loss


def _train(family: str, strategy, steps: int = 40):
    tf.keras.utils.set_random_seed(0)
    if family == "t5":
        config = kbert.T5Config.preset("tiny", vocab_size=140, dropout=0.0)
        make, start = kbert.T5Seq2SeqLM, 0
    else:
        config = kbert.BartConfig.preset("tiny", vocab_size=140, dropout=0.0)
        make, start = kbert.BartSeq2SeqLM, 2
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 130, (256, 8)).astype("int32")
    ids[:, -1] = config.end_token_id
    decoder = np.concatenate([np.full((256, 1), start, "int32"), ids[:, :-1]], axis=1)
    features = {"encoder_token_ids": ids, "encoder_padding_mask": np.ones_like(ids),
                "decoder_token_ids": decoder, "decoder_padding_mask": np.ones_like(ids)}
    data = tf.data.Dataset.from_tensor_slices((features, {"logits": ids})).repeat().batch(16)
    with strategy.scope():
        model = make(config)
        np.testing.assert_array_equal(model.shift_right(ids[:2]).numpy(), decoder[:2])
        model.compile(optimizer=tf.keras.optimizers.AdamW(3e-3), loss={"logits": lm_loss()})
    history = model.fit(data, steps_per_epoch=steps // 4, epochs=4, verbose=0)
    return history.history["loss"]


@pytest.mark.e2e
@pytest.mark.parametrize("family", ["t5", "bart"])
def test_fit_under_default_and_mirrored_strategies(family):
    default = _train(family, tf.distribute.get_strategy())
    mirrored_strategy = training.resolve_strategy("mirrored")
    assert mirrored_strategy.num_replicas_in_sync == 2
    mirrored = _train(family, mirrored_strategy)
    assert default[-1] < default[0] - 0.4, default
    np.testing.assert_allclose(mirrored, default, rtol=2e-3)
