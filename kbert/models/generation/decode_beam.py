"""Beam search's loop, transformers' `_beam_search` step for step."""

from __future__ import annotations

import tensorflow as tf

from kbert.layers.updates import write_at
from kbert.models.generation.processors import mark_present
from kbert.models.generation.state import (
    NEG_SCORE, isin, loop_shapes, start_state)


def _gather_beams(x, index):
    """x [B, M, ...] -> x [B, K, ...] at index [B, K]."""
    return tf.gather(x, index, batch_dims=1)


def beam_loop(lm, setting, token_ids, padding_mask, max_new_tokens, capacity, const):
    """transformers' `_beam_search` (4.5x-5.x), step for step: see the module docstring."""
    beam = setting.sampler
    # num_beams: a Python int, or the call's (a scalar tensor) when the setting has None
    k = const["num_beams"] if beam.num_beams is None else beam.num_beams
    penalty_power = float(beam.length_penalty)
    batch = tf.shape(token_ids)[0]
    state, key_mask, lengths = start_state(lm, setting, token_ids, padding_mask, capacity,
                                           k)
    vocab = lm.vocab_size
    width = state["width"]
    total = width + capacity
    keep = max(2, 1 + len(setting.ends)) * k
    top_mask = tf.range(keep) < k

    def unflat(x):
        return tf.reshape(x, tf.concat([[batch, k], tf.shape(x)[1:]], 0))

    def flat(x):
        return tf.reshape(x, tf.concat([[batch * k], tf.shape(x)[2:]], 0))

    seq = unflat(state.pop("seq"))  # (B, K, W)
    state.update(
        running=seq, running_scores=tf.tile(
            tf.where(tf.range(k) == 0, 0.0, NEG_SCORE)[None, :], [batch, 1]),
        running_lp=tf.zeros([batch, k, capacity], tf.float32),
        running_len=tf.zeros([batch, k], tf.int32),
        sequences=seq, beam_scores=tf.fill([batch, k], NEG_SCORE),
        sequence_lp=tf.zeros([batch, k, capacity], tf.float32),
        sequence_len=tf.zeros([batch, k], tf.int32),
        finished=tf.zeros([batch, k], tf.bool),
        unsatisfied=tf.ones([batch], tf.bool), hits=tf.zeros([batch, keep], tf.bool))
    penalty, min_new = const["penalty"], const["min_new"]

    def power(n):  # (n ** length_penalty) in double, then float32, as Python does it
        return tf.cast(tf.pow(tf.cast(n, tf.float64), penalty_power), tf.float32)

    def cond(t, s):
        improvable = tf.reduce_any(s["unsatisfied"])
        if beam.early_stopping is True:
            improvable = tf.logical_and(improvable,
                                        tf.logical_not(tf.reduce_all(s["finished"])))
        going = tf.logical_not(tf.reduce_all(s["hits"]))
        return tf.logical_and(tf.logical_and(t < max_new_tokens, improvable), going)

    def body(t, s):
        s = dict(s)
        cur = width + t
        view = {"seq": flat(s["running"]), "width": width, "present": s.get("present")}
        log_probs = tf.nn.log_softmax(s["logits"], axis=-1)
        log_probs = setting.processing.apply(
            log_probs, t, view, penalty, min_new, setting.ends, const["ngram"],
            last=tf.fill([tf.shape(log_probs)[0]], t + 1 >= max_new_tokens))  # (B*K, V)
        grouped = unflat(log_probs) + s["running_scores"][:, :, None]
        top_scores, top_index = tf.math.top_k(tf.reshape(grouped, [batch, k * vocab]), keep)
        parent, token = top_index // vocab, top_index % vocab  # (B, 2K)
        token_lp = tf.gather(tf.reshape(log_probs, [batch, k * vocab]), top_index,
                             batch_dims=1)
        cand = _gather_beams(s["running"], parent)
        cand = write_at(cand, 2, cur, token[:, :, None])
        cand_lp = write_at(_gather_beams(s["running_lp"], parent), 2, t, token_lp[:, :, None])
        hits = tf.logical_or(isin(token, setting.ends),
                             tf.fill(tf.shape(token), t + 1 >= max_new_tokens))
        if setting.stop is not None:
            tails = _gather_beams(unflat(s["tail"]), parent)
            new_tails, found = setting.stop.update(tf.reshape(tails, [batch * keep, -1]),
                                                   tf.reshape(token, [-1]))
            hits = tf.logical_or(hits, tf.reshape(found, [batch, keep]))
        # the running beams of the next step: the best candidates that did not finish
        running_scores = top_scores + tf.cast(hits, tf.float32) * NEG_SCORE
        _, next_index = tf.math.top_k(running_scores, k)
        s["running"] = _gather_beams(cand, next_index)
        s["running_scores"] = _gather_beams(running_scores, next_index)
        s["running_lp"] = _gather_beams(cand_lp, next_index)
        chosen_parent = _gather_beams(parent, next_index)  # (B, K)
        # finished hypotheses: the best num_beams of the old and the new
        just = tf.logical_and(hits, top_mask[None, :])
        scores = top_scores / power(t + 1)
        if beam.early_stopping is True:
            full = tf.reduce_all(s["finished"], axis=1, keepdims=True)
            scores += tf.cast(full, tf.float32) * NEG_SCORE
        scores += tf.cast(tf.logical_not(s["unsatisfied"]), tf.float32)[:, None] * NEG_SCORE
        scores += tf.cast(tf.logical_not(just), tf.float32) * NEG_SCORE
        merged_scores = tf.concat([s["beam_scores"], scores], axis=1)
        _, best = tf.math.top_k(merged_scores, k)
        s["sequences"] = _gather_beams(tf.concat([s["sequences"], cand], 1), best)
        s["sequence_lp"] = _gather_beams(tf.concat([s["sequence_lp"], cand_lp], 1), best)
        new_len = tf.fill([batch, keep], t + 1)
        s["sequence_len"] = _gather_beams(tf.concat([s["sequence_len"], new_len], 1), best)
        s["beam_scores"] = _gather_beams(merged_scores, best)
        s["finished"] = _gather_beams(tf.concat([s["finished"], just], 1), best)
        s["hits"] = hits
        # the cache, the seen tokens and the stop-string bytes follow their beams
        rows = tf.reshape(chosen_parent + tf.range(batch)[:, None] * k, [-1])
        cache = lm.reorder_generation_cache(s["cache"], rows)
        new_token = tf.reshape(_gather_beams(token, next_index), [-1])
        if "present" in s:
            s["present"] = mark_present(tf.gather(s["present"], rows), new_token)
        if setting.stop is not None:
            tails = tf.reshape(new_tails, [batch, keep, -1])
            s["tail"] = flat(_gather_beams(tails, next_index))
        positions = lengths + t  # (B*K,)
        s["logits"], s["cache"] = lm.generation_step(new_token[:, None], positions[:, None],
                                                     key_mask, cache, cur)
        # can a running beam still beat the worst finished one?
        if beam.early_stopping == "never" and penalty_power > 0.0:
            hypothetical = power(max_new_tokens)
        else:
            hypothetical = power(t + 1)
        best_running = s["running_scores"][:, :1] / hypothetical
        worst = tf.where(s["finished"], tf.reduce_min(s["beam_scores"], 1, keepdims=True),
                         NEG_SCORE)
        s["unsatisfied"] = tf.logical_and(
            s["unsatisfied"], tf.reduce_any(best_running > worst, axis=1))
        return t + 1, s

    _, state = tf.while_loop(cond, body, (tf.constant(0), state),
                             shape_invariants=(tf.TensorShape([]), loop_shapes(state)))
    new = state["sequences"][:, :, width:total]  # (B, K, C)
    length = state["sequence_len"]
    ended = tf.logical_and(
        tf.range(capacity)[None, None, :] == (length - 1)[:, :, None],
        isin(new, setting.ends))
    kept = tf.range(capacity)[None, None, :] < length[:, :, None]
    # lengths without the end token; tokens after it are the fill id
    stops = tf.reduce_any(ended, axis=2)
    out = tf.where(tf.logical_and(kept, tf.logical_not(ended)), new, setting.fill)
    return {"token_ids": out, "logprobs": tf.where(kept, state["sequence_lp"], 0.0),
            "lengths": length - tf.cast(stops, tf.int32), "scores": state["beam_scores"]}
