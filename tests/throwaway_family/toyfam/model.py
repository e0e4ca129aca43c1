"""toyfam's encoder: token and position embeddings, `num_layers` Transformer blocks of
Keras' own layers, the first token's state as the sentence vector."""

import keras
from keras import ops

from kbert.models.base import Backbone, Pretrained
from kbert.models.interface import TransformerSizes
from kbert.models.toyfam.config import ToyConfig


@keras.saving.register_keras_serializable(package="toyfam")
class Positions(keras.layers.Layer):
    def __init__(self, length, width, **kwargs):
        super().__init__(**kwargs)
        self.length, self.width = length, width

    def build(self, input_shape):
        self.table = self.add_weight(name="table", shape=(self.length, self.width),
                                     initializer=keras.initializers.RandomNormal(stddev=0.02))

    def call(self, x):
        return x + self.table[None, :ops.shape(x)[1]]

    def get_config(self):
        return {**super().get_config(), "length": self.length, "width": self.width}


@keras.saving.register_keras_serializable(package="toyfam")
class ToyEncoder(Pretrained, Backbone, keras.Model, TransformerSizes):
    family = "toyfam"

    def __init__(self, config, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = ToyConfig.from_dict(config)
        c = config
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
        segment_ids = keras.Input((None,), dtype="int32", name="segment_ids")
        x = keras.layers.Embedding(c.vocab_size, c.hidden_size, name="tokens")(token_ids)
        x = x + keras.layers.Embedding(2, c.hidden_size, name="segments")(segment_ids)
        x = Positions(c.max_position_embeddings, c.hidden_size, name="positions")(x)
        hidden = [x]
        mask = ops.cast(padding_mask[:, None, :], "bool")
        for i in range(c.num_layers):
            a = keras.layers.MultiHeadAttention(c.num_heads, c.hidden_size // c.num_heads,
                                                name=f"attention_{i}")(x, x, attention_mask=mask)
            x = keras.layers.LayerNormalization(name=f"norm_a_{i}")(x + a)
            f = keras.layers.Dense(4 * c.hidden_size, activation="gelu", name=f"ffn_in_{i}")(x)
            f = keras.layers.Dense(c.hidden_size, name=f"ffn_out_{i}")(f)
            x = keras.layers.LayerNormalization(name=f"norm_f_{i}")(x + f)
            hidden.append(x)
        super().__init__({"token_ids": token_ids, "padding_mask": padding_mask,
                          "segment_ids": segment_ids},
                         {"sequence_output": x, "pooled_output": x[:, 0],
                          "hidden_states": hidden}, dtype=dtype, **kwargs)
        self.config = config
