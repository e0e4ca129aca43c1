"""Scores of generated text from the official packages, run: ROUGE with Google's
`rouge-score` (the package of the BART, PEGASUS and T5 evaluations) and BLEU and chrF with
`sacrebleu`. Nothing here reimplements a metric.

ROUGE: rouge1, rouge2, rougeL and rougeLsum F-measures with the Porter stemmer on
(`use_stemmer=True`, as transformers' `run_summarization.py` asks for it), each the mean
over the examples, as a percentage. rougeLsum splits the texts into sentences at
newlines (rouge-score's rule); transformers' script puts a newline after each sentence
that nltk's `sent_tokenize` finds first, kbert scores the texts as they are (a dialogue's
turns are already on lines of their own). transformers' `evaluate` reports the
bootstrap median (`BootstrapAggregator`, unseeded resampling) rather than the mean: the
two agree to sampling error, the mean is the same on every run.

BLEU and chrF: sacrebleu's corpus scores with its defaults (13a tokenization, one
reference per example), with sacrebleu's signature of each, which names the version and
settings a published figure needs."""

from __future__ import annotations

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
METRICS = ("rouge", "bleu")


def rouge(predictions: list[str], references: list[str]) -> dict:
    """{rouge1, rouge2, rougeL, rougeLsum}: mean F-measures x 100."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for prediction, reference in zip(predictions, references, strict=True):
        scores = scorer.score(reference, prediction)
        for key in ROUGE_TYPES:
            totals[key] += scores[key].fmeasure
    n = max(1, len(predictions))
    return {key: 100.0 * totals[key] / n for key in ROUGE_TYPES}


def bleu(predictions: list[str], references: list[str]) -> dict:
    """{bleu, chrf} (sacrebleu's corpus scores, 0..100) and their signatures."""
    import sacrebleu

    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    b, c = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    bleu_score = b.corpus_score(predictions, [references])
    chrf_score = c.corpus_score(predictions, [references])
    return {"bleu": float(bleu_score.score), "chrf": float(chrf_score.score),
            "bleu_signature": str(b.get_signature()), "chrf_signature": str(c.get_signature())}


def compute_metrics(metric: str, predictions: list[str], references: list[str]) -> dict:
    """`metric` ("rouge" or "bleu") of the predictions against the references."""
    if metric == "rouge":
        return rouge(predictions, references)
    if metric == "bleu":
        return bleu(predictions, references)
    raise ValueError(f"metric {metric!r}: one of {', '.join(METRICS)}")
