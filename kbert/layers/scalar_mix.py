"""ELMo's scalar mix: a learned, softmax-normalized weighting of layers."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kbert")
class ScalarMix(keras.layers.Layer):
    """`gamma * sum_k softmax(w)_k * layer_k` (Peters et al. 2018, eq. 1).

    Call args:
        layers: list of float Tensors of one shape, e.g. a BERT's `hidden_states`.

    Returns:
        A float Tensor of that shape.
    """

    def __init__(self, num_layers: int, **kwargs):
        super().__init__(**kwargs)
        self.num_layers = int(num_layers)

    def build(self, input_shape):
        self.scalars = self.add_weight(name="scalars", shape=(self.num_layers,),
                                       initializer="zeros")
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")
        self.built = True

    def call(self, layers):
        if len(layers) != self.num_layers:
            raise ValueError(f"ScalarMix({self.num_layers}) got {len(layers)} layers")
        weights = ops.softmax(self.scalars)
        mixed = sum(weights[k] * ops.cast(x, self.compute_dtype) for k, x in enumerate(layers))
        return self.gamma * mixed

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0])

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers}
