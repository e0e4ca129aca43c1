"""kbert.layers against NumPy references, and cached decoding against the full pass."""

import math

import keras
import numpy as np
import pytest

from kbert.layers import (MultiHeadAttention, PositionEmbedding, TokenEmbedding,
                          TransformerBlock, causal_mask, key_mask, padding_bias)

B, T, H, N, I = 3, 7, 12, 3, 17  # distinct sizes: a swapped axis fails


def _np_layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


_erf = np.vectorize(math.erf)


def _np_gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _np_attention(x, w, allowed):
    """x [B, T, H]; w: dict of q/k/v kernels and biases; allowed bool [B, T, T]."""
    def heads(y):  # (B, T, H) -> (B, N, T, D)
        return y.reshape(B, T, N, H // N).transpose(0, 2, 1, 3)

    q, k, v = (heads(x @ w[f"{n}_kernel"] + w[f"{n}_bias"]) for n in "qkv")
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(H // N)  # (B, N, T, T)
    scores = np.where(allowed[:, None], scores, -1e9)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, H)


def _np_block(x, block, allowed, norm_first):
    attention = block.attention
    w = {f"{n}_kernel": getattr(attention, name).kernel.numpy()
         for n, name in (("q", "query"), ("k", "key"), ("v", "value"))}
    w.update({f"{n}_bias": getattr(attention, name).bias.numpy()
              for n, name in (("q", "query"), ("k", "key"), ("v", "value"))})

    def dense(layer, y):
        return y @ layer.kernel.numpy() + layer.bias.numpy()

    def norm(layer, y):
        return _np_layer_norm(y, layer.gamma.numpy(), layer.beta.numpy(), layer.epsilon)

    if norm_first:
        x = x + dense(block.attention_output,
                      _np_attention(norm(block.attention_layer_norm, x), w, allowed))
        ffn = dense(block.output_dense, _np_gelu(dense(block.intermediate,
                                                       norm(block.output_layer_norm, x))))
        return x + ffn
    x = norm(block.attention_layer_norm, x + dense(block.attention_output,
                                                   _np_attention(x, w, allowed)))
    ffn = dense(block.output_dense, _np_gelu(dense(block.intermediate, x)))
    return norm(block.output_layer_norm, x + ffn)


def _padding(left: bool):
    mask = np.ones((B, T), "int32")
    for b, n in enumerate((0, 2, 4)):  # pad 0, 2 and 4 positions
        if n:
            if left:
                mask[b, :n] = 0
            else:
                mask[b, T - n:] = 0
    return mask


def _block(norm_first, seed=0):
    keras.utils.set_random_seed(seed)
    init = {"class_name": "RandomNormal", "config": {"stddev": 0.3, "seed": seed}}
    block = TransformerBlock(H, N, I, hidden_act="gelu", dropout=0.0, attention_dropout=0.0,
                             layer_norm_epsilon=1e-5, norm_first=norm_first,
                             kernel_initializer=init)
    block.build((None, None, H))
    rng = np.random.default_rng(seed)
    for v in block.weights:  # biases and LayerNorm parameters non-trivial too
        if "kernel" not in v.path:
            offset = 1.0 if "gamma" in v.path else 0.0
            v.assign(rng.normal(0, 0.3, v.shape).astype("float32") + offset)
    return block


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_block_equals_numpy(norm_first, causal):
    block = _block(norm_first)
    x = np.random.default_rng(1).normal(size=(B, T, H)).astype("float32")
    mask = _padding(left=False)
    allowed = np.broadcast_to(mask[:, None, :].astype(bool), (B, T, T))
    if causal:
        allowed = allowed & np.tril(np.ones((T, T), bool))[None]
    got = block(x, attention_mask=key_mask(mask), causal=causal).numpy()
    want = _np_block(x, block, allowed, norm_first)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], want[real], atol=1e-5, rtol=1e-5)


def test_padding_bias_and_mask_give_the_same_attention():
    block = _block(norm_first=False)
    x = np.random.default_rng(2).normal(size=(B, T, H)).astype("float32")
    mask = _padding(left=False)
    with_bias = block(x, attention_bias=padding_bias(mask)).numpy()
    with_mask = block(x, attention_mask=key_mask(mask)).numpy()
    real = mask.astype(bool)
    np.testing.assert_allclose(with_bias[real], with_mask[real], atol=1e-6)


def _decode_in_chunks(blocks, x, mask, chunk):
    """Runs the blocks over x [B, T, H] `chunk` positions at a time with a cache."""
    caches = [(np.zeros((B * N, T, H // N), "float32"),) * 2 for _ in blocks]
    outputs = []
    for start in range(0, T, chunk):
        h = x[:, start:start + chunk]
        for i, block in enumerate(blocks):
            h, caches[i] = block(h, attention_mask=key_mask(mask), causal=True,
                                 cache=caches[i], cache_index=start)
        outputs.append(np.asarray(h))
    return np.concatenate(outputs, axis=1)


@pytest.mark.parametrize("left", [False, True], ids=["right_padded", "left_padded"])
@pytest.mark.parametrize("chunk", [1, 3], ids=["one_token", "three_tokens"])
def test_cached_decoding_equals_the_full_causal_pass(left, chunk):
    blocks = [_block(norm_first=True, seed=s) for s in (3, 4)]
    x = np.random.default_rng(5).normal(size=(B, T, H)).astype("float32")
    mask = _padding(left)
    full = x
    for block in blocks:
        full = block(full, attention_mask=key_mask(mask), causal=True)
    cached = _decode_in_chunks(blocks, x, mask, chunk)
    real = mask.astype(bool)
    np.testing.assert_allclose(cached[real], np.asarray(full)[real], atol=1e-5, rtol=1e-5)


def test_cache_update_and_index_as_tensors():
    """The same step under tf.function with the index a tensor (one trace per shape)."""
    import tensorflow as tf

    attention = MultiHeadAttention(H, N, attention_dropout=0.0)
    x = np.random.default_rng(6).normal(size=(B, T, H)).astype("float32")
    full = attention(x, causal=True).numpy()

    @tf.function
    def step(token, cache, index):
        return attention(token, causal=True, cache=cache, cache_index=index)

    cache = (tf.zeros((B * N, T, H // N)),) * 2  # keys, values: [B*N, S, D]
    for t in range(T):
        out, cache = step(x[:, t:t + 1], cache, tf.constant(t))
        np.testing.assert_allclose(out.numpy()[:, 0], full[:, t], atol=1e-5)
    assert len(step._list_all_concrete_functions()) == 1
    # The cache holds every position's keys and values: position 0's keys equal the
    # key projection of x[:, 0], split into heads.
    keys0 = attention.key(x[:, :1]).numpy().reshape(B, N, H // N)
    np.testing.assert_allclose(cache[0].numpy().reshape(B, N, T, -1)[:, :, 0], keys0, atol=1e-6)
    values0 = attention.value(x[:, :1]).numpy().reshape(B, N, H // N)
    np.testing.assert_allclose(cache[1].numpy().reshape(B, N, T, -1)[:, :, 0], values0,
                               atol=1e-6)


def test_cross_attention_reads_keys_and_values_from_the_other_input():
    attention = MultiHeadAttention(H, N, attention_dropout=0.0)
    rng = np.random.default_rng(7)
    q, kv = rng.normal(size=(B, 2, H)).astype("f"), rng.normal(size=(B, 5, H)).astype("f")
    out = attention(q, key_value=kv).numpy()
    assert out.shape == (B, 2, H)
    # Every query row attends to the same keys: permuting kv rows changes nothing.
    np.testing.assert_allclose(attention(q, key_value=kv[:, ::-1]).numpy(), out, atol=1e-5)


def test_causal_mask_with_start_index():
    m = np.asarray(causal_mask(2, 5, start_index=2))[0]
    assert m.tolist() == [[True, True, True, False, False], [True, True, True, True, False]]


def test_position_embedding_rows_and_start_index():
    layer = PositionEmbedding(10, 4)
    table = np.asarray(layer(np.zeros((1, 10), "int32")))
    np.testing.assert_array_equal(np.asarray(layer(np.zeros((2, 3)), start_index=4)),
                                  table[4:7])
    with pytest.raises(ValueError, match="exceed the table's 10 rows"):
        layer(np.zeros((1, 4)), start_index=8)


def test_token_embedding_logits_are_tied():
    layer = TokenEmbedding(11, 4)
    ids = np.array([[1, 5, 10]])
    x = np.asarray(layer(ids))
    logits = np.asarray(layer.logits(x))
    table = layer.embeddings.numpy()
    np.testing.assert_allclose(logits, x @ table.T, rtol=1e-6, atol=1e-9)
    assert logits.dtype == np.float32 and logits.shape == (1, 3, 11)


def test_non_causal_cache_sees_only_written_positions():
    """Without `causal`, a cached call attends to every position written so far (this
    step's included) and to none of the cache's unwritten tail."""
    attention = MultiHeadAttention(H, N, attention_dropout=0.0)
    x = np.random.default_rng(8).normal(size=(B, T, H)).astype("float32")
    empty = (np.zeros((B * N, T + 3, H // N), "float32"),) * 2  # 3 unwritten at the end
    whole, _ = attention(x, cache=empty, cache_index=0)
    np.testing.assert_allclose(np.asarray(whole), np.asarray(attention(x)), atol=1e-5)
    first, cache = attention(x[:, :4], cache=empty, cache_index=0)
    np.testing.assert_allclose(np.asarray(first), np.asarray(attention(x[:, :4])), atol=1e-5)
    rest, _ = attention(x[:, 4:], cache=cache, cache_index=4)
    np.testing.assert_allclose(np.asarray(rest), np.asarray(attention(x))[:, 4:], atol=1e-5)
    with pytest.raises(ValueError, match=r"\[batch \* heads, length, head size\]; got shape "
                       rf"\({B}, {N}, {T + 3}, {H // N}\)"):
        attention(x, cache=(np.zeros((B, N, T + 3, H // N), "float32"),) * 2, cache_index=0)
