"""Resolving `--strategy` into a tf.distribute.Strategy, and TPU-safe input pipelines."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import tensorflow as tf

logger = logging.getLogger(__name__)

from kbert.training.flags import STRATEGIES  # noqa: E402 (the flag choices)


def resolve_strategy(name: str = "auto", tpu: str | None = None) -> tf.distribute.Strategy:
    """Returns the strategy a `--strategy` flag names.

    Args:
        name: `auto` (TPU if `tpu` is given, all local GPUs if there are several, else
            the default strategy), `cpu`, `gpu` (one GPU), `mirrored` (all local GPUs, or
            all logical CPUs when there is no GPU), `multi_worker`
            (`MultiWorkerMirroredStrategy`; the cluster comes from `TF_CONFIG`), `tpu`.
        tpu: TPU address for `TPUClusterResolver` (`grpc://...`, a TPU name, or "local").

    Call it at program start: `multi_worker` and `tpu` configure the TensorFlow
    runtime, which must happen before any other TensorFlow op runs. A process gets
    one strategy per name (and TPU address): a second call returns the first one's
    strategy, because a second MirroredStrategy in the same process restarts the
    collective keys, and training another model with it fails with "Shape mismatch in
    the collective instance 100" (tensorflow/tensorflow#62790): a notebook or a loop
    over models would hit it.

    Raises:
        ValueError: an unknown name, or a device the strategy needs is absent.
    """
    if name not in STRATEGIES:
        raise ValueError(f"--strategy={name!r}: choose one of {', '.join(STRATEGIES)}")
    if name == "auto":  # a concrete name, so that "auto" and "mirrored" share one
        if tpu:
            name = "tpu"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            return tf.distribute.get_strategy()
    key = (name, tpu if name == "tpu" else None)
    if key not in _RESOLVED:
        _RESOLVED[key] = _new_strategy(name, tpu)
    return _RESOLVED[key]


_RESOLVED: dict = {}


def _new_strategy(name: str, tpu: str | None) -> tf.distribute.Strategy:
    # multi_worker and tpu come first: they configure the runtime, which fails once
    # anything (even listing devices) has initialized it.
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("--strategy=multi_worker needs TF_CONFIG (cluster and task) "
                             "in the environment")
        try:
            cfg = json.loads(os.environ["TF_CONFIG"])
        except json.JSONDecodeError as e:
            raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
        if "cluster" not in cfg or "task" not in cfg:
            raise ValueError("TF_CONFIG needs 'cluster' and 'task' entries")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        return _tpu_strategy(tpu)
    gpus = tf.config.list_logical_devices("GPU")
    if name == "cpu":
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    if name == "gpu":
        if not gpus:
            raise ValueError("--strategy=gpu: TensorFlow sees no GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name)
    devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices)


def _tpu_strategy(tpu: str | None) -> tf.distribute.TPUStrategy:
    # TPU: the resolver finds the TPU system, which is initialized once per process.
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


ENCODER_INPUTS = ("token_ids", "segment_ids", "padding_mask", "char_ids")


def trim_padding(features: dict, multiple: int = 32) -> dict:
    """Cuts the padding that every row of a batch has at its end.

    The encoder inputs (`token_ids`, `segment_ids`, `padding_mask`, `[batch, seq]`) keep
    their first L positions, L being the last real token of any row rounded up to a
    multiple of `multiple` (and at most `seq`): a batch of short sentences padded to
    128 runs at 32 or 64. Other features pass unchanged. Nothing real is cut, wherever
    the padding sits, and for a sentence-level output the result is the same function:
    padded positions are masked out of attention and are never read by [CLS]; learned
    positions are absolute, so the kept ones keep their embeddings. Batches come in up
    to seq / multiple shapes, so this is for CPUs and GPUs; TPUs want the one shape
    (and see `finalize_dataset` for several workers).
    """
    if multiple < 1:
        raise ValueError(f"trim_padding: multiple={multiple} must be at least 1")
    mask = features["padding_mask"]
    seq = tf.shape(mask)[1]
    positions = tf.range(1, seq + 1, dtype=tf.int32)
    last = tf.reduce_max(tf.cast(tf.not_equal(mask, 0), tf.int32) * positions[tf.newaxis])
    length = (last + multiple - 1) // multiple * multiple
    length = tf.clip_by_value(length, tf.minimum(seq, multiple), seq)
    return {k: v[:, :length] if k in ENCODER_INPUTS else v for k, v in features.items()}


def real_tokens_per_batch(padding_mask, batch_size: int) -> float:
    """The mean number of real (unpadded) tokens in a batch of `batch_size` rows of
    `padding_mask` [examples, seq]: the tokens/s the throughput log reports."""
    return float(np.mean(np.sum(np.asarray(padding_mask) != 0, axis=1))) * batch_size


def _trim_element(multiple: int, labels: bool):
    def trim(*element):
        features = trim_padding(element[0], multiple)
        if len(element) == 1:
            return features
        rest = element[1:]
        if labels:
            length = tf.shape(features["padding_mask"])[1]
            rest = tf.nest.map_structure(lambda t: t[:, :length], rest)
        return (features,) + rest
    return trim


def finalize_dataset(ds: tf.data.Dataset, global_batch_size: int, training: bool,
                     shuffle_buffer: int = 10_000, seed: int | None = None,
                     repeat: bool | None = None, trim: int = 0,
                     trim_labels: bool = False) -> tf.data.Dataset:
    """Batches a dataset of fixed-shape examples for any strategy, TPUs included.

    With a `seed`, the batch sequence is the same for every iterator and process, so
    a resumed run skips exactly the batches it has seen.

    Training batches drop the remainder so every step has the same static shape
    (TPUs and XLA need it); evaluation keeps the last, smaller batch. The auto-shard
    policy is DATA: each worker reads everything and keeps its share of batches,
    which is correct for in-memory and single-file sources alike (with many input
    files, FILE sharding is cheaper: set it on the options yourself).

    With `trim` > 0, each batch's trailing padding is cut to a multiple of `trim`
    tokens (`trim_padding`; elements are `features` or `(features, labels, ...)`):
    fewer shapes than steps, but not one, so leave it 0 on TPUs. The replicas of one
    worker share each cut batch; several workers cut their own batches to different
    lengths, which embedding-gradient all-gathers do not take: leave it 0 there too.
    With `trim_labels`,
    every label tensor is per token (`[batch, seq, ...]`) and is cut alike; its
    padded positions must be ones the loss ignores.
    """
    repeat = training if repeat is None else repeat
    if training and seed is not None:
        # One seeded, streaming shuffle over the repeated data: every iterator (a
        # resumed process, each replica's) sees the same sequence of batches, and
        # epochs still come in different orders.
        ds = ds.repeat() if repeat else ds
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=False)
    elif training:
        ds = ds.shuffle(shuffle_buffer, reshuffle_each_iteration=True)
        ds = ds.repeat() if repeat else ds
    elif repeat:
        ds = ds.repeat()
    ds = ds.batch(global_batch_size, drop_remainder=training)
    if trim:
        ds = ds.map(_trim_element(trim, trim_labels), num_parallel_calls=tf.data.AUTOTUNE,
                    deterministic=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = seed is not None
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)
