"""Hugging Face Hub names (`kbert.hub`): a Hub cache written in the Hub's own layout
(`models--org--name/{blobs,snapshots/<commit>,refs/main}`, files as links to their
blobs), read offline through `huggingface_hub` as users' own cache is."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = "sentence-transformers/all-MiniLM-L6-v2"
COMMIT = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"


def write_hub_cache(hf_home, repo: str, folder: str, commit: str = COMMIT) -> str:
    """Places `folder`'s files in `hf_home/hub` as `huggingface_hub` stores a download:
    content-addressed blobs, a snapshot of relative links, `refs/main` holding the
    commit (no newline). Returns the snapshot folder."""
    storage = os.path.join(hf_home, "hub", "models--" + repo.replace("/", "--"))
    snapshot = os.path.join(storage, "snapshots", commit)
    os.makedirs(os.path.join(storage, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(storage, "refs"), exist_ok=True)
    for root, _, files in os.walk(folder):
        for name in files:
            source = os.path.join(root, name)
            rel = os.path.relpath(source, folder)
            with open(source, "rb") as f:
                data = f.read()
            blob = os.path.join(storage, "blobs", hashlib.sha256(data).hexdigest())
            with open(blob, "wb") as f:
                f.write(data)
            link = os.path.join(snapshot, rel)
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(os.path.relpath(blob, os.path.dirname(link)), link)
    with open(os.path.join(storage, "refs", "main"), "w") as f:
        f.write(commit)
    return snapshot


@pytest.fixture(scope="module")
def hub_home(tmp_path_factory, minilm_dir):
    home = tmp_path_factory.mktemp("hf_home")
    write_hub_cache(str(home), REPO, minilm_dir)
    return str(home)


@pytest.fixture
def offline_hub(hub_home, monkeypatch):
    """This process's huggingface_hub pointed at the cache, offline (its constants are
    read from the environment at import; the subprocess test sets the variables)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", os.path.join(hub_home, "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return hub_home


def _resolve_in_fresh_process(hub_home, name):
    env = {**os.environ, "HF_HOME": hub_home, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT}
    env.pop("HF_HUB_CACHE", None)
    code = ("import sys\nfrom kbert import hub\ntry:\n    print(hub.resolve(sys.argv[1]))\n"
            "except FileNotFoundError as e:\n    print('ERROR', e)\n")
    out = subprocess.run([sys.executable, "-c", code, name], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_hf_home_and_offline_are_honoured_in_a_fresh_process(hub_home):
    snapshot = os.path.join(hub_home, "hub", "models--sentence-transformers--all-MiniLM-L6-v2",
                            "snapshots", COMMIT)
    assert _resolve_in_fresh_process(hub_home, REPO) == snapshot
    assert _resolve_in_fresh_process(hub_home, "hf://" + REPO) == snapshot
    assert _resolve_in_fresh_process(hub_home, f"{REPO}@{COMMIT}") == snapshot
    missing = _resolve_in_fresh_process(hub_home, "bert-base-uncased")
    assert "\n" not in missing and missing.startswith("ERROR bert-base-uncased: "), missing
    assert "'bert-base-uncased' is not in the Hub cache" in missing
    assert "HF_HUB_OFFLINE is set" in missing and "hf download bert-base-uncased" in missing


def test_a_cached_name_loads_what_the_folder_loads(offline_hub, minilm_dir):
    import kbert

    by_name = kbert.BertEncoder.from_pretrained(REPO)
    by_path = kbert.BertEncoder.from_pretrained(minilm_dir)
    assert len(by_name.weights) == len(by_path.weights) > 0
    for a, b in zip(by_name.weights, by_path.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    texts = ["Hub names resolve offline.", "Ünïcödé and CASE survive?"]
    tok_name, tok_path = (kbert.BertTokenizer.from_pretrained(x) for x in (REPO, minilm_dir))
    a, b = tok_name(texts), tok_path(texts)
    for key in b:
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))
    assert tok_name.lowercase == tok_path.lowercase is True
    out_name = by_name(a)["sequence_output"]
    out_path = by_path(b)["sequence_output"]
    np.testing.assert_array_equal(np.asarray(out_name), np.asarray(out_path))


def test_errors_name_both_readings(offline_hub, tmp_path, monkeypatch):
    import kbert
    from kbert import hub

    with pytest.raises(FileNotFoundError) as e:
        kbert.GPTLanguageModel.from_pretrained("gpt2")
    assert str(e.value).startswith("gpt2: no such model folder, and Hugging Face Hub repo "
                                   "'gpt2' is not in the Hub cache")
    with pytest.raises(FileNotFoundError, match=r"^\./runs/none: no such model folder, and not "
                                                r"a Hugging Face Hub repo id"):
        hub.resolve("./runs/none")
    with pytest.raises(FileNotFoundError, match="at revision 'v9'"):
        kbert.BertTokenizer.from_pretrained(f"{REPO}@v9")
    # A path on disk wins over the name it also spells.
    monkeypatch.chdir(tmp_path)
    os.makedirs("gpt2")
    assert hub.resolve("gpt2") == "gpt2"


def test_presets_name_family_and_size():
    import kbert

    names = {p.name: p for p in kbert.presets()}
    assert names["bert-base-uncased"].family == "bert"
    assert names["gpt2-xl"].family == "gpt" and names["gpt2-xl"].parameters == "1.5B"
    assert names["roberta-base"].family == "roberta" and REPO in names
    from kbert.models import registry

    assert {p.family for p in kbert.presets()} <= set(registry.families())


@pytest.mark.e2e
def test_task_command_takes_a_hub_name(offline_hub, tmp_path, capsys):
    from glue_fixtures import synthetic_paraphrase

    from kbert.tasks.glue import __main__ as cli

    folder = synthetic_paraphrase(str(tmp_path), n_train=64, n_dev=16)
    out = tmp_path / "out"
    assert cli.main(["--task", "mrpc", "--data_dir", folder, "--output_dir", str(out),
                     "--init_from", REPO, "--max_seq_length", "16",
                     "--num_train_epochs", "1", "--train_batch_size", "16"]) == 0
    run = json.loads((out / "kbert_run.json").read_text())
    assert run["init_from"].endswith(os.path.join("snapshots", COMMIT)), run
    assert "eval_accuracy" in json.loads((out / "eval_results.json").read_text())
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--task", "mrpc", "--data_dir", folder, "--init_from", "no-such/model"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == 2 and err.startswith(
        "python -m kbert.tasks.glue: error: argument --init_from: no-such/model: no such "
        "model folder, and Hugging Face Hub repo 'no-such/model' is not in the Hub cache"), err


def test_an_unreachable_hub_answers_at_once_from_the_cache(hub_home, monkeypatch):
    """#50: with HF_HUB_OFFLINE unset and no network, a name not in the cache is answered
    in one line at once (huggingface_hub's retries took about 25 s), and a cached name
    still loads."""
    import time

    from huggingface_hub import constants

    from kbert import hub

    monkeypatch.setattr(constants, "HF_HUB_CACHE", os.path.join(hub_home, "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens
    start = time.monotonic()
    with pytest.raises(FileNotFoundError) as e:
        hub.resolve("bert-base-uncased")
    assert time.monotonic() - start < 5
    message = str(e.value)
    assert "\n" not in message and "is not in the Hub cache" in message
    assert "(http://127.0.0.1:9 did not answer)" in message
    assert hub.resolve(REPO).endswith(COMMIT)
