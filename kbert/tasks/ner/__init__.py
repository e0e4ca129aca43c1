"""CoNLL-2003 NER: reader, tag schemes, first-piece alignment, fine-tuning and
feature-based heads, conlleval metrics. `python -m kbert.tasks.ner --help`."""

from kbert._lazy import lazy_package

# Imported on first use (kbert._lazy): the command lines answer --help before
# TensorFlow is imported.
_EXPORTS = {
    "Entity": "kbert.tasks.ner.predict",
    "LAYER_CHOICES": "kbert.tasks.ner.model",
    "NerFeatures": "kbert.tasks.ner.features",
    "Sentence": "kbert.tasks.ner.data",
    "bio2_to_bioes": "kbert.tasks.ner.data",
    "build_model": "kbert.tasks.ner.model",
    "chunks": "kbert.tasks.ner.evaluate",
    "convert_sentences": "kbert.tasks.ner.features",
    "convert_tags": "kbert.tasks.ner.data",
    "evaluate": "kbert.tasks.ner.evaluate",
    "iob1_to_bio2": "kbert.tasks.ner.data",
    "labels_of": "kbert.tasks.ner.data",
    "ner_loss": "kbert.tasks.ner.model",
    "predict_entities": "kbert.tasks.ner.predict",
    "prepare_encoder": "kbert.tasks.ner.model",
    "read_conll": "kbert.tasks.ner.data",
    "word_predictions": "kbert.tasks.ner.features",
}
lazy_package(__name__, _EXPORTS)
