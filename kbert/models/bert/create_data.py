"""BERT's masked-LM and next-sentence pretraining data, as Google's
`create_pretraining_data.py` makes it: the same algorithm, step by step, with the same
sequence of draws from one `random.Random(seed)`, so that a corpus, a vocabulary and a
seed give the same TFRecords.

The corpus: one sentence a line, a blank line between documents. Each line is
tokenized with BERT's WordPiece (kbert's in-graph tokenizer, whose ids are Google's
`tokenization.py`'s). The documents are shuffled; then, `dupe_factor` times, every
document is cut into instances: segments are gathered up to a target length (the
maximum, or with probability `short_seq_prob` a random shorter one), a random split
point makes sentence A and B, and half of the time (always when only one segment was
gathered) B is taken from a random other document instead (`next_sentence_labels` 1),
the unused segments going back to the document. The pair is cut to fit (one token at a
time from the longer side, its front or back at random), packed as `[CLS] A [SEP] B
[SEP]`, and 15% of its tokens (at most `max_predictions_per_seq`, at least one) are
chosen for the masked LM: 80% become `[MASK]`, 10% a random vocabulary word, 10% stay.
With `do_whole_word_mask` a word's `##` pieces are chosen together (google-research/bert's
current code). The instances are shuffled and written round-robin to the output files.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import random
import time

from kbert.io import expand_inputs, normal_permissions

logger = logging.getLogger(__name__)

SPECIALS = ("[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass
class Instance:
    """One pretraining example, as token strings."""

    tokens: list
    segment_ids: list
    is_random_next: bool
    masked_lm_positions: list
    masked_lm_labels: list


@dataclasses.dataclass
class Options:
    """`create_pretraining_data.py`'s flags and defaults."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    random_seed: int = 12345
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False

    def check(self) -> None:
        if self.max_seq_length < 5:
            raise ValueError(f"--max_seq_length {self.max_seq_length}: needs at least 5 "
                             "([CLS], [SEP] twice, and a token of each sentence)")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"--max_predictions_per_seq {self.max_predictions_per_seq}: "
                             "must be at least 1")
        if self.dupe_factor < 1:
            raise ValueError(f"--dupe_factor {self.dupe_factor}: must be at least 1")
        for name in ("masked_lm_prob", "short_seq_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"--{name} {value}: must be between 0 and 1")


def check_vocab(vocab: list[str], vocab_file: str = "the vocabulary") -> None:
    missing = [t for t in SPECIALS if t not in vocab]
    if missing:
        raise ValueError(f"{vocab_file}: no {', '.join(missing)} token (BERT's masked LM "
                         "needs [CLS], [SEP] and [MASK])")


def read_documents(files: list[str], tokenizer, batch_size: int = 2048
                   ) -> list[list[list[str]]]:
    """Documents of tokenized sentences (WordPiece strings); blank lines end documents,
    lines with no tokens are left out, empty documents dropped (as the reference)."""
    import tensorflow as tf

    vocab = tokenizer.vocabulary
    documents: list[list] = [[]]
    lines: list[str] = []
    ends: list[int] = []  # after which collected line a new document starts

    def flush():
        for start in range(0, len(lines), batch_size):
            ids = tokenizer.tokenize(tf.constant(lines[start:start + batch_size])).to_list()
            for k, row in enumerate(ids, start):
                while ends and ends[0] == k:
                    documents.append([])
                    ends.pop(0)
                if row:
                    documents[-1].append([vocab[i] for i in row])
        while ends:
            documents.append([])
            ends.pop(0)
        lines.clear()

    for path in files:
        with open(path, "rb") as f:  # lines end at "\n" only, as the reference's GFile
            for number, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError as e:
                    raise ValueError(f"{path}, line {number}: not UTF-8 ({e.reason} at "
                                     f"byte {e.start})") from None
                if not line:
                    ends.append(len(lines))
                else:
                    lines.append(line)
        flush()
    return [d for d in documents if d]


def create_instances(documents, vocab_words: list[str], options: Options,
                     rng: random.Random, progress=None) -> list[Instance]:
    """The reference's `create_training_instances` after reading: shuffles the
    documents, makes `dupe_factor` passes, shuffles the instances."""
    rng.shuffle(documents)
    instances = []
    for _ in range(options.dupe_factor):
        for index in range(len(documents)):
            instances.extend(instances_from_document(documents, index, vocab_words, options,
                                                     rng))
            if progress is not None:
                progress(len(instances))
    rng.shuffle(instances)
    return instances


def instances_from_document(documents, index: int, vocab_words, options: Options,
                            rng: random.Random) -> list[Instance]:
    document = documents[index]
    max_num_tokens = options.max_seq_length - 3  # [CLS], [SEP], [SEP]
    target = max_num_tokens
    if rng.random() < options.short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    out, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [t for segment in chunk[:a_end] for t in segment]
                tokens_b = []
                if len(chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b = target - len(tokens_a)
                    for _ in range(10):
                        other = rng.randint(0, len(documents) - 1)
                        if other != index:
                            break
                    random_document = documents[other]
                    start = rng.randint(0, len(random_document) - 1)
                    for j in range(start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b:
                            break
                    i -= len(chunk) - a_end  # the unused segments are read again
                else:
                    is_random_next = False
                    tokens_b = [t for segment in chunk[a_end:] for t in segment]
                truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
                tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, positions, labels = mask_tokens(tokens, vocab_words, options, rng)
                out.append(Instance(tokens, segment_ids, is_random_next, positions, labels))
            chunk, length = [], 0
        i += 1
    return out


def truncate_pair(tokens_a: list, tokens_b: list, max_num_tokens: int,
                  rng: random.Random) -> None:
    """Cuts the longer side (B on ties) one token at a time, front or back at random."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def mask_tokens(tokens: list, vocab_words: list, options: Options, rng: random.Random):
    """-> (tokens with the masked ones replaced, their positions, their labels)."""
    candidates: list[list[int]] = []
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if options.do_whole_word_mask and candidates and token.startswith("##"):
            candidates[-1].append(i)
        else:
            candidates.append([i])
    rng.shuffle(candidates)
    output = list(tokens)
    num_to_predict = min(options.max_predictions_per_seq,
                         max(1, int(round(len(tokens) * options.masked_lm_prob))))
    chosen: list[tuple[int, str]] = []
    covered: set[int] = set()
    for group in candidates:
        if len(chosen) >= num_to_predict:
            break
        if len(chosen) + len(group) > num_to_predict:
            continue  # a whole word that would go over the budget
        if any(i in covered for i in group):
            continue
        for i in group:
            covered.add(i)
            if rng.random() < 0.8:
                replacement = "[MASK]"
            elif rng.random() < 0.5:
                replacement = tokens[i]
            else:
                replacement = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output[i] = replacement
            chosen.append((i, tokens[i]))
    chosen.sort()
    return output, [i for i, _ in chosen], [label for _, label in chosen]


def to_features(instance: Instance, token_id: dict, options: Options) -> dict:
    """An instance -> the reference's feature lists, padded."""
    seq, preds = options.max_seq_length, options.max_predictions_per_seq
    ids = [token_id[t] for t in instance.tokens]
    if len(ids) > seq:
        raise AssertionError(f"an instance of {len(ids)} tokens > max_seq_length {seq}")
    pad = seq - len(ids)
    positions = list(instance.masked_lm_positions)
    labels = [token_id[t] for t in instance.masked_lm_labels]
    fill = preds - len(positions)
    return collections.OrderedDict([
        ("input_ids", ids + [0] * pad),
        ("input_mask", [1] * len(ids) + [0] * pad),
        ("segment_ids", list(instance.segment_ids) + [0] * pad),
        ("masked_lm_positions", positions + [0] * fill),
        ("masked_lm_ids", labels + [0] * fill),
        ("masked_lm_weights", [1.0] * len(labels) + [0.0] * fill),
        ("next_sentence_labels", [1 if instance.is_random_next else 0]),
    ])


def serialize(features: dict) -> bytes:
    import tensorflow as tf

    feature = {}
    for name, values in features.items():
        if name == "masked_lm_weights":
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_instances(instances, token_id: dict, options: Options, output_files: list[str],
                    progress=None) -> int:
    """Round-robin over `output_files`, each written atomically (all renamed into place
    once every instance is written)."""
    import tensorflow as tf

    tmps = []
    for path in output_files:
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        tmps.append(os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}"))
    writers = [tf.io.TFRecordWriter(tmp) for tmp in tmps]
    try:
        for n, instance in enumerate(instances):
            writers[n % len(writers)].write(serialize(to_features(instance, token_id, options)))
            if progress is not None:
                progress(n + 1)
        for writer in writers:
            writer.close()
        for tmp, path in zip(tmps, output_files):
            normal_permissions(tmp, folder=False)  # the umask's mode, as a plain open
            os.replace(tmp, path)
    except BaseException:
        for writer in writers:
            writer.close()
        for tmp in tmps:
            if os.path.exists(tmp):
                os.remove(tmp)
        raise
    return len(instances)


class _Rate:
    """Logs `what` counts with a rate, at most every `every` seconds."""

    def __init__(self, what: str, every: float = 5.0):
        self.what, self.every = what, every
        self.start = self.last = time.monotonic()

    def __call__(self, count: int, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.every:
            self.last = now
            logger.info("%s: %d (%.0f/s)", self.what, count,
                        count / max(now - self.start, 1e-9))


def create_pretraining_data(input_file: str, output_file: str, vocab_file: str,
                            do_lower_case: bool = True, options: Options | None = None
                            ) -> int:
    """The whole command: reads, creates, writes; returns the number of instances.
    Every check (flags, files, vocabulary, an empty corpus) comes before any output."""
    from kbert.tokenizers.bert import BertTokenizer, load_vocab

    options = options or Options()
    options.check()
    files = expand_inputs(input_file)
    outputs = [p for p in output_file.split(",") if p]
    if not outputs:
        raise ValueError("--output_file: give one or more files (comma-separated)")
    vocab = load_vocab(vocab_file)
    check_vocab(vocab, vocab_file)
    tokenizer = BertTokenizer(vocab, lowercase=do_lower_case)
    documents = read_documents(files, tokenizer)
    if not documents:
        raise ValueError(f"--input_file {input_file}: no text (the files hold no tokens)")
    logger.info("read %d documents, %d sentences from %d files", len(documents),
                sum(len(d) for d in documents), len(files))
    # Google's vocabulary: a dict from token to its last line (keys in first-seen order).
    token_id = {}
    for index, token in enumerate(vocab):
        token_id[token] = index
    vocab_words = list(token_id)
    rng = random.Random(options.random_seed)
    made = _Rate("instances created")
    instances = create_instances(documents, vocab_words, options, rng, made)
    made(len(instances), force=True)
    written = _Rate("instances written")
    write_instances(instances, token_id, options, outputs, written)
    written(len(instances), force=True)
    logger.info("wrote %d instances to %s", len(instances), ", ".join(outputs))
    return len(instances)
