"""Evaluation during training: the dev metric at every checkpoint loop, the best
weights kept, early stopping, the dev curves in TensorBoard; resumable.

`BestModel` is a Keras callback for `kbert.training.fit` (its `evaluation=`): at the
end of each loop (fit's checkpoint interval, which the task commands set to the
evaluation interval) it calls `evaluate(model) -> {metric: value}`, keeps the weights
of the best value of `metric` in `folder/weights.npz` (every variable as it is, LoRA
adapters included, which Keras' own weight files fold into the kernels) and the record
of every evaluation in `folder/state.json` (both written atomically), and stops training after
`patience` evaluations without improvement. A resumed run reads the record; a run that
stopped early stays stopped. `restore(model)` loads the best weights at the end."""

from __future__ import annotations

import json
import logging
import math
import os

import keras
import numpy as np
import tensorflow as tf

from kbert.io import atomic_file

logger = logging.getLogger(__name__)

STATE, WEIGHTS = "state.json", "weights.npz"


def _names(model) -> list[str]:
    """A key per variable, in order (paths alone may repeat)."""
    return [f"{i:05d}:{v.path}" for i, v in enumerate(model.weights)]


def eval_interval(strategy: str, eval_steps: int | None, steps_per_epoch: float,
                  multiple: int = 1) -> int:
    """Steps between evaluations: one epoch (`epoch`, rounded to whole steps) or
    `eval_steps`, rounded up to a whole number of `multiple` steps (steps per
    execution: Keras runs whole executions)."""
    if strategy == "epoch":
        every = max(1, round(steps_per_epoch))
    elif strategy == "steps":
        if not eval_steps or eval_steps < 1:
            raise ValueError("--eval_strategy steps needs --eval_steps of at least 1")
        every = eval_steps
    else:
        raise ValueError(f"--eval_strategy {strategy!r}: use epoch or steps")
    return math.ceil(every / multiple) * multiple


class BestModel(keras.callbacks.Callback):
    """See the module docstring. `greater_is_better`: whether a larger `metric` is
    better; `steps_per_loop`: fit's loop (the evaluation interval); `steps_per_epoch`:
    for the epoch each evaluation reports; `tensorboard_dir`: the dev metrics written
    under `validation/` at the training step, beside Keras' training curves; `resume`:
    False when training starts from step 0 (a record left there is removed)."""

    def __init__(self, evaluate, metric: str, folder: str, steps_per_loop: int,
                 greater_is_better: bool = True, patience: int = 0,
                 steps_per_epoch: float | None = None, tensorboard_dir: str | None = None,
                 resume: bool = True):
        super().__init__()
        self.evaluate, self.metric, self.folder = evaluate, metric, folder
        self.steps_per_loop, self.greater = steps_per_loop, greater_is_better
        self.patience, self.steps_per_epoch = patience, steps_per_epoch
        self.tensorboard_dir = tensorboard_dir
        self.state = {"metric": metric, "greater_is_better": greater_is_better,
                      "evaluations": [], "best": None, "stopped_at": None}
        path = os.path.join(folder, STATE)
        if not resume:  # a run starting from step 0: an earlier run's record is void
            for name in (STATE, WEIGHTS):
                if os.path.exists(os.path.join(folder, name)):
                    os.remove(os.path.join(folder, name))
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            if saved.get("metric") != metric:
                raise ValueError(f"{path}: records {saved.get('metric')!r}, not {metric!r}; "
                                 "start over with --overwrite_output_dir")
            self.state = saved

    @property
    def stopped(self) -> bool:
        return self.state["stopped_at"] is not None

    @property
    def best(self) -> dict | None:
        """The best evaluation: {"step", "epoch", "metrics"}, or None."""
        return self.state["best"]

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * self.steps_per_loop
        metrics = {k: float(v) for k, v in self.evaluate(self.model).items()}
        if self.metric not in metrics:
            raise ValueError(f"--metric_for_best_model {self.metric}: the evaluation gives "
                             f"{', '.join(metrics)}")
        record = {"step": step, "metrics": metrics}
        if self.steps_per_epoch:
            record["epoch"] = round(step / self.steps_per_epoch, 4)
        self.state["evaluations"] = [e for e in self.state["evaluations"]
                                     if e["step"] < step] + [record]
        value, best = metrics[self.metric], self.state["best"]
        improved = best is None or (value > best["metrics"][self.metric] if self.greater
                                    else value < best["metrics"][self.metric])
        if improved:
            self._save_weights()
            self.state["best"] = record
        since = sum(1 for e in self.state["evaluations"]
                    if e["step"] > self.state["best"]["step"])
        logger.info("step %d: dev %s%s", step, ", ".join(f"{k} {v:.4f}" for k, v in
                                                          metrics.items()),
                    " (best so far)" if improved else
                    f" (best {self.state['best']['metrics'][self.metric]:.4f} at step "
                    f"{self.state['best']['step']}; {since} without improvement)")
        if self.patience and since >= self.patience:
            self.state["stopped_at"] = step
            self.model.stop_training = True
            logger.info("early stopping at step %d: %s has not improved for %d evaluations",
                        step, self.metric, since)
        self._write_state()
        self._summaries(step, metrics)

    def restore(self, model) -> dict | None:
        """Loads the best weights into `model`; returns the best evaluation (None when
        there was none)."""
        if self.state["best"] is None:
            return None
        path = os.path.join(self.folder, WEIGHTS)
        with np.load(path) as saved:
            names = list(saved.files)
            if names != _names(model):
                raise ValueError(f"{path}: holds {len(names)} variables, not the model's "
                                 f"{len(model.weights)} (another model's?)")
            for variable, name in zip(model.weights, names):
                variable.assign(saved[name])
        best = self.state["best"]
        logger.info("restored the best weights: step %d%s, %s %.4f", best["step"],
                    f" (epoch {best['epoch']:g})" if "epoch" in best else "", self.metric,
                    best["metrics"][self.metric])
        return best

    def _save_weights(self):
        os.makedirs(self.folder, exist_ok=True)
        path = os.path.join(self.folder, WEIGHTS)
        tmp = os.path.join(self.folder, ".tmp." + WEIGHTS)
        with open(tmp, "wb") as f:
            np.savez(f, **dict(zip(_names(self.model),
                                   (v.numpy() for v in self.model.weights))))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def _write_state(self):
        os.makedirs(self.folder, exist_ok=True)
        with atomic_file(os.path.join(self.folder, STATE)) as f:
            json.dump(self.state, f, indent=2)

    def _summaries(self, step, metrics):
        if not self.tensorboard_dir:
            return
        if getattr(self, "_writer", None) is None:  # one event file per run
            self._writer = tf.summary.create_file_writer(
                os.path.join(self.tensorboard_dir, "validation"))
        with self._writer.as_default():
            for k, v in metrics.items():
                tf.summary.scalar(f"dev_{k}", v, step=step)
        self._writer.flush()
