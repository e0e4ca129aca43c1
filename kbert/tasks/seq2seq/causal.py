"""A causal LM (GPT-2) as a decoder-only seq2seq model: each example is one sequence,
the source's tokens, the end token as separator, the target's tokens and the end token
again (`<|endoftext|>` between turns, as DialoGPT joins a conversation). The loss
covers the target's tokens and its end token only: the model is not trained to write
sources. Decoding continues source + separator up to the end token; the export puts
the separator after each request's text in the graph (`prompt_suffix_ids`)."""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

logger = logging.getLogger(__name__)

IGNORED = -1  # labels left out of the loss (kbert.models.metrics)


def _ids(tokenizer, texts) -> list[list[int]]:
    out = []
    for i in range(0, len(texts), 512):
        out.extend(tokenizer.tokenize(tf.constant(list(texts[i:i + 512]))).to_list())
    return out


def source_ids(tokenizer, sources, max_source: int, what: str = "sources"
               ) -> list[list[int]]:
    """Each source's tokens, its first `max_source` kept (the others counted in one
    warning), and the separator (the end token)."""
    rows, cut = [], 0
    for row in _ids(tokenizer, sources):
        if len(row) > max_source:
            cut += 1
            row = row[:max_source]
        rows.append(row + [tokenizer.end_token_id])
    if cut:
        logger.warning("%d of %d %s are longer than %d tokens and were cut", cut, len(rows),
                       what, max_source)
    return rows


def features(tokenizer, sources, targets, max_source: int, max_target: int):
    """({"token_ids", "padding_mask"} [N, max_source + max_target], {"logits": labels}):
    position t's label is token t + 1 where that token is the target's or its end
    token, else -1. A target keeps its first `max_target - 1` tokens and the end token
    (counted in one warning)."""
    end = tokenizer.end_token_id
    prompts = source_ids(tokenizer, sources, max_source)
    width = max_source + max_target  # the sequence is one longer; inputs drop its last
    ids = np.zeros((len(prompts), width), np.int32)
    mask = np.zeros_like(ids)
    labels = np.full_like(ids, IGNORED)
    cut = 0
    for r, (prompt, target) in enumerate(zip(prompts, _ids(tokenizer, targets), strict=True)):
        if len(target) > max_target - 1:
            cut += 1
            target = target[:max_target - 1]
        sequence = prompt + target + [end]
        n = len(sequence) - 1
        ids[r, :n], mask[r, :n] = sequence[:-1], 1
        # position t predicts token t + 1: the target's tokens start at len(prompt)
        labels[r, len(prompt) - 1:n] = sequence[len(prompt):]
    if cut:
        logger.warning("%d of %d targets are longer than %d tokens and were cut", cut,
                       len(prompts), max_target)
    return {"token_ids": ids, "padding_mask": mask}, {"logits": labels}


def prompts(tokenizer, sources, max_source: int):
    """The decoding prompts: source + separator, right-padded ([N, P] ids and mask)."""
    rows = source_ids(tokenizer, sources, max_source, "inputs")
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), np.int32)
    mask = np.zeros_like(ids)
    for r, row in enumerate(rows):
        ids[r, :len(row)], mask[r, :len(row)] = row, 1
    return ids, mask
