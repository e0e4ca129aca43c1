"""The greedy and sampled decoding loop (one token a step, each row its settings and
budget); its step is also streaming's."""

from __future__ import annotations

import tensorflow as tf

from kbert.models.generation.samplers import uniform
from kbert.layers.updates import write_at
from kbert.models.generation.processors import mark_present
from kbert.models.generation.state import isin, loop_shapes, start_state


def sample_step(lm, setting, state, t, const):
    """One step of greedy or sampled decoding: (state, t) -> state (`sample_loop`'s
    body, and `stream`'s step)."""
    scores = setting.processing.apply(state["logits"], t, state, const["penalty"],
                                      const["min_new"], setting.ends, const["ngram"],
                                      last=t + 1 >= const["max_new"])
    u = uniform(const["seeds"], const["index"], t)
    if getattr(setting.sampler, "per_row", False):
        token, logprob = setting.sampler(scores, u, const)
    else:
        token, logprob = setting.sampler(scores, u)
    active = tf.logical_not(state["done"])
    hit = tf.logical_and(active, isin(token, setting.ends))
    token = tf.where(active, token, setting.fill)
    state = dict(state)
    state["length"] = state["length"] + tf.cast(
        tf.logical_and(active, tf.logical_not(hit)), tf.int32)
    done = tf.logical_or(state["done"], hit)
    if setting.stop is not None:
        state["tail"], found = setting.stop.update(state["tail"], token)
        done = tf.logical_or(done, tf.logical_and(active, found))
    state["done"] = tf.logical_or(done, t + 1 >= const["max_new"])  # each row's budget
    state["out"] = write_at(state["out"], 1, t, token[:, None])
    state["logprobs"] = write_at(state["logprobs"], 1, t,
                                 tf.where(active, logprob, 0.0)[:, None])
    if "seq" in state:
        state["seq"] = write_at(state["seq"], 1, state["width"] + t, token[:, None])
    if "present" in state:
        state["present"] = mark_present(state["present"], token)
    state["logits"], state["cache"] = lm.generation_step(
        token[:, None], (const["lengths"] + t)[:, None], const["key_mask"], state["cache"],
        state["width"] + t)
    return state


def sample_start(lm, setting, token_ids, padding_mask, capacity, const):
    """The state and constants greedy and sampled decoding start from (the loop's and
    `stream`'s)."""
    state, key_mask, lengths = start_state(lm, setting, token_ids, padding_mask, capacity)
    rows = tf.shape(token_ids)[0]
    state.update(done=tf.zeros([rows], tf.bool), length=tf.zeros([rows], tf.int32),
                 out=tf.fill([rows, capacity], setting.fill),
                 logprobs=tf.zeros([rows, capacity], tf.float32))
    return state, dict(const, key_mask=key_mask, lengths=lengths)


def sample_loop(lm, setting, token_ids, padding_mask, max_new_tokens, capacity, const):
    state, const = sample_start(lm, setting, token_ids, padding_mask, capacity, const)

    def cond(t, state):
        return tf.logical_and(t < max_new_tokens, tf.logical_not(tf.reduce_all(state["done"])))

    def body(t, state):
        return t + 1, sample_step(lm, setting, state, t, const)

    _, state = tf.while_loop(cond, body, (tf.constant(0), state),
                             shape_invariants=(tf.TensorShape([]), loop_shapes(state)))
    return {"token_ids": state["out"], "logprobs": state["logprobs"],
            "lengths": state["length"], "scores": tf.reduce_sum(state["logprobs"], axis=1)}
