"""CoNLL-2003 NER: reader, tag schemes, first-piece alignment, fine-tuning and
feature-based heads, conlleval metrics. `python -m kbert.tasks.ner --help`."""

from kbert.tasks.ner.data import (Sentence, bio2_to_bioes, convert_tags, iob1_to_bio2,
                                  labels_of, read_conll)
from kbert.tasks.ner.evaluate import chunks, evaluate
from kbert.tasks.ner.features import NerFeatures, convert_sentences, word_predictions
from kbert.tasks.ner.model import LAYER_CHOICES, build_model, ner_loss, prepare_encoder
from kbert.tasks.ner.predict import Entity, predict_entities

__all__ = ["Entity", "LAYER_CHOICES", "NerFeatures", "Sentence", "bio2_to_bioes", "build_model",
           "chunks", "convert_sentences", "convert_tags", "evaluate", "iob1_to_bio2",
           "labels_of", "ner_loss", "predict_entities", "prepare_encoder", "read_conll",
           "word_predictions"]
