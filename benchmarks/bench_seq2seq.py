"""Encoder-decoder benchmarks (T5, BART), kbert side by side with its peers in one
process.

Greedy generation (new tokens/s): `--new` tokens after a `--prompt`-token encoder input,
at batch 1 and 8, for T5-small's and BART-base's sizes with random weights:
`kbert.T5Seq2SeqLM` / `kbert.BartSeq2SeqLM` `generate_ids` (XLA, its default), keras-hub's
`T5Seq2SeqLM` / `BartSeq2SeqLM` `generate` (token-id input, no preprocessor; its own
random weights of the same config) and Hugging Face's PyTorch
`T5ForConditionalGeneration` / `BartForConditionalGeneration` `generate`. kbert and
Hugging Face run the same weights (kbert loads the Hugging Face folder). No run stops
early (no end token for kbert and keras-hub, `min_new_tokens` for Hugging Face). Each
library is called once before timing (tracing and compiling are not counted); rounds
alternate between the libraries and the median round is reported (`_common`).

Beam search (`--num_beams N`): the same, each library's beam search of width N (no
early stop; the best beam's tokens/s counted as new tokens: batch x new / seconds).

Training step (examples/s, `--train`): `train_on_batch` of a batch of `--train_batch`
examples, `--train_input`-token encoder inputs and `--train_target`-token targets (rows of
different lengths, padded), the same work for both: kbert's model and keras-hub's
`T5Seq2SeqLM` / `BartSeq2SeqLM` (no preprocessor) each compiled with
`keras.optimizers.AdamW(1e-4)` and Keras' `SparseCategoricalCrossentropy(from_logits=True)`
weighted by the target's padding mask, `jit_compile` as `--jit` (both the same); and
Hugging Face's PyTorch model (its own `train()` mode, dropout on as in Keras' training
step) with `torch.optim.AdamW(1e-4)` and the same weighted cross-entropy, one
forward, backward and step.

Run: `python benchmarks/bench_seq2seq.py [--models t5,bart --new 32 --rounds 3]`;
`--train` adds the training-step table.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kbert  # noqa: E402
from _common import median_seconds  # noqa: E402


def _t5_peers():
    """t5-small's size (6 + 6 layers x 512, 8 heads, ReLU, tied): transformers' model
    with random weights, kbert's loaded from its folder, keras-hub's of the same
    config."""
    import keras_hub
    import torch
    import transformers

    torch.manual_seed(0)
    hf = transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
        feed_forward_proj="relu", decoder_start_token_id=0)).eval()
    folder = tempfile.mkdtemp(prefix="bench-t5-")
    hf.save_pretrained(folder)
    lm = kbert.T5Seq2SeqLM.from_pretrained(folder, load_tokenizer=False)
    hub = keras_hub.models.T5Seq2SeqLM(backbone=keras_hub.models.T5Backbone(
        vocabulary_size=32128, num_layers=6, num_heads=8, hidden_dim=512,
        intermediate_dim=2048, key_value_dim=64, activation="relu",
        use_gated_activation=False, tie_embedding_weights=True), preprocessor=None)
    return hf, lm, hub, 0


def _bart_peers():
    """bart-base's size (6 + 6 layers x 768, 12 heads, GELU)."""
    import keras_hub
    import torch
    import transformers

    torch.manual_seed(0)
    hf = transformers.BartForConditionalGeneration(transformers.BartConfig(
        vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6,
        encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072,
        decoder_ffn_dim=3072, forced_eos_token_id=None)).eval()
    folder = tempfile.mkdtemp(prefix="bench-bart-")
    hf.save_pretrained(folder)
    lm = kbert.BartSeq2SeqLM.from_pretrained(folder, load_tokenizer=False)
    hub = keras_hub.models.BartSeq2SeqLM(backbone=keras_hub.models.BartBackbone(
        vocabulary_size=50265, num_layers=6, num_heads=12, hidden_dim=768,
        intermediate_dim=3072, max_sequence_length=1024), preprocessor=None)
    return hf, lm, hub, 2


def bench_generate(peers, batch: int, prompt: int, new: int, rounds: int,
                   beams: int = 1) -> dict:
    import keras_hub
    import torch

    hf, lm, hub, start = peers
    hub.compile(sampler="greedy" if beams == 1 else keras_hub.samplers.BeamSampler(beams))
    search = {} if beams == 1 else {"sampler": "beam", "num_beams": beams}
    ids = np.random.RandomState(0).randint(3, 32000, (batch, prompt)).astype("int32")
    mask = np.ones_like(ids)
    decoder = np.zeros((batch, new + 1), "int32")
    decoder[:, 0] = start
    decoder_mask = np.zeros_like(decoder)
    decoder_mask[:, 0] = 1
    hub_inputs = {"encoder_token_ids": ids, "encoder_padding_mask": mask,
                  "decoder_token_ids": decoder, "decoder_padding_mask": decoder_mask}
    torch_ids = torch.tensor(ids, dtype=torch.long)

    def run_kbert():
        lm.generate_ids(ids, mask, new, end_token_id=None, **search).numpy()

    def run_hub():
        hub.generate(hub_inputs, stop_token_ids=None)

    def run_hf():
        with torch.no_grad():
            hf.generate(torch_ids, attention_mask=torch.ones_like(torch_ids),
                        max_new_tokens=new, min_new_tokens=new, do_sample=False,
                        num_beams=beams, early_stopping=False)

    times = median_seconds({"kbert": run_kbert, "keras-hub": run_hub, "hf-torch": run_hf},
                           rounds)
    return {name: batch * new / t for name, t in times.items()}


def bench_train(peers, batch: int, inputs: int, targets: int, rounds: int, jit: bool,
                steps: int = 2) -> dict:
    import torch

    hf, lm, hub, start = peers
    rng = np.random.default_rng(0)
    enc_len = rng.integers(inputs // 2, inputs + 1, batch)
    enc_len[0] = inputs
    dec_len = rng.integers(targets // 2, targets + 1, batch)
    dec_len[0] = targets
    enc_mask = (np.arange(inputs)[None] < enc_len[:, None]).astype("int32")
    dec_mask = (np.arange(targets)[None] < dec_len[:, None]).astype("int32")
    x = {"encoder_token_ids": rng.integers(3, 32000, (batch, inputs)).astype("int32") * enc_mask,
         "encoder_padding_mask": enc_mask,
         "decoder_token_ids": rng.integers(3, 32000, (batch, targets)).astype("int32") * dec_mask,
         "decoder_padding_mask": dec_mask}
    x["decoder_token_ids"][:, 0] = start
    y = np.roll(x["decoder_token_ids"], -1, axis=1)
    weights = dec_mask.astype("float32")

    def loss():
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    lm.compile(optimizer=keras.optimizers.AdamW(1e-4), loss={"logits": loss()},
               jit_compile=jit)
    hub.compile(optimizer=keras.optimizers.AdamW(1e-4), loss=loss(), weighted_metrics=[],
                jit_compile=jit)
    hf.train()
    hf_optimizer = torch.optim.AdamW(hf.parameters(), lr=1e-4)
    hf_x = {"input_ids": torch.tensor(x["encoder_token_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(enc_mask, dtype=torch.long),
            "decoder_input_ids": torch.tensor(x["decoder_token_ids"], dtype=torch.long),
            "decoder_attention_mask": torch.tensor(dec_mask, dtype=torch.long)}
    hf_y, hf_w = torch.tensor(y, dtype=torch.long), torch.tensor(weights)

    def run_hf():  # the same loss: cross-entropy weighted by the target mask, AdamW
        hf_optimizer.zero_grad()
        logits = hf(**hf_x).logits
        each = torch.nn.functional.cross_entropy(logits.transpose(1, 2), hf_y,
                                                 reduction="none")
        (each * hf_w).mean().backward()
        hf_optimizer.step()

    runs = {"kbert": lambda: lm.train_on_batch(x, {"logits": y},
                                               sample_weight={"logits": weights}),
            "keras-hub": lambda: hub.train_on_batch(x, y, sample_weight=weights),
            "hf-torch": run_hf}
    seconds = median_seconds(runs, rounds, warmup=2, repeat=steps)
    hf.eval()
    return {k: batch / t for k, t in seconds.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="t5,bart")
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--new", type=int, default=32)
    p.add_argument("--batches", default="1,8")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--generate", type=int, default=1, help="0: leave out the generation table")
    p.add_argument("--num_beams", type=int, default=1,
                   help="beam search of this width instead of greedy decoding")
    p.add_argument("--train", action="store_true", help="the training-step table too")
    p.add_argument("--train_batch", type=int, default=8)
    p.add_argument("--train_input", type=int, default=128)
    p.add_argument("--train_target", type=int, default=32)
    p.add_argument("--jit", type=int, default=0, help="jit_compile of both training steps")
    args = p.parse_args(argv)
    import keras_hub
    import torch

    print(f"# kbert {kbert.__version__}, TF {tf.__version__}, Keras {keras.__version__}, "
          f"keras-hub {keras_hub.__version__}, torch {torch.__version__}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs")
    for name in args.models.split(","):
        peers = {"t5": _t5_peers, "bart": _bart_peers}[name]()
        size = {"t5": "T5-small", "bart": "BART-base"}[name]
        if args.generate:
            how = "Greedy generation" if args.num_beams == 1 else \
                f"Beam search ({args.num_beams} beams)"
            print(f"\n## {how}, {size} size, {args.prompt}-token input, "
                  f"{args.new} new tokens (new tokens/s, median of {args.rounds})\n")
            print("| batch | kbert | keras-hub | HF torch | kbert / keras-hub | kbert / HF |\n"
                  "|---|---|---|---|---|---|")
            for batch in map(int, args.batches.split(",")):
                r = bench_generate(peers, batch, args.prompt, args.new, args.rounds,
                                   args.num_beams)
                print(f"| {batch} | {r['kbert']:.1f} | {r['keras-hub']:.1f} | "
                      f"{r['hf-torch']:.1f} | {r['kbert'] / r['keras-hub']:.2f} | "
                      f"{r['kbert'] / r['hf-torch']:.2f} |", flush=True)
        if args.train:
            r = bench_train(peers, args.train_batch, args.train_input, args.train_target,
                            args.rounds, bool(args.jit))
            print(f"\n## Training step, {size} size, batch {args.train_batch} x "
                  f"{args.train_input} input / {args.train_target} target tokens, jit_compile="
                  f"{bool(args.jit)} (examples/s, median of {args.rounds})\n")
            print(f"| kbert | keras-hub | HF torch | kbert / keras-hub | kbert / HF |\n"
                  f"|---|---|---|---|---|\n"
                  f"| {r['kbert']:.2f} | {r['keras-hub']:.2f} | {r['hf-torch']:.2f} | "
                  f"{r['kbert'] / r['keras-hub']:.2f} | {r['kbert'] / r['hf-torch']:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
