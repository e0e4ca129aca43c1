"""SQuAD answering as TF graph ops: windows, model, span search, character offsets.

It computes what `kbert.tasks.squad` computes in Python (`convert_examples`, the
model, `postprocess`) for one question and one context per batch row, so that a
SavedModel answers raw strings by itself:

- the question is cut to `max_query_length` tokens; the context is cut into windows
  of `max_seq_length - len(question) - specials` tokens (`specials`: what the family's
  packer adds to a pair, `Tokenizer.special_tokens`), `doc_stride` apart, and packed by
  the tokenizer's packer (`Tokenizer.pack_segments`), whose layout says where the
  context sits and where "no answer" is read;
- every window goes through the model; in each window the `n_best_size` best start
  and end positions are paired (end >= start, at most `max_answer_length` tokens,
  the start token in its max-context window);
- the best pair over all windows is the answer; v2.0 compares it with the null score
  (smallest start + end logit at the packer's null position, BERT's [CLS]) and
  `null_score_diff_threshold`;
- the answer is the context substring between the tokens' byte offsets, and the byte
  offsets become code-point offsets, so `answer == context[start_char:end_char]`.

Ties break as in Python (first window, then the order of the top-k lists), and scores
use the same float32 and float64 arithmetic, so both give the same answers.
"""

from __future__ import annotations

import tensorflow as tf

from kbert.tokenizers.strings import byte_to_char_offsets


def _first_argmax(values, mask, axis=-1):
    """Index of the first maximum of `values` where `mask` (ties: lowest index), and
    whether any entry is masked in. `tf.argmax` leaves ties unspecified."""
    neg = tf.constant(float("-inf"), values.dtype)
    masked = tf.where(mask, values, neg)
    best = tf.reduce_max(masked, axis=axis, keepdims=True)
    n = tf.shape(values, out_type=tf.int64)[axis]
    index = tf.range(n, dtype=tf.int64)
    shape = [1] * values.shape.rank
    shape[axis] = -1
    index = tf.reshape(index, shape)
    first = tf.reduce_min(tf.where(mask & tf.equal(masked, best), index, n), axis=axis)
    return first, tf.reduce_any(mask, axis=axis)


def squad_windows(tokenizer, question, context, max_seq_length: int, doc_stride: int,
                  max_query_length: int):
    """The windows of (question, context slice) for every row, packed as the family
    packs a pair (BERT: `[CLS] question [SEP] context slice [SEP]`).

    Returns:
        (inputs, info): `inputs` the encoder inputs [num_windows, max_seq_length];
        `info` a dict of per-window int64 vectors (`example`, `index`, `start`,
        `length`, `offset`: the context's first position, `null`: the no-answer
        position) and the context tokens' byte offsets (`byte_start`, `byte_end`,
        RaggedTensors [batch, (tokens)]).
    """
    specials = tokenizer.special_tokens[1]
    # Cut the question so that at least one context token fits in each window.
    q_ids = tokenizer.tokenize(question)[
        :, :min(max_query_length, max_seq_length - specials - 1)]
    c_ids, c_start, c_end = tokenizer.tokenize_with_offsets(context)
    q_len, c_len = q_ids.row_lengths(), c_ids.row_lengths()
    window = max_seq_length - specials - q_len  # >= 1
    step = tf.minimum(window, doc_stride)
    extra = tf.maximum(c_len - window, 0)
    n_windows = 1 + (extra + step - 1) // step  # an empty context gets one empty window
    example = tf.repeat(tf.range(tf.shape(question, out_type=tf.int64)[0]), n_windows)
    index = tf.ragged.range(n_windows).flat_values
    start = index * tf.gather(step, example)
    length = tf.minimum(tf.gather(window, example), tf.gather(c_len, example) - start)
    first = tf.gather(c_ids.row_starts(), example) + start
    slices = tf.gather(c_ids.flat_values, tf.ragged.range(first, first + length))
    # No truncation happens: question + window + specials fit by construction.
    inputs, layout = tokenizer.pack_segments([tf.gather(q_ids, example), slices],
                                             max_seq_length)
    info = {"example": example, "index": index, "start": start, "length": length,
            "offset": layout["segment_start"][:, 1], "null": layout["null_position"],
            "n_windows": n_windows, "byte_start": c_start, "byte_end": c_end,
            "window": window, "step": step, "context_length": c_len}
    return inputs, info


def _max_context(info, max_seq_length: int):
    """[num_windows, max_seq_length] bool: the position is a context token whose
    most-context window (the original's score, first window on ties) is this one.

    A token of window i can only lie in windows i - K .. i + K, K = ceil(window /
    stride) of its example (windows start `stride` tokens apart and hold at most
    `window`), so each position scores those 2K + 1 candidates, in window order: memory
    [windows, seq, 2K + 1], linear in the context, where comparing with every window of
    the example grew with the square of the windows."""
    pos = tf.range(max_seq_length, dtype=tf.int64)[tf.newaxis, :]
    j = pos - info["offset"][:, tf.newaxis]
    is_context = (j >= 0) & (j < info["length"][:, tf.newaxis])
    token = info["start"][:, tf.newaxis] + j  # context token index, [N, L]
    example = info["example"]
    step = tf.gather(info["step"], example)[:, tf.newaxis, tf.newaxis]  # [N, 1, 1]
    window = tf.gather(info["window"], example)[:, tf.newaxis, tf.newaxis]
    c_len = tf.gather(info["context_length"], example)[:, tf.newaxis, tf.newaxis]
    n = tf.gather(info["n_windows"], example)[:, tf.newaxis, tf.newaxis]
    reach = tf.reduce_max(tf.concat([(info["window"] + info["step"] - 1) // info["step"],
                                     [0]], 0))
    candidate = (info["index"][:, tf.newaxis, tf.newaxis]
                 + tf.range(-reach, reach + 1, dtype=tf.int64)[tf.newaxis, tf.newaxis, :])
    ws = candidate * step  # [N, 1, 2K + 1]
    wl = tf.minimum(window, c_len - ws)
    t = token[:, :, tf.newaxis]
    we = ws + wl - 1
    contains = ((candidate >= 0) & (candidate < n) & (t >= ws) & (t <= we) & (wl > 0))
    score = (tf.cast(tf.minimum(t - ws, we - t), tf.float64)
             + 0.01 * tf.cast(wl, tf.float64))
    best, _ = _first_argmax(score, contains, axis=-1)  # [N, L], index into candidates
    return is_context, is_context & tf.equal(best, reach)


def squad_answers(start_logits, end_logits, info, context, *, n_best_size: int,
                  max_answer_length: int, version_2_with_negative: bool,
                  null_score_diff_threshold: float):
    """The answer of each batch row from per-window logits [num_windows, seq_length].

    Returns:
        dict: `answer` tf.string [batch], `score` float32 [batch] (start + end logit of
        the answer; the null score when there is none), `start_char`/`end_char` int64
        [batch] (-1 for no answer), and for v2.0 `has_answer` bool [batch].
    """
    start_logits = tf.cast(start_logits, tf.float32)
    end_logits = tf.cast(end_logits, tf.float32)
    seq_length = start_logits.shape[-1]  # static: the exporter packs to a fixed length
    is_context, max_context = _max_context(info, seq_length)
    k = min(n_best_size, seq_length)
    s_val, s_idx = tf.math.top_k(start_logits, k)  # ties: lower index first, as Python
    e_val, e_idx = tf.math.top_k(end_logits, k)
    s_idx, e_idx = tf.cast(s_idx, tf.int64), tf.cast(e_idx, tf.int64)
    ok_start = tf.gather(max_context, s_idx, batch_dims=1)  # [N, k]
    ok_end = tf.gather(is_context, e_idx, batch_dims=1)
    a, b = s_idx[:, :, tf.newaxis], e_idx[:, tf.newaxis, :]
    valid = (ok_start[:, :, tf.newaxis] & ok_end[:, tf.newaxis, :] & (b >= a)
             & (b - a + 1 <= max_answer_length))  # [N, k, k]
    pair_score = s_val[:, :, tf.newaxis] + e_val[:, tf.newaxis, :]  # float32, as Python
    pairs = k * k
    n = info["n_windows"]
    batch = tf.shape(n)[0]
    # The best pair of each window (ties: the first in order), then of each example the
    # first window holding its best score: per example, windows in order then pairs in
    # order, as Python ranks them; memory linear in the windows.
    in_window, window_has = _first_argmax(tf.reshape(pair_score, [-1, pairs]),
                                          tf.reshape(valid, [-1, pairs]), axis=1)
    window_score = tf.where(window_has, tf.gather(tf.reshape(pair_score, [-1, pairs]),
                                                  tf.minimum(in_window, pairs - 1),
                                                  batch_dims=1), float("-inf"))
    example = info["example"]
    example_best = tf.math.unsorted_segment_max(window_score, example, batch)
    rows = tf.range(tf.shape(example, out_type=tf.int64)[0])
    total = tf.reduce_sum(n)
    first_row = tf.math.unsorted_segment_min(
        tf.where(window_has & tf.equal(window_score, tf.gather(example_best, example)),
                 rows, total), example, batch)
    has_span = first_row < total
    # The window row of the best pair (rows without a valid pair: any row, unused).
    window_row = tf.minimum(first_row, total - 1)
    best_pair = tf.minimum(tf.gather(in_window, window_row), pairs - 1)
    a_best = tf.gather(tf.gather(s_idx, window_row), best_pair // k, batch_dims=1)
    b_best = tf.gather(tf.gather(e_idx, window_row), best_pair % k, batch_dims=1)
    s_best = tf.gather(tf.gather(s_val, window_row), best_pair // k, batch_dims=1)
    e_best = tf.gather(tf.gather(e_val, window_row), best_pair % k, batch_dims=1)
    span_score = s_best + e_best

    # Token positions -> byte offsets -> the substring and code-point offsets.
    # Context token index of window position p: start - offset + p; then the flat index.
    base = (info["byte_start"].row_starts() + tf.gather(info["start"], window_row)
            - tf.gather(info["offset"], window_row))
    # One spare entry so that rows without a span (unused) still gather in bounds.
    flat_bs = tf.concat([info["byte_start"].flat_values, [0]], 0)
    flat_be = tf.concat([info["byte_end"].flat_values, [0]], 0)
    last = tf.shape(flat_bs, out_type=tf.int64)[0] - 1
    byte_start = tf.gather(flat_bs, tf.clip_by_value(base + a_best, 0, last))
    byte_end = tf.gather(flat_be, tf.clip_by_value(base + b_best, 0, last))
    answered = has_span
    if version_2_with_negative:
        at = info["null"][:, tf.newaxis]
        cls_score = (tf.gather(start_logits, at, batch_dims=1)[:, 0]
                     + tf.gather(end_logits, at, batch_dims=1)[:, 0])  # float32, as Python
        null = tf.reduce_min(tf.RaggedTensor.from_row_lengths(cls_score, n, validate=False), axis=1)
        # Python ranks the null answer with the spans and keeps n_best_size of them.
        usable = has_span if n_best_size > 1 else has_span & ~(null > span_score)
        best_f64 = tf.where(usable, tf.cast(s_best, tf.float64) + tf.cast(e_best, tf.float64),
                            tf.constant(0.0, tf.float64))
        diff = tf.cast(null, tf.float64) - best_f64
        answered = usable & (diff <= null_score_diff_threshold)
    length = tf.where(answered, byte_end - byte_start, 0)
    answer = tf.strings.substr(context, tf.where(answered, byte_start, 0), length, unit="BYTE")
    start_char = tf.where(answered, byte_to_char_offsets(context, byte_start), -1)
    end_char = tf.where(answered, byte_to_char_offsets(context, byte_end), -1)
    out = {"answer": answer, "start_char": start_char, "end_char": end_char}
    if version_2_with_negative:
        out["score"] = tf.where(answered, span_score, null)
        out["has_answer"] = answered
    else:
        out["score"] = tf.where(answered, span_score, 0.0)
    return out
