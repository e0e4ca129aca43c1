"""Step-based `model.fit` that checkpoints atomically and resumes at the exact step."""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time

import keras
import tensorflow as tf

from kbert import internals

logger = logging.getLogger(__name__)


def compile_model(model: keras.Model, optimizer, loss, metrics=None, jit_compile: bool = False,
                  steps_per_execution: int = 1, loss_weights=None) -> keras.Model:
    """`model.compile`, then a check that XLA is really on when asked for.

    Keras turns `jit_compile` off with only a warning ("Proceeding with
    jit_compile=False") when a layer does not support XLA or op determinism is
    enabled; kbert raises instead, naming the reason.
    """
    internals.check()  # the optimizer and this check use private Keras APIs
    strategy = model.distribute_strategy
    local_replicas = (len(strategy.extended.worker_devices)
                      if isinstance(strategy, (tf.distribute.MirroredStrategy,
                                               tf.distribute.MultiWorkerMirroredStrategy))
                      else 1)
    if jit_compile and local_replicas > 1:
        raise RuntimeError(
            f"jit_compile=True with {type(strategy).__name__} over {local_replicas} local "
            "devices: Keras compiles the whole step with XLA, including the cross-replica "
            "optimizer update, which reads variables on the other devices (XLA known issue "
            "'tf.Variable on a different device'; keras-hub #949, keras #18110). Train "
            "without --jit_compile, or run one device per process (multi_worker).")
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=jit_compile,
                  steps_per_execution=steps_per_execution, loss_weights=loss_weights)
    if jit_compile and not model.jit_compile:
        blockers = [layer.name for layer in internals.flatten_layers(model)
                    if not layer.supports_jit]
        reason = (f"layers without XLA support: {blockers}" if blockers else
                  "op determinism is enabled (tf.config.experimental.enable_op_determinism)")
        raise RuntimeError(f"jit_compile=True was requested but Keras turned XLA off: {reason}")
    return model


class _StepCounter(keras.callbacks.Callback):
    """Counts the batches this run has trained on from Keras' batch index, which is
    the last step of each execution: with `steps_per_execution=n` Keras calls the
    batch hooks once every n steps."""

    def __init__(self, initial_step: int = 0):
        super().__init__()
        # Batches consumed before this run (a resumed run); the optimizer's iteration
        # count is not that under gradient accumulation.
        self.initial_step = initial_step

    def on_train_begin(self, logs=None):
        self._start = time.perf_counter()
        self._step = self._epoch_base = self.initial_step

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_base = self._step

    def _advance(self, batch: int) -> tuple[int, int]:
        """(steps since the last call, the step now)."""
        before, self._step = self._step, self._epoch_base + batch + 1
        return self._step - before, self._step


class Throughput(_StepCounter):
    """Logs examples/s and tokens/s about every `every` steps (and puts them in `logs`)."""

    def __init__(self, examples_per_step: int, tokens_per_step: float | None = None,
                 every: int = 100, initial_step: int = 0):
        super().__init__(initial_step)
        self.examples_per_step = examples_per_step
        self.tokens_per_step = tokens_per_step
        self.every = every
        self.history: list[dict] = []

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._since = 0
        self._untimed = None

    def on_train_batch_end(self, batch, logs=None):
        steps, step = self._advance(batch)
        self._since += steps
        if self._untimed is None:
            # The first execution traces and compiles the step: the rate is timed from
            # its end, as the progress bar's examples/s (the first figure was 13.5
            # against the bar's 171.8).
            self._untimed = steps
            self._start = time.perf_counter()
        if self._since < self.every:
            return
        elapsed = time.perf_counter() - self._start
        timed = self._since - self._untimed
        self._untimed = 0
        if timed <= 0 or elapsed <= 0:  # the first execution alone reached `every`
            self._since = 0
            return
        rate = {"examples_per_sec": self.examples_per_step * timed / elapsed}
        if self.tokens_per_step:
            rate["tokens_per_sec"] = self.tokens_per_step * timed / elapsed
        self.history.append(rate)
        if logs is not None:
            logs.update(rate)
        # Under a progress bar (which shows examples/s) the line would break the bar.
        logger.log(logging.DEBUG if _BarLine.on_screen else logging.INFO, "step %d: %s", step,
                   ", ".join(f"{k} {v:.1f}" for k, v in rate.items()))
        self._start, self._since = time.perf_counter(), 0


class Progress(_StepCounter):
    """Progress in epochs of the training data (not Keras' checkpoint loops): epoch,
    step, loss, learning rate, examples/s and the time left.

    On a terminal, one bar per epoch redrawn in place (a log record in between moves
    it below the record); elsewhere (a file, CI) a log line every `every` steps:

        epoch 1.25/3  step 250/600  loss 0.7312  lr 4.1e-05  212.3 examples/s  ETA 0:01:39
    """

    def __init__(self, total_steps: int, steps_per_epoch: float, every: int,
                 examples_per_step: int | None = None, initial_step: int = 0,
                 stream=None):
        super().__init__(initial_step)
        self.total_steps, self.steps_per_epoch = total_steps, max(steps_per_epoch, 1e-9)
        self.every, self.examples_per_step = max(1, every), examples_per_step
        self.stream = stream if stream is not None else sys.stderr
        self.bar = _is_terminal(self.stream)

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._first = self.initial_step
        self._last_line = self.initial_step
        self._steady = None  # (step, time) at the end of the first execution

    def on_train_batch_end(self, batch, logs=None):
        _, step = self._advance(batch)
        if self._steady is None:
            # The first execution includes tracing and compiling; the rate (and so the
            # ETA) is measured from its end once there is a later step to measure.
            self._steady = (step, time.perf_counter())
        whole_epoch = int(step / self.steps_per_epoch) > int(
            (step - 1) / self.steps_per_epoch)
        if not self.bar and step - self._last_line < self.every and not (
                step == self.total_steps or whole_epoch):
            return
        self._last_line = step
        text = self._text(step, logs)
        if self.bar:
            _BarLine.draw(self.stream, text, done=whole_epoch or step == self.total_steps)
        else:
            logger.info("%s", text)

    def on_train_end(self, logs=None):
        if self.bar:
            _BarLine.finish(self.stream)

    def _text(self, step: int, logs) -> str:
        now = time.perf_counter()
        first_step, first_end = self._steady or (self._first, self._start)
        # No rate before a step after the first execution (which traces and compiles):
        # a rate that counts compiling gave "1.0 examples/s ETA 0:05:30" for a 15 s run.
        steady = step > first_step and now > first_end
        rate = (step - first_step) / (now - first_end) if steady else None
        eta = (self.total_steps - step) / rate if rate else None
        lr = self.model.optimizer.learning_rate
        epochs = self.total_steps / self.steps_per_epoch
        # Whole batches only (as BERT's scripts): 15 examples in batches of 4 for one epoch
        # train 3 steps, 0.75 of an epoch, shown as 0.75, not 0.9333 beside 0.93.
        total = f"{epochs:.0f}" if float(epochs).is_integer() else f"{epochs:.2f}"
        parts = [f"epoch {step / self.steps_per_epoch:.2f}/{total}"]
        if self.bar:
            filled = int(round(20 * ((step / self.steps_per_epoch) % 1 or 1.0)))
            parts.append("[" + "=" * filled + " " * (20 - filled) + "]")
        parts.append(f"step {step}/{self.total_steps}")
        if logs and "loss" in logs:
            parts.append(f"loss {float(logs['loss']):.4f}")
        parts.append(f"lr {float(keras.ops.convert_to_numpy(lr)):.3g}")
        if self.examples_per_step:
            parts.append("-- examples/s" if rate is None
                         else f"{rate * self.examples_per_step:.1f} examples/s")
        parts.append("ETA --" if eta is None else f"ETA {_clock(eta)}")
        return "  ".join(parts)


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


class _BarLine(logging.Filter):
    """The bar on screen: redrawn with a carriage return; a log record emitted while it
    is on screen first ends its line, so records and the bar never overwrite each other."""

    on_screen = None  # the stream the unfinished bar line is on

    @classmethod
    def draw(cls, stream, text: str, done: bool) -> None:
        stream.write("\r" + text + "\x1b[K" + ("\n" if done else ""))
        stream.flush()
        cls.on_screen = None if done else stream
        if not done:
            cls.install()

    @classmethod
    def finish(cls, stream) -> None:
        if cls.on_screen is stream:
            stream.write("\n")
            stream.flush()
            cls.on_screen = None

    @classmethod
    def install(cls) -> None:
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, cls) for f in handler.filters):
                handler.addFilter(cls())

    def filter(self, record) -> bool:
        if _BarLine.on_screen is not None:
            _BarLine.finish(_BarLine.on_screen)
        return True


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class _CheckpointEveryLoop(keras.callbacks.Callback):
    """Saves model, optimizer and the consumed-batch counter after every loop."""

    def __init__(self, manager: tf.train.CheckpointManager, step: tf.Variable, steps_per_loop,
                 total_steps: int | None = None):
        super().__init__()
        self.manager, self.step, self.steps_per_loop = manager, step, steps_per_loop
        self.total_steps = total_steps if total_steps is not None else float("inf")

    def on_epoch_end(self, epoch, logs=None):
        self.step.assign(min((epoch + 1) * self.steps_per_loop, self.total_steps))
        path = self.manager.save(checkpoint_number=int(self.step.numpy()))
        logger.log(logging.DEBUG if _BarLine.on_screen else logging.INFO,
                   "saved checkpoint %s", path)


def whole_loops(total_steps: int, steps_per_loop: int, multiple: int = 1) -> tuple[int, int]:
    """(total_steps, steps_per_loop): total_steps rounded up to whole executions of
    `multiple` steps (the model's steps_per_execution: Keras runs whole executions
    only), steps_per_loop at most that. The last loop may be shorter: the steps asked
    for are the steps run."""
    if steps_per_loop % multiple:
        raise ValueError(f"steps_per_loop={steps_per_loop} is not a multiple of "
                         f"steps_per_execution={multiple}")
    rounded = math.ceil(total_steps / multiple) * multiple
    if rounded != total_steps:
        logger.info("total_steps %d rounded up to %d, a whole number of %d-step executions",
                    total_steps, rounded, multiple)
    return rounded, max(multiple, min(steps_per_loop, rounded))


def train_steps(args, examples: float, batch: int) -> int:
    """The steps a task command trains: --max_steps where more than 0, else
    ceil(--num_train_epochs x examples / batch), at least 1."""
    max_steps = getattr(args, "max_steps", -1) or -1
    if max_steps > 0:
        return int(max_steps)
    return max(1, math.ceil(args.num_train_epochs * examples / batch - 1e-9))


class _StopAt(keras.callbacks.Callback):
    """Ends training after `total_steps` (the last loop shorter than the others)."""

    def __init__(self, total_steps: int, steps_per_loop: int):
        super().__init__()
        self.total_steps, self.steps_per_loop = total_steps, steps_per_loop
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self._epoch * self.steps_per_loop + batch + 1 >= self.total_steps:
            self.model.stop_training = True


def fit(model: keras.Model, train_data: tf.data.Dataset, total_steps: int,
        steps_per_loop: int = 100, checkpoint_dir: str | None = None, keep_checkpoints: int = 3,
        validation_data=None, tensorboard_dir: str | None = None,
        examples_per_step: int | None = None, tokens_per_step: float | None = None,
        callbacks=(), verbose: int | str = "auto", steps_per_epoch: float | None = None,
        evaluation=None) -> keras.callbacks.History | None:
    """Trains a compiled model for `total_steps` batches of an endless dataset.

    Checkpoints (model, optimizer slots and step) are written with
    `tf.train.CheckpointManager` after every `steps_per_loop` steps, keeping the last
    `keep_checkpoints`. TensorFlow writes each checkpoint under temporary names and
    renames it, then rewrites the `checkpoint` index atomically, so a crash never leaves
    a half-written checkpoint in the index. If `checkpoint_dir` holds a checkpoint,
    training resumes after its step: the first `step` batches of `train_data` are
    skipped, so a deterministic pipeline (seeded shuffle) yields exactly the batches
    an uninterrupted run would have seen.

    Args:
        model: a compiled Keras model.
        train_data: an endless (`repeat()`ed) dataset of (inputs, labels) batches.
        total_steps: batches to train on, in all (micro-batches with accumulation);
            rounded up to whole executions (steps_per_execution); the last loop is
            shorter where they are not a whole number of loops.
        steps_per_loop: steps between checkpoints and validation runs.
        examples_per_step, tokens_per_step: for the throughput log (kbert's task
            commands count real tokens, padding left out, as an average per batch).
        steps_per_epoch: steps in one pass over the training data; given, progress is
            logged in epochs (`Progress`, about ten lines an epoch) instead of Keras'
            per-loop bar, whose "Epoch n/m" counts checkpoint loops.
        evaluation: a `kbert.training.evaluation.BestModel`, run at the end of every
            loop before its checkpoint (dev metrics, best weights, early stopping); a
            run it stopped early is complete.

    Returns:
        The Keras History of this run, or None when the run was already complete.
    """
    total_steps, steps_per_loop = whole_loops(total_steps, steps_per_loop,
                                              getattr(model, "steps_per_execution", 1) or 1)
    strategy = model.distribute_strategy
    multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    with strategy.scope():
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="consumed_batches")
        if checkpoint_dir and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
    callbacks = list(callbacks) + ([evaluation] if evaluation is not None else [])
    cleanup = None
    if checkpoint_dir:
        # Dropout's random streams (Keras SeedGenerator states) are not tracked by the
        # model object; saving them makes a resumed run draw the same masks.
        seeds = {f"seed_{i}": v.value for i, v in enumerate(
            v for v in model.variables if v.path.endswith("seed_generator_state"))}
        checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, step=step,
                                         seed_states=seeds)
        latest = tf.train.latest_checkpoint(checkpoint_dir)
        if latest:
            checkpoint.restore(latest).assert_existing_objects_matched()
            logger.info("resumed from %s at step %d", latest, int(step.numpy()))
        write_dir = checkpoint_dir
        if multi_worker and not _is_chief(strategy):
            # Every worker takes part in saving; only the chief's copy is kept.
            write_dir = cleanup = os.path.join(
                checkpoint_dir, f".worker_{strategy.cluster_resolver.task_id}")
        manager = tf.train.CheckpointManager(checkpoint, write_dir, max_to_keep=keep_checkpoints)
        callbacks.append(_CheckpointEveryLoop(manager, step, steps_per_loop, total_steps))
    done = int(step.numpy())
    if evaluation is not None and evaluation.stopped:
        logger.info("training already complete (stopped early at step %d)",
                    evaluation.state["stopped_at"])
        return None
    if done >= total_steps:
        logger.info("training already complete (%d of %d steps)", done, total_steps)
        return None
    if done % steps_per_loop:
        raise ValueError(f"checkpoint at step {done} is not at a loop boundary of "
                         f"steps_per_loop={steps_per_loop}; resume with the original setting")
    if tensorboard_dir:
        callbacks.append(keras.callbacks.TensorBoard(tensorboard_dir, update_freq=steps_per_loop))
    if examples_per_step:
        callbacks.append(Throughput(examples_per_step, tokens_per_step,
                                    every=min(steps_per_loop, 100), initial_step=done))
    if steps_per_epoch:
        callbacks.append(Progress(total_steps, steps_per_epoch,
                                  every=math.ceil(steps_per_epoch / 10),
                                  examples_per_step=examples_per_step, initial_step=done))
        verbose = 0
    epochs = math.ceil(total_steps / steps_per_loop)
    if total_steps % steps_per_loop:
        callbacks.insert(0, _StopAt(total_steps, steps_per_loop))
    try:
        if multi_worker:
            return _fit_multi_worker(model, strategy, train_data.skip(done), epochs,
                                     steps_per_loop, done // steps_per_loop, callbacks)
        return model.fit(train_data.skip(done), epochs=epochs, steps_per_epoch=steps_per_loop,
                         initial_epoch=done // steps_per_loop, validation_data=validation_data,
                         callbacks=callbacks, verbose=verbose,
                         shuffle=False)  # the dataset is shuffled (and seeded) already
    finally:
        if cleanup:
            tf.io.gfile.rmtree(cleanup)


def prune_checkpoints(checkpoint_dir: str, keep: int = 1) -> None:
    """After a finished run: keeps the last `keep` checkpoints of `checkpoint_dir` (with
    1, a rerun of the same command sees a complete run and does not train again; with
    0, the folder is removed)."""
    if keep < 0:
        raise ValueError(f"keep={keep}: must be 0 or more")
    state = tf.train.get_checkpoint_state(checkpoint_dir)
    if state is None:
        return
    if keep == 0:
        tf.io.gfile.rmtree(checkpoint_dir)
        return
    paths = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
    kept, dropped = paths[-keep:], paths[:-keep]
    # The index is a CheckpointState text proto; rewritten atomically, kept ones only.
    from kbert.io import atomic_file

    with atomic_file(os.path.join(checkpoint_dir, "checkpoint")) as f:
        f.write(f"model_checkpoint_path: {json.dumps(os.path.basename(kept[-1]))}\n")
        for path in kept:
            f.write(f"all_model_checkpoint_paths: {json.dumps(os.path.basename(path))}\n")
    for prefix in dropped:
        for path in tf.io.gfile.glob(prefix + ".*"):
            tf.io.gfile.remove(path)


def _is_chief(strategy) -> bool:
    resolver = strategy.cluster_resolver
    if resolver.task_type in (None, "chief"):
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def _fit_multi_worker(model, strategy, data, epochs, steps_per_epoch, initial_epoch,
                      callbacks) -> keras.callbacks.History:
    """Keras' own `train_step`, run by `strategy.run`, one step per call.

    `model.fit` under MultiWorkerMirroredStrategy fails in Keras 3 when it averages
    the scalar logs across workers ("Invalid reduction dimension 0 for input with 0
    dimensions", tensorflow/tensorflow#72388). The step itself works: this loop runs it
    and reads the metrics in cross-replica context, where they are all-reduced.
    """
    iterator = iter(strategy.experimental_distribute_dataset(data))

    @tf.function
    def step_fn(it):
        strategy.run(model.train_step, args=(next(it),))

    history = keras.callbacks.History()
    callback_list = keras.callbacks.CallbackList(
        callbacks + [history], model=model, epochs=epochs, steps=steps_per_epoch)
    callback_list.on_train_begin()
    logs = {}
    for epoch in range(initial_epoch, epochs):
        model.reset_metrics()
        callback_list.on_epoch_begin(epoch)
        for batch in range(steps_per_epoch):
            callback_list.on_train_batch_begin(batch)
            step_fn(iterator)
            logs = {k: float(v) for k, v in model.get_metrics_result().items()}
            callback_list.on_train_batch_end(batch, logs)
            if model.stop_training:  # the shorter last loop (`_StopAt`)
                break
        callback_list.on_epoch_end(epoch, dict(logs))
    callback_list.on_train_end(logs)
    return history


def latest_step(checkpoint_dir: str) -> int | None:
    """The step of the newest complete checkpoint in `checkpoint_dir`, or None."""
    path = tf.train.latest_checkpoint(checkpoint_dir)
    if path is None:
        return None
    return int(os.path.basename(path).rsplit("-", 1)[1])
