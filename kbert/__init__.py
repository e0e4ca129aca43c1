"""kbert: ELMo, GPT and BERT as Keras 3 layers and models, trained, fine-tuned and
served with TensorFlow.

The names below are imported on first use (`kbert._lazy`), so that a command's
`--help` does not wait for TensorFlow."""

__version__ = "0.1.0"

from kbert._lazy import lazy_package  # noqa: E402

from kbert.models.registry import public_names  # noqa: E402 (reads files, imports none)

# Each family's public names (its package's `__all__`), and the package-wide helpers.
_EXPORTS = {
    **public_names(),
    "build_vocab": "kbert.tokenizers", "presets": "kbert.hub",
    "enable_lora": "kbert.models.lora", "merge_lora": "kbert.models.lora",
    "save_lora": "kbert.models.lora", "load_lora": "kbert.models.lora",
}
lazy_package(__name__, _EXPORTS)
