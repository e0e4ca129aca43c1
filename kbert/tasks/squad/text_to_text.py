"""SQuAD (v1.1, v2.0) as text to text: the SQuAD command's runner when `--init_from`
is an encoder-decoder whose family has the `squad_text` hooks (T5); the shared
fine-tuning, decoding and export are `kbert.tasks.text_to_text`'s."""

from __future__ import annotations

import os

from kbert.io import write_json
from kbert.tasks.common import write_results
from kbert.tasks.squad.data import squad_source
from kbert.tasks.squad.evaluate import evaluate
from kbert.tasks.text_to_text import export, features, fine_tune, generate_texts


def run_squad(args, runtime, family, train_examples, dev_examples, dev_json) -> dict:
    """SQuAD (v1.1, v2.0) as text to text with the --init_from family's format (T5:
    "question: ... context: ..." -> the first answer's text; "" for no answer):
    fine-tune (--do_train), generate the dev answers (--do_predict, at most
    --max_answer_length tokens) and score them with the official script of the data's
    version; `family` and `runtime`: the run's. Writes predictions.json, eval_results.json,
    OUTPUT_DIR/model and the `generate` export (--export_dir)."""
    model_dir = os.path.join(args.output_dir, "model")
    source = args.init_from if args.do_train else model_dir
    if not args.do_train and not os.path.isdir(model_dir):
        raise SystemExit(f"--do_predict alone: {model_dir} holds no model (train first, "
                         "with --do_train)")
    text, target = family.hook("squad_text"), family.hook("squad_target")
    tokenizer = family.tokenizer_class.from_pretrained(source)
    lm_class = family.language_model_class
    out_length = args.max_answer_length + 1  # the answer's tokens and </s>
    if args.do_train:
        inputs = [text(e.question, e.context) for e in train_examples]
        targets = [target(e.answers) for e in train_examples]
        model, trained = fine_tune(args, runtime, lm_class,
                                   lambda lm: features(lm, tokenizer, inputs, targets,
                                                       args.max_seq_length, out_length),
                                   len(train_examples), "SQuAD")
        model.save_pretrained(model_dir, tokenizer=tokenizer)
    else:
        model, trained = lm_class.from_pretrained(model_dir), None
    if not args.do_predict:
        return {}
    texts = [text(e.question, e.context) for e in dev_examples]
    outputs = generate_texts(model, tokenizer, texts, args.max_seq_length, out_length,
                             args.predict_batch_size)
    answers = {e.qid: o.strip() for e, o in zip(dev_examples, outputs)}
    write_json(os.path.join(args.output_dir, "predictions.json"), answers)
    results = write_results(args.output_dir, evaluate(dev_json, answers), split="eval",
                            source=squad_source(args), trained=trained)
    if args.export_dir:
        export(args, model, tokenizer, out_length, texts, outputs)
    return results
