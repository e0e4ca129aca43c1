"""Generation by prompting, without training (GPT-2's zero-shot and GPT-3's few-shot
in-context learning, Radford et al., 2019; Brown et al., 2020): `--shots K` puts K
solved training pairs before each source, each written as the source itself is
(`--source_prefix`, the source, `--source_suffix`, a space, its target), separated by a
blank line, and the model continues the source's line. `--shots 0 --source_suffix
"\\nTL;DR:"` is GPT-2's zero-shot summarization.

The shots are drawn for each example from the training file, without replacement,
seeded by `--seed` and the example's position (as the GLUE command's `--shots`). A causal
LM's output ends at its end token or at the blank line that separates the shots; an
encoder-decoder (T5) reads the whole prompt and writes its output. A causal LM's prompt
longer than its positions less the tokens generated keeps its end (the example), with a
warning. The first prompts and their shots are written to OUTPUT_DIR/prompts.json."""

from __future__ import annotations

import json
import os

import numpy as np

SEPARATOR = "\n\n"


def build_prompts(pairs, train, shots: int, seed: int, prefix: str = "", suffix: str = ""
                  ) -> tuple[list[str], list[list[int]]]:
    """Each pair's prompt and the training indices of its shots."""
    prompts, drawn = [], []
    for i, pair in enumerate(pairs):
        rng = np.random.default_rng([seed, i])
        picks = rng.choice(len(train), size=min(shots, len(train)), replace=False) \
            if shots else np.array([], int)
        parts = [f"{prefix}{train[j].source}{suffix} {train[j].target}" for j in picks]
        parts.append(f"{prefix}{pair.source}{suffix}")
        prompts.append(SEPARATOR.join(parts))
        drawn.append([int(j) for j in picks])
    return prompts, drawn


def generate(lm, prompts: list[str], max_new_tokens: int, batch_size: int, settings: dict
             ) -> tuple[list[str], list[int]]:
    """(outputs, tokens generated) of the prompts: a causal LM's continuation up to its
    end token or the shots' separator, stripped; an encoder-decoder's output text."""
    options = {k: v for k, v in settings.items()
               if settings.get("num_beams", 1) > 1 or k not in ("num_beams", "length_penalty")}
    sampler = "beam" if options.get("num_beams", 1) > 1 else "greedy"
    if not lm.is_encoder_decoder:
        options["stop"] = [SEPARATOR]
    texts, lengths = [], []
    for i in range(0, len(prompts), batch_size):
        batch = prompts[i:i + batch_size]
        out = lm.generate(batch, max_new_tokens=max_new_tokens, sampler=sampler,
                          return_scores=True, **options)
        for prompt, result in zip(batch, out):
            text = result["text"]
            if not lm.is_encoder_decoder:
                text = text[len(prompt):]  # a causal LM's text is prompt + continuation
            texts.append(text.strip())
            lengths.append(len(result["token_ids"]))
    return texts, lengths


def write_record(output_dir: str, record: dict) -> None:
    from kbert.io import atomic_file

    with atomic_file(os.path.join(output_dir, "prompts.json")) as f:
        json.dump(record, f, indent=2, ensure_ascii=False)
