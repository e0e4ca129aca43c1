"""The bundled pretraining corpus: generated text in the domain of the bundled SQuAD
sample (`kbert.tasks.squad.sample`: biographies of invented musicians), with other seeds
than the SQuAD files, one sentence a line and a blank line after each paragraph (a
document). `python -m kbert.tasks.pretrain` trains on it when given no data flags.
"""

from __future__ import annotations

import re

PARAGRAPHS = 3000  # about 25,000 sentences
SEED = 1000  # the SQuAD sample's files use seeds 0 (make demo) and 2000, 3000 (the demo)


def write_corpus(path: str, paragraphs: int = PARAGRAPHS, seed: int = SEED) -> int:
    """Writes the sentences of `paragraphs` generated biographies; returns the lines."""
    from kbert.io import atomic_file
    from kbert.tasks.squad.sample import make_sample

    lines = []
    for article in make_sample(paragraphs, seed=seed)["data"]:
        for paragraph in article["paragraphs"]:
            sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", paragraph["context"])]
            lines.extend(s for s in sentences if s)
            lines.append("")
    with atomic_file(path) as f:
        f.write("\n".join(lines) + "\n")
    return len(lines)
