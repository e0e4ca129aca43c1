"""SQuAD windows: question + a slice of the context, as in BERT's run_squad.py.

Each example becomes one feature per window: the question and a slice of the context
packed as the model's family packs a pair (`Tokenizer.pack_segments`; BERT:
`[CLS] question [SEP] context slice [SEP]`), windows `doc_stride` tokens apart,
questions cut to `max_query_length` tokens. Where the context sits in a window, and
where a "no answer" is read, come from the packer's layout. A context token can sit in several windows; it is scored only in the window
where it has the most context (`min(left, right) + 0.01 * window length`, the
original's rule). Unlike run_squad.py, which re-aligns predicted word pieces to
whitespace words (`get_final_text`), kbert keeps each token's character span in the
context, so an answer is always the exact substring `context[start_char:end_char]`.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import tensorflow as tf

from kbert.tasks.common import char_offset_table
from kbert.tasks.squad.data import SquadExample

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SquadFeature:
    """One window of one example.

    `inputs` is the model's input dict for the window (arrays [max_seq_length]).
    `char_spans[i]` is the (start, end) code-point span in the context of token i, or
    None for question and special tokens. `max_context[i]` tells whether this window
    is the one where token i has the most context. `start_position`/`end_position`
    are the answer's token positions (`null_position`, the packer's no-answer
    position, BERT's [CLS], when the window does not hold the whole answer or the
    question has none).
    """

    example_index: int
    window_index: int
    inputs: dict
    char_spans: list
    max_context: list
    start_position: int = 0
    end_position: int = 0
    null_position: int = 0


def _char_offsets(text: str, byte_starts, byte_ends):
    """Byte offsets into UTF-8 `text` -> code-point offsets."""
    table = char_offset_table(text)
    return table[np.asarray(byte_starts, np.int64)], table[np.asarray(byte_ends, np.int64)]


def _tokenize_contexts(tokenizer, contexts, batch_size=64):
    """Unique contexts -> (ids, char_starts, char_ends) arrays."""
    out = {}
    unique = list(dict.fromkeys(contexts))
    for i in range(0, len(unique), batch_size):
        batch = unique[i:i + batch_size]
        ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(batch))
        for text, row_ids, row_s, row_e in zip(batch, ids.to_list(), starts.to_list(),
                                               ends.to_list()):
            cs, ce = _char_offsets(text, row_s, row_e)
            out[text] = (np.asarray(row_ids, np.int32), cs, ce)
    return out


def window_starts(num_tokens: int, window: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of each window over `num_tokens` context tokens."""
    spans, start = [], 0
    while True:
        length = min(num_tokens - start, window)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, stride)


def is_max_context(spans, index: int, position: int) -> bool:
    """Whether window `index` gives context token `position` its most context."""
    best, best_score = None, None
    for i, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best, best_score = i, score
    return best == index


def answer_token_span(char_starts, char_ends, start_char: int, end_char: int):
    """First and last context token overlapping [start_char, end_char), or None."""
    hit = np.nonzero((char_starts < end_char) & (char_ends > start_char))[0]
    if hit.size == 0:
        return None
    return int(hit[0]), int(hit[-1])


def convert_examples(examples: list[SquadExample], tokenizer, max_seq_length: int = 384,
                     doc_stride: int = 128, max_query_length: int = 64,
                     is_training: bool = False) -> list[SquadFeature]:
    """Examples -> windows, with answer labels when `is_training`.

    Questions longer than `max_query_length` tokens are cut, with a warning naming
    the question id; so is a question that would leave no room for context (cut to
    `max_seq_length - 4` tokens, as the squad SavedModel does) instead of stopping the
    run. Raises ValueError when `max_seq_length` < 5 (no question and context fit).
    """
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for a question "
                         "and context")
    contexts = _tokenize_contexts(tokenizer, [e.context for e in examples])
    questions = tokenizer.tokenize(tf.constant([e.question for e in examples])).to_list()
    specials = tokenizer.special_tokens[1]
    windows, truncated = [], 0  # (example index, window index, spans, q_ids, answer)
    for index, (example, q_ids) in enumerate(zip(examples, questions)):
        limit = min(max_query_length, max_seq_length - specials - 1)
        if len(q_ids) > limit:
            truncated += 1
            logger.warning("question id %s: question has %d tokens, cut to %s", example.qid,
                           len(q_ids), f"max_query_length={max_query_length}"
                           if limit == max_query_length else
                           f"{limit} (max_seq_length={max_seq_length} less {specials} "
                           "special tokens and one context token)")
            q_ids = q_ids[:limit]
        ids, starts, ends = contexts[example.context]
        if len(ids) == 0:
            logger.warning("question id %s: context has no tokens; skipped", example.qid)
            continue
        answer = None
        if is_training and not example.is_impossible:
            text, start = example.answers[0]
            answer = answer_token_span(starts, ends, start, start + len(text))
            if answer is None:
                logger.warning("question id %s: answer %r covers no token; skipped",
                               example.qid, text)
                continue
        spans = window_starts(len(ids), max_seq_length - len(q_ids) - specials, doc_stride)
        windows += [(index, w, spans, q_ids, answer) for w in range(len(spans))]
    features = []
    for chunk in range(0, len(windows), 512):  # packed by the tokenizer, 512 at a time
        part = windows[chunk:chunk + 512]
        slices = [contexts[examples[i].context][0][spans[w][0]:sum(spans[w])].tolist()
                  for i, w, spans, _, _ in part]
        inputs, layout = tokenizer.pack_segments(
            [tf.ragged.constant([q for *_, q, _ in part], tf.int64, ragged_rank=1),
             tf.ragged.constant(slices, tf.int64, ragged_rank=1)], max_seq_length)
        inputs = {k: v.numpy() for k, v in inputs.items()}
        offsets = layout["segment_start"][:, 1].numpy()
        lengths = layout["segment_length"][:, 1].numpy()
        nulls = layout["null_position"].numpy()
        for row, (index, w, spans, _, answer) in enumerate(part):
            _, starts, ends = contexts[examples[index].context]
            start, length = spans[w]
            offset = int(offsets[row])
            if lengths[row] != length:  # the packer kept what the window arithmetic made
                raise AssertionError(f"window of {length} tokens packed as {lengths[row]}")
            char_spans = [None] * max_seq_length
            max_context = [False] * max_seq_length
            for j in range(length):
                char_spans[offset + j] = (int(starts[start + j]), int(ends[start + j]))
                max_context[offset + j] = is_max_context(spans, w, start + j)
            null = int(nulls[row])
            feature = SquadFeature(index, w, {k: v[row] for k, v in inputs.items()},
                                   char_spans, max_context, null, null, null)
            if answer is not None and start <= answer[0] and answer[1] < start + length:
                feature.start_position = answer[0] - start + offset
                feature.end_position = answer[1] - start + offset
            features.append(feature)
    if truncated:
        logger.warning("%d of %d questions were cut to max_query_length=%d tokens (or to "
                       "max_seq_length less the special tokens and one context token)",
                       truncated, len(examples), max_query_length)
    return features


LABELS = ("start_positions", "end_positions")


def feature_arrays(features: list[SquadFeature]) -> dict:
    """Stacks features into the model's inputs plus `start_positions`/`end_positions`
    (`LABELS`)."""
    return {
        **{k: np.stack([f.inputs[k] for f in features]) for k in features[0].inputs},
        "start_positions": np.array([f.start_position for f in features], np.int32),
        "end_positions": np.array([f.end_position for f in features], np.int32),
    }
