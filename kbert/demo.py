"""`make demo-classifier`: a small end-to-end BERT run on an embedded data set.

A shorter companion to `make demo` (SQuAD), showing the whole BERT path on data it
generates: build a WordPiece vocabulary, tokenize in-graph inside tf.data,
train a small BertEncoder classifier on reviews with negation, evaluate on held-out ones,
save the model as a kbert folder, reload it and check that predictions are unchanged.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import tempfile
import time


_SUBJECTS = ["the film", "this café", "the hotel", "our guide", "the book", "the concert",
             "the service", "this phone", "the museum", "the pasta"]
_POSITIVE = ["good", "great", "wonderful", "excellent", "delightful", "charming"]
_NEGATIVE = ["bad", "awful", "boring", "terrible", "dull", "disappointing"]
_ADVERBS = ["", "really ", "quite ", "truly ", "very "]


def make_reviews(n: int, seed: int):
    """Short reviews; the label is the sentiment after negation ("not bad" is positive),
    so word counts alone cannot solve it: the model must read "not" in context."""
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        positive = rng.random() < 0.5
        word = rng.choice(_POSITIVE if positive else _NEGATIVE)
        negated = rng.random() < 0.5
        verb = rng.choice(["was", "is"])
        text = (f"{rng.choice(_SUBJECTS).capitalize()} {verb} "
                f"{'not ' if negated else ''}{rng.choice(_ADVERBS)}{word}.")
        texts.append(text)
        labels.append(int(positive != negated))
    return texts, labels


def run(train_size=2000, test_size=400, epochs=5, seq_length=32, learning_rate=1e-3, seed=0,
        output_dir=None):
    import keras
    import numpy as np
    import tensorflow as tf

    import kbert

    keras.utils.set_random_seed(seed)
    start = time.time()
    train = make_reviews(train_size, seed)
    test = make_reviews(test_size, seed + 1)
    vocab = kbert.build_vocab(train[0], vocab_size=200, min_count=1)
    tokenizer = kbert.BertTokenizer(vocab, seq_length=seq_length)
    config = kbert.BertConfig(vocab_size=len(vocab), hidden_size=128, num_layers=2,
                              num_heads=4, intermediate_size=512,
                              max_position_embeddings=seq_length)
    encoder = kbert.BertEncoder(config)

    def dataset(split, shuffle):
        ds = tf.data.Dataset.from_tensor_slices(split)
        if shuffle:
            ds = ds.shuffle(len(split[0]), seed=seed)
        return ds.batch(32).map(lambda text, y: (tokenizer(text), y),
                                num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)

    inputs = encoder.input
    pooled = encoder(inputs)["pooled_output"]
    logits = keras.layers.Dense(2, name="classifier")(keras.layers.Dropout(0.1)(pooled))
    model = keras.Model(inputs, logits)
    steps = epochs * (train_size // 32 + 1)
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0, steps, warmup_target=learning_rate, warmup_steps=steps // 10)
    model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(dataset(train, True), epochs=epochs, verbose=2)
    _, accuracy = model.evaluate(dataset(test, False), verbose=0)

    output_dir = output_dir or tempfile.mkdtemp(prefix="kbert-demo-")
    folder = os.path.join(output_dir, "encoder")
    encoder.save_pretrained(folder, tokenizer=tokenizer)
    reloaded = kbert.BertEncoder.from_pretrained(folder)
    probe = kbert.BertTokenizer.from_pretrained(folder, seq_length=seq_length)(test[0][:8])
    same = np.allclose(encoder(probe)["pooled_output"], reloaded(probe)["pooled_output"],
                       atol=1e-6)
    print(f"kbert demo: held-out accuracy {accuracy * 100:.1f}% on {test_size} reviews "
          f"({time.time() - start:.0f}s); encoder saved to {folder} "
          f"(reload {'matches' if same else 'DIFFERS'})")
    if not same:
        raise SystemExit("reloaded encoder differs from the trained one")
    return accuracy


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train_size", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--output_dir", default=None, help="where to save (default: a temp dir)")
    args = parser.parse_args(argv)
    from kbert import _startup

    _startup.quiet_import_tensorflow()  # TensorFlow's start-up lines off the terminal
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    run(train_size=args.train_size, epochs=args.epochs, output_dir=args.output_dir)


if __name__ == "__main__":
    main()
