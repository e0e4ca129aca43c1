"""GLUE files written in each task's exact official layout, and synthetic tasks."""

from __future__ import annotations

import os
import random

# Header rows exactly as in the GLUE download (None: no header).
HEADERS = {
    "cola": (None, "index\tsentence"),
    "sst2": ("sentence\tlabel", "index\tsentence"),
    "mrpc": ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
             "index\t#1 ID\t#2 ID\t#1 String\t#2 String"),
    "qqp": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", "id\tquestion1\tquestion2"),
    "stsb": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
             "sentence2\tscore",
             "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"),
    "mnli": ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
             "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label",
             "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
             "sentence1_parse\tsentence2_parse\tsentence1\tsentence2"),
    "qnli": ("index\tquestion\tsentence\tlabel", "index\tquestion\tsentence"),
    "rte": ("index\tsentence1\tsentence2\tlabel", "index\tsentence1\tsentence2"),
    "wnli": ("index\tsentence1\tsentence2\tlabel", "index\tsentence1\tsentence2"),
    "ax": (None, "index\tsentence1\tsentence2"),
}
MNLI_DEV_HEADER = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
                   "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\t"
                   "sentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label")
LABELS = {"cola": ["0", "1"], "sst2": ["0", "1"], "mrpc": ["0", "1"], "qqp": ["0", "1"],
          "mnli": ["contradiction", "entailment", "neutral"],
          "qnli": ["entailment", "not_entailment"], "rte": ["entailment", "not_entailment"],
          "wnli": ["0", "1"]}
# Texts with the awkward characters: quotes, a lone quote, a backslash.
TEXTS = ['He said "hello" and left.', "It's a 'quoted' word", 'a lone " quote',
         "back\\slash and tab-free", "Ünïcödé and 北京"]


def _row(task, split, i, rng, labelled=True):
    a, b = TEXTS[i % len(TEXTS)], TEXTS[(i + 2) % len(TEXTS)]
    label = rng.choice(LABELS.get(task, ["0"])) if task != "stsb" else f"{rng.uniform(0, 5):.3f}"
    if task == "cola":
        if not labelled:
            return f"{i}\t{a}"
        return f"gj04\t{label}\t{'*' if label == '0' else ''}\t{a}"
    if task == "sst2":
        return f"{a}\t{label}" if labelled else f"{i}\t{a}"
    if task == "mrpc":
        first = label if labelled else str(i)
        return f"{first}\t{1000 + i}\t{2000 + i}\t{a}\t{b}"
    if task == "qqp":
        return f"{i}\t{10 + i}\t{20 + i}\t{a}\t{b}\t{label}" if labelled else f"{i}\t{a}\t{b}"
    if task == "stsb":
        row = f"{i}\tmain-news\tMSRvid\t2012test\t{i:04d}\tnone\tnone\t{a}\t{b}"
        return row + (f"\t{label}" if labelled else "")
    if task == "mnli":
        parse = "( ( x ) )"
        head = f"{i}\t{31193 + i}\t{31193 + i}n\tfiction\t{parse}\t{parse}\t(ROOT x)\t(ROOT x)\t{a}\t{b}"
        if not labelled:
            return head
        if split == "train":
            return f"{head}\t{label}\t{label}"
        return f"{head}\t{label}\t{label}\tneutral\t{label}\t{label}\t{label}"
    if task in ("qnli", "rte", "wnli"):
        return f"{i}\t{a}\t{b}\t{label}" if labelled else f"{i}\t{a}\t{b}"
    if task == "ax":
        return f"{i}\t{a}\t{b}"
    raise ValueError(task)


def write_task(root: str, task: str, n: dict | None = None, seed: int = 0,
               bom: bool | None = None) -> str:
    """Writes a task folder (GLUE's file names and layout); returns its path.

    `bom`: start every file with a UTF-8 byte-order mark (True), none (False), or as
    GLUE's download does (None): MRPC's train.tsv and dev.tsv start with one."""
    rng = random.Random(seed)
    folder = os.path.join(root, {"sst2": "SST-2", "stsb": "STS-B", "ax": "diagnostic"}.get(
        task, task.upper() if task != "cola" else "CoLA"))
    os.makedirs(folder, exist_ok=True)
    n = n or {}
    train_header, test_header = HEADERS[task]
    if task == "ax":
        files = {"diagnostic.tsv": (test_header, False, "test")}
    elif task == "mnli":
        files = {"train.tsv": (train_header, True, "train"),
                 "dev_matched.tsv": (MNLI_DEV_HEADER, True, "dev"),
                 "dev_mismatched.tsv": (MNLI_DEV_HEADER, True, "dev"),
                 "test_matched.tsv": (test_header, False, "test"),
                 "test_mismatched.tsv": (test_header, False, "test")}
    else:
        files = {"train.tsv": (train_header, True, "train"), "dev.tsv": (train_header, True, "dev"),
                 "test.tsv": (test_header, False, "test")}
    splits = [k for k in n if not k.endswith(".tsv")]
    if splits:  # keys are file names ("train.tsv"; one dict may serve every task)
        raise ValueError(f"write_task({task!r}): keys are file names, not {splits}")
    for name, (header, labelled, split) in files.items():
        rows = [_row(task, split, i, rng, labelled) for i in range(n.get(name, 7))]
        mark = bom if bom is not None else (task == "mrpc" and split != "test")
        with open(os.path.join(folder, name), "w", encoding="utf-8-sig" if mark else "utf-8",
                  newline="\n") as f:
            if header is not None:
                f.write(header + "\n")
            f.write("".join(r + "\n" for r in rows))
    return folder


NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
         "kim", "leo", "mia", "ned", "olga", "pete"]
THINGS = ["car", "book", "lamp", "boat", "kite", "drum"]
COLORS = ["red", "blue", "green", "black", "white", "pink", "gold", "gray"]
WARM = {"red", "pink", "gold"}


def synthetic_paraphrase(root: str, n_train: int = 4000, n_dev: int = 300, seed: int = 0):
    """MRPC layout. Label 1 ("paraphrase") when the second sentence names the same
    three colors as the first, reordered; 0 when it names three others. Either
    sentence alone says nothing about the label."""
    rng = random.Random(seed)

    def pair():
        a = rng.sample(COLORS, 3)
        if rng.random() < 0.5:
            b = a[:]
            rng.shuffle(b)
            return "1", a, b
        b = rng.sample([w for w in COLORS if w not in a], 3)
        rng.shuffle(b)
        return "0", a, b

    folder = os.path.join(root, "PARA")
    os.makedirs(folder, exist_ok=True)
    for name, count in (("train.tsv", n_train), ("dev.tsv", n_dev), ("test.tsv", 50)):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(HEADERS["mrpc"][0 if name != "test.tsv" else 1] + "\n")
            for i in range(count):
                label, a, b = pair()
                first = label if name != "test.tsv" else str(i)
                f.write(f"{first}\t{i}\t{i}\t{' '.join(a)}\t{' '.join(b)}\n")
    return folder


def synthetic_similarity(root: str, n_train: int = 4000, n_dev: int = 300, seed: int = 0):
    """STS-B layout. Score = 5/6 x the number of warm colors (red, pink, gold) the two
    sentences name together, 0 to 6: a sum over both sentences, which a small model
    learns from any seed (a count of shared colors was learned by some seeds only)."""
    rng = random.Random(seed)
    folder = os.path.join(root, "SIM")
    os.makedirs(folder, exist_ok=True)
    for name, count in (("train.tsv", n_train), ("dev.tsv", n_dev), ("test.tsv", 40)):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(HEADERS["stsb"][0 if name != "test.tsv" else 1] + "\n")
            for i in range(count):
                a, b = rng.sample(COLORS, 3), rng.sample(COLORS, 3)
                score = 5 * sum(c in WARM for c in a + b) / 6
                row = (f"{i}\tmain-captions\tMSRvid\t2012train\t{i:04d}\tnone\tnone\t"
                       f"{' '.join(a)}\t{' '.join(b)}")
                f.write(row + (f"\t{score:.3f}" if name != "test.tsv" else "") + "\n")
    return folder


# Two sentence pairs (awkward characters included) a pair classifier export answers.
PAIRS = [("The cat sat.", "A cat was sitting."), ("héllo 😀", "<mask> there")]
PAIR_REQUEST = {"text": [a for a, _ in PAIRS], "text_b": [b for _, b in PAIRS]}


def assert_pair_export_serves_the_folder(out, export, seq_length: int) -> None:
    """The classifier SavedModel in `export`, run by TF Serving's C++ loader
    (`served_results`: the answers of the exporter's own load where the command ran
    inside `keep_served(also=[PAIR_REQUEST])`, else a fresh process), gives the
    probabilities of the task folder `out`'s reloaded model on PAIRS. (That
    `tf.saved_model.load` answers a classifier export alike is shown once, in
    test_export.)"""
    import numpy as np
    import tensorflow as tf

    from kbert.export.check import served_results
    from kbert.export.folder import load_task_folder

    _, model, tokenizer, _ = load_task_folder(str(out))
    fresh = served_results(str(export), [PAIR_REQUEST])
    served = np.array(fresh[0]["probabilities"]["value"]).reshape(2, 2)
    x = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], seq_length=seq_length)
    want = tf.nn.softmax(model(x)["logits"], axis=-1).numpy()
    np.testing.assert_allclose(served, want, atol=1e-5)
