"""ELMo's scalar mix: a learned, softmax-normalized weighting of layers, as bilm-tf's
`weight_layers` computes it."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kbert")
class ScalarMix(keras.layers.Layer):
    """`gamma * sum_k softmax(w)_k * layer_k` (Peters et al. 2018, eq. 1), with the
    options of bilm-tf's `weight_layers` and AllenNLP's dropout.

    Args:
        num_layers: the number of layers mixed.
        do_layer_norm: normalize each layer first with its mean and variance over all
            its real positions and features (one mean and one variance per layer, from
            the positions where `mask` is 1), epsilon 1e-12, as bilm-tf.
        l2_coef: an L2 penalty `l2_coef * sum(w^2)` on the mixing weights, added to the
            model's losses (bilm-tf's `regularization_op`; it used 0.001).
        use_top_only: no mixing: `gamma * layer_L`, the top layer.
        dropout: dropout on the mixed result (AllenNLP's `Elmo` applies 0.5).

    Call args:
        layers: list of float Tensors of one shape [B, T, D], e.g. ELMo's or a BERT's
            `hidden_states`.
        padding_mask: int/bool [B, T], 1 on real positions (for `do_layer_norm`; all
            real if None).

    Returns:
        A float Tensor [B, T, D].
    """

    def __init__(self, num_layers: int, do_layer_norm: bool = False,
                 l2_coef: float | None = None, use_top_only: bool = False,
                 dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.num_layers = int(num_layers)
        self.do_layer_norm = bool(do_layer_norm)
        self.l2_coef = None if l2_coef is None else float(l2_coef)
        self.use_top_only = bool(use_top_only)
        self.rate = float(dropout)
        self.dropout = keras.layers.Dropout(self.rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        regularizer = keras.regularizers.L2(self.l2_coef) if self.l2_coef else None
        self.scalars = self.add_weight(name="scalars", shape=(self.num_layers,),
                                       initializer="zeros", regularizer=regularizer)
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")
        self.built = True

    def _layer_norm(self, x, mask):
        x = ops.cast(x, "float32")
        if mask is None:
            mask = ops.ones(ops.shape(x)[:2], "float32")  # every position real
        m = ops.cast(mask, "float32")[:, :, None]
        count = ops.sum(m) * ops.cast(ops.shape(x)[-1], "float32")
        mean = ops.sum(x * m) / count
        variance = ops.sum(((x * m - mean) * m) ** 2) / count
        return (x - mean) / ops.sqrt(variance + 1e-12)

    def call(self, layers, padding_mask=None, training=None):
        if len(layers) != self.num_layers:
            raise ValueError(f"ScalarMix({self.num_layers}) got {len(layers)} layers")
        if self.use_top_only:
            mixed = ops.cast(layers[-1], self.compute_dtype)
        else:
            weights = ops.softmax(self.scalars)
            pieces = [self._layer_norm(x, padding_mask) if self.do_layer_norm else x
                      for x in layers]
            mixed = sum(weights[k] * ops.cast(x, self.compute_dtype)
                        for k, x in enumerate(pieces))
        return self.dropout(self.gamma * mixed, training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0])

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers,
                "do_layer_norm": self.do_layer_norm, "l2_coef": self.l2_coef,
                "use_top_only": self.use_top_only, "dropout": self.rate}
