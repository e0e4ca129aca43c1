"""Model names: a `from_pretrained` argument or a task command's `--init_from` /
`--model_dir` that is not a path on disk is read as a Hugging Face Hub repo id
(`bert-base-uncased`, `org/name`, `org/name@revision`, `hf://org/name`) and resolved
to a folder in the Hub's cache by `huggingface_hub`, which honours `HF_HOME`,
`HF_HUB_CACHE` and `HF_HUB_OFFLINE` (offline, only the cache is read) and shows its
progress bar while downloading. A path that exists always wins over a name.

`presets()` lists the names kbert knows how to load, with their family and size."""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re

HF_SCHEME = "hf://"

# What a model folder needs: configs and tokenizer files (small), then one weights format,
# the first the repo has: safetensors (single or sharded), PyTorch's .bin, TF1 checkpoints
# (Google's BERT, OpenAI's GPT-2 layouts), ELMo's HDF5.
SMALL_FILES = ("*.json", "*.txt", "*.model", "vocab.bpe", "merges.txt", "checkpoint")
WEIGHT_CHOICES = (("model.safetensors", "model-*-of-*.safetensors"),
                  ("pytorch_model.bin", "pytorch_model-*-of-*.bin"),
                  ("*.ckpt.index", "*.ckpt.data-*", "*.ckpt.meta"),
                  ("*.hdf5",))


@dataclasses.dataclass(frozen=True)
class Preset:
    """A Hub name kbert loads: its family, size (parameters) and what it is."""

    name: str
    family: str
    parameters: str
    description: str


_PRESETS = (
    Preset("bert-base-uncased", "bert", "110M", "BERT base, lower-cased English (Google)"),
    Preset("bert-base-cased", "bert", "108M", "BERT base, cased English (Google)"),
    Preset("bert-large-uncased", "bert", "335M", "BERT large, lower-cased English (Google)"),
    Preset("bert-large-cased", "bert", "333M", "BERT large, cased English (Google)"),
    Preset("bert-base-multilingual-cased", "bert", "178M", "BERT base, 104 languages"),
    Preset("bert-base-chinese", "bert", "102M", "BERT base, Chinese"),
    Preset("google/bert_uncased_L-2_H-128_A-2", "bert", "4M", "BERT tiny (Google's small BERTs)"),
    Preset("sentence-transformers/all-MiniLM-L6-v2", "bert", "23M",
           "MiniLM, 6 layers, sentence embeddings"),
    Preset("gpt2", "gpt", "124M", "GPT-2 small (OpenAI)"),
    Preset("gpt2-medium", "gpt", "355M", "GPT-2 medium (OpenAI)"),
    Preset("gpt2-large", "gpt", "774M", "GPT-2 large (OpenAI)"),
    Preset("gpt2-xl", "gpt", "1.5B", "GPT-2 XL (OpenAI)"),
    Preset("distilgpt2", "gpt", "82M", "DistilGPT-2 (Hugging Face)"),
    Preset("openai-gpt", "gpt", "117M", "GPT (OpenAI, 2018)"),
    Preset("roberta-base", "roberta", "125M", "RoBERTa base (Facebook)"),
    Preset("roberta-large", "roberta", "355M", "RoBERTa large (Facebook)"),
    Preset("distilroberta-base", "roberta", "82M", "DistilRoBERTa (Hugging Face)"),
)


def presets() -> list[Preset]:
    """The Hub names kbert knows to load (any other repo of these families' Hugging
    Face layouts loads too). ELMo's weights are not on the Hub: AllenNLP publishes
    them as `elmo_2x4096_512_2048cnn_2xhighway_options.json` and `..._weights.hdf5`
    (docs/models.md gives the URLs); put both in one folder and pass its path."""
    return list(_PRESETS)


_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse_name(text: str) -> tuple[str, str | None] | None:
    """(repo id, revision or None) of a Hub name, or None when `text` cannot be one."""
    name = text[len(HF_SCHEME):] if text.startswith(HF_SCHEME) else text
    name, _, revision = name.partition("@")
    if not _REPO_ID.match(name) or ".." in name or name.endswith((".", "-")):
        return None
    return name, (revision or None)


def resolve(path: str | os.PathLike, what: str = "model folder") -> str:
    """`path` itself when it exists on disk; else the cached folder of the Hub repo it
    names (downloaded first when online and missing). Errors are one line: neither a
    path nor a name, a name offline and not cached (with how to get it), a repo the Hub
    does not have."""
    text = os.fspath(path)
    if os.path.exists(text):
        return text
    parsed = parse_name(text)
    if parsed is None:
        raise FileNotFoundError(f"{text}: no such {what}, and not a Hugging Face Hub repo id "
                                "(org/name[@revision])")
    repo, revision = parsed
    return _snapshot(text, repo, revision, what)


def _snapshot(text: str, repo: str, revision: str | None, what: str) -> str:
    try:
        import huggingface_hub
        from huggingface_hub import constants, errors
    except ImportError as e:  # a dependency of kbert; missing in a hand-made environment
        raise FileNotFoundError(f"{text}: no such {what}; reading it as a Hub name needs "
                                f"huggingface_hub ({e}): pip install huggingface_hub"
                                ) from None
    where = f"no such {what}, and Hugging Face Hub repo {repo!r}"
    if revision:
        where += f" at revision {revision!r}"
    # Without a network, huggingface_hub retries for about 25 s before it reads the
    # cache: a Hub that cannot be reached at once is read as offline.
    offline = constants.HF_HUB_OFFLINE or not _reachable(constants.ENDPOINT)
    try:
        patterns = None if offline else _patterns(repo, revision)
        return huggingface_hub.snapshot_download(repo, revision=revision,
                                                 allow_patterns=patterns,
                                                 local_files_only=offline)
    except (errors.RepositoryNotFoundError, errors.GatedRepoError) as e:
        raise FileNotFoundError(f"{text}: {where} is not on the Hub or not readable "
                                f"with this token ({type(e).__name__})") from None
    except errors.RevisionNotFoundError:
        raise FileNotFoundError(f"{text}: {where}: the repo has no such revision") from None
    except errors.LocalEntryNotFoundError:
        why = (" (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else
               f" ({constants.ENDPOINT} did not answer)" if offline else "")
        raise FileNotFoundError(
            f"{text}: {where} is not in the Hub cache ({constants.HF_HUB_CACHE}) and the "
            f"Hub cannot be reached{why}; fetch it where there is network with "
            f"`hf download {repo}` (same HF_HOME) or give a local folder") from None


def _reachable(endpoint: str, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hub's host opens within `timeout` seconds."""
    import socket
    import urllib.parse

    url = urllib.parse.urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _patterns(repo: str, revision: str | None) -> list[str] | None:
    """The files to download: small files and the first weights format the repo has.
    None (everything) when the listing fails; snapshot_download then says why."""
    import huggingface_hub

    try:
        files = huggingface_hub.list_repo_files(repo, revision=revision)
    except Exception:  # noqa: BLE001 - snapshot_download raises the precise error
        return None
    for choice in WEIGHT_CHOICES:
        if any(fnmatch.fnmatch(f, p) for f in files for p in choice):
            return list(SMALL_FILES) + list(choice)
    return list(SMALL_FILES)
