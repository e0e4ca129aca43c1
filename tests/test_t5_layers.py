"""T5's layers (`kbert.layers.t5`) against `transformers`' T5 modules, run on the same
inputs with the same weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from transformers.models.t5 import modeling_t5

from kbert.layers.t5 import (GatedFeedForward, RMSNorm, RelativePositionBias,
                             relative_position_bucket)


def _config(**overrides):
    return transformers.T5Config(d_model=16, d_kv=4, d_ff=24, num_heads=4, num_layers=2,
                                 dropout_rate=0.0, **overrides)


def test_rms_norm_equals_t5_layer_norm():
    rng = np.random.default_rng(0)
    x = rng.normal(0, 3, (2, 5, 16)).astype("float32")
    scale = rng.normal(1, 0.2, 16).astype("float32")
    ref = modeling_t5.T5LayerNorm(16, eps=1e-6)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(scale))
        want = ref(torch.tensor(x)).numpy()
    norm = RMSNorm(1e-6)
    norm.build(x.shape)
    norm.scale.assign(scale)
    np.testing.assert_allclose(np.asarray(norm(x)), want, atol=1e-6)


@pytest.mark.parametrize("bidirectional", [True, False], ids=["encoder", "decoder"])
@pytest.mark.parametrize("buckets, distance", [(32, 128), (16, 40)])
def test_buckets_and_bias_equal_t5_attention(bidirectional, buckets, distance):
    # Positions far past max_distance, both signs.
    relative = torch.arange(-300, 301)[None, :] - torch.arange(0, 7)[:, None] * 45
    want = modeling_t5.T5Attention._relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=buckets, max_distance=distance)
    got = relative_position_bucket(relative.numpy(), bidirectional, buckets, distance)
    np.testing.assert_array_equal(np.asarray(got), want.numpy())
    config = _config(relative_attention_num_buckets=buckets,
                     relative_attention_max_distance=distance, is_decoder=not bidirectional)
    torch.manual_seed(0)
    ref = modeling_t5.T5Attention(config, has_relative_attention_bias=True)
    layer = RelativePositionBias(4, buckets, distance, bidirectional)
    layer.build()
    layer.embeddings.assign(ref.relative_attention_bias.weight.detach().numpy())
    for q, k, start in ((9, 9, 0), (1, 12, 11), (3, 20, 17)):  # full, and decoding steps
        with torch.no_grad():
            expected = ref.compute_bias(q, k, past_seen_tokens=start).numpy()
        np.testing.assert_array_equal(np.asarray(layer.bias(q, k, start=start)), expected)


@pytest.mark.parametrize("gated, act", [(True, "gelu_new"), (False, "relu")])
def test_feed_forward_equals_t5_dense(gated, act):
    config = _config(feed_forward_proj=("gated-gelu" if gated else "relu"))
    torch.manual_seed(1)
    ref = (modeling_t5.T5DenseGatedActDense if gated else modeling_t5.T5DenseActDense)(config)
    ref.eval()
    x = np.random.default_rng(1).normal(size=(2, 3, 16)).astype("float32")
    layer = GatedFeedForward(16, 24, "gelu_tanh" if gated else "relu", gated=gated)
    layer.build(x.shape)
    sources = ([ref.wi_0, ref.wi_1] if gated else [ref.wi]) + [ref.wo]
    targets = [layer.wi_0] + ([layer.wi_1] if gated else []) + [layer.wo]
    for source, target in zip(sources, targets):
        target.kernel.assign(source.weight.detach().numpy().T)
    with torch.no_grad():
        want = ref(torch.tensor(x)).numpy()
    np.testing.assert_allclose(np.asarray(layer(x)), want, atol=1e-5)
