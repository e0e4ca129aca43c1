"""ELMo's bidirectional language model (Peters et al., 2018) as a Keras 3 model,
computing what bilm-tf's `BidirectionalLanguageModel` computes.

Per word: character embeddings (id 0, "no character", embeds to zeros), convolutions
of each width with max-pooling over the characters and the activation, highway layers
(sigmoid carry gate, ReLU transform), and a projection to `projection_dim` when the
filters number more. Then a forward LM and a backward LM (which reads each sequence
reversed within its own length), each `num_layers` LSTMs as TF1's `LSTMCell` computes
them (gates i, j, f, o; forget bias 1; the cell clipped to `cell_clip`; the output
projected to `projection_dim` and clipped to `proj_clip`), with residual connections
above the first layer when `use_skip_connections`. The sentence-begin and -end words
are added around each sequence, as bilm-tf's `Batcher` does, and left out of the
outputs.

Shape legend: B batch, W words, C characters per word, F filters, P projection_dim,
D lstm_dim.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from kbert.models.base import Pretrained, Quantizable
from kbert.models.elmo.config import ELMoConfig
from kbert.models.interface import EncoderModel
from kbert.tokenizers.elmo import BOS_CHAR, BOS_WORD, EOS_CHAR, EOS_WORD, mark_word


class CharacterEncoder(keras.layers.Layer):
    """Character ids [B, W, C] -> token embeddings [B, W, P] (bilm-tf's char CNN)."""

    def __init__(self, config: ELMoConfig, **kwargs):
        super().__init__(**kwargs)
        self.config = config

    def build(self, input_shape=None):
        c = self.config
        uniform = keras.initializers.RandomUniform(-1.0, 1.0)
        # The file's rows (ids 1..n_characters - 1); row 0 is the zero row added in call.
        self.char_embed = self.add_weight(name="char_embed", shape=(
            c.num_characters - 1, c.char_embedding_dim), initializer=uniform)
        self.conv_kernels, self.conv_biases = [], []
        for i, (width, count) in enumerate(c.filters):
            init = (keras.initializers.RandomUniform(-0.05, 0.05) if c.activation == "relu"
                    else keras.initializers.RandomNormal(
                        0.0, float(np.sqrt(1.0 / (width * c.char_embedding_dim)))))
            self.conv_kernels.append(self.add_weight(
                name=f"W_cnn_{i}", shape=(1, width, c.char_embedding_dim, count),
                initializer=init))
            self.conv_biases.append(self.add_weight(name=f"b_cnn_{i}", shape=(count,),
                                                    initializer="zeros"))
        f = c.num_filters
        gauss = keras.initializers.RandomNormal(0.0, float(np.sqrt(1.0 / f)))
        self.highways = []
        for k in range(c.num_highway):
            self.highways.append((
                self.add_weight(name=f"W_carry_{k}", shape=(f, f), initializer=gauss),
                self.add_weight(name=f"b_carry_{k}", shape=(f,),
                                initializer=keras.initializers.Constant(-2.0)),
                self.add_weight(name=f"W_transform_{k}", shape=(f, f), initializer=gauss),
                self.add_weight(name=f"b_transform_{k}", shape=(f,), initializer="zeros")))
        self.projection = None
        if f != c.projection_dim:
            self.projection = (
                self.add_weight(name="W_proj", shape=(f, c.projection_dim),
                                initializer=gauss),
                self.add_weight(name="b_proj", shape=(c.projection_dim,),
                                initializer="zeros"))
        self.built = True

    def call(self, char_ids):
        c = self.config
        table = tf.concat([tf.zeros([1, c.char_embedding_dim], self.char_embed.dtype),
                           self.char_embed], axis=0)
        shape = tf.shape(char_ids)  # (B, W, C)
        flat = tf.reshape(char_ids, [-1, c.max_characters_per_token])  # (B*W, C)
        x = tf.gather(table, flat)  # (B*W, C, E)
        activation = tf.nn.relu if c.activation == "relu" else tf.nn.tanh
        pooled = []
        for kernel, bias in zip(self.conv_kernels, self.conv_biases):
            conv = tf.nn.conv1d(x, kernel[0], stride=1, padding="VALID") + bias
            pooled.append(activation(tf.reduce_max(conv, axis=1)))  # (B*W, n)
        h = tf.concat(pooled, axis=-1)  # (B*W, F)
        for w_carry, b_carry, w_transform, b_transform in self.highways:
            carry = tf.sigmoid(tf.matmul(h, w_carry) + b_carry)
            transform = tf.nn.relu(tf.matmul(h, w_transform) + b_transform)
            h = carry * transform + (1.0 - carry) * h
        if self.projection is not None:
            h = tf.matmul(h, self.projection[0]) + self.projection[1]
        return tf.reshape(h, tf.concat([shape[:2], [c.projection_dim]], 0))


class LSTMLayer(keras.layers.Layer):
    """TF1's `LSTMCell(lstm_dim, num_proj, cell_clip, proj_clip)`, forget bias 1, run over
    time as `dynamic_rnn` with sequence lengths (outputs 0 and states kept past a row's
    length). Weights as bilm-tf stores them: `W_0` [in + P, 4D] (input and previous
    output stacked), `B` [4D], `W_P_0` [D, P] (when P < D)."""

    def __init__(self, config: ELMoConfig, input_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.input_dim = input_dim
        self.output_dim = min(config.projection_dim, config.lstm_dim)

    def build(self, input_shape=None):
        c = self.config
        glorot = keras.initializers.GlorotUniform()
        self.kernel = self.add_weight(name="W_0", shape=(
            self.input_dim + self.output_dim, 4 * c.lstm_dim), initializer=glorot)
        self.bias = self.add_weight(name="B", shape=(4 * c.lstm_dim,), initializer="zeros")
        self.projection = (self.add_weight(name="W_P_0", shape=(c.lstm_dim, self.output_dim),
                                           initializer=glorot)
                           if c.projection_dim < c.lstm_dim else None)
        self.built = True

    def step(self, xw, c_prev, m_prev):
        """One time step; `xw` is the input's share of the gates (x @ W_0[:in] + B)."""
        cfg = self.config
        z = xw + tf.matmul(m_prev, self.kernel[self.input_dim:])
        i, j, f, o = tf.split(z, 4, axis=1)
        c = tf.sigmoid(f + 1.0) * c_prev + tf.sigmoid(i) * tf.tanh(j)
        if cfg.cell_clip:
            c = tf.clip_by_value(c, -cfg.cell_clip, cfg.cell_clip)
        m = tf.sigmoid(o) * tf.tanh(c)
        if self.projection is not None:
            m = tf.matmul(m, self.projection)
        if cfg.proj_clip:
            m = tf.clip_by_value(m, -cfg.proj_clip, cfg.proj_clip)
        return c, m

    def call(self, x, mask, initial_state):
        """x [B, T, in], mask bool [B, T], initial_state (c [B, D], m [B, P]) ->
        (outputs [B, T, P], (c, m) at each row's last step). The inputs' share of the
        gates is one product over all steps; each step then multiplies only the previous
        output (the same sum as TF1's product of the stacked [x, m], in another order)."""
        xs = tf.transpose(x, [1, 0, 2])  # (T, B, in)
        ms = tf.transpose(mask, [1, 0])  # (T, B)
        xw = tf.tensordot(xs, self.kernel[:self.input_dim], axes=1) + self.bias  # (T, B, 4D)

        def scan_step(carry, inputs):
            c_prev, m_prev, _ = carry
            xw_t, mask_t = inputs
            c, m = self.step(xw_t, c_prev, m_prev)
            keep = mask_t[:, None]
            return (tf.where(keep, c, c_prev), tf.where(keep, m, m_prev),
                    tf.where(keep, m, tf.zeros_like(m)))

        c0, m0 = initial_state
        # T >= 2 always: every sequence has its begin and end words.
        c_all, m_all, out = tf.scan(scan_step, (xw, ms),
                                    initializer=(c0, m0, tf.zeros_like(m0)))
        return tf.transpose(out, [1, 0, 2]), (c_all[-1], m_all[-1])


@keras.saving.register_keras_serializable(package="kbert")
class ELMo(Quantizable, keras.Model, EncoderModel, Pretrained):
    """ELMo's biLM (see the module docstring).

    Inputs: the dict of `ELMoCharTokenizer`, `char_ids` int [B, W, C] and
    `padding_mask` [B, W]. Outputs: `hidden_states`, num_layers + 1 Tensors
    [B, W, 2P] (the token layer twice, then each layer's forward and backward states;
    zero on padding), and `padding_mask`.

    Args:
        config: an `ELMoConfig`.
        stateful: carry each LSTM's final states into the next call, for the first B
            rows of a store of `max_batch_size` rows (bilm-tf's and AllenNLP's
            behaviour); `reset_states()` zeroes them.
        max_batch_size: rows of the state store.
        keep_boundaries: also return the sentence-begin and -end positions
            (W + 2 positions, the boundaries of each row at 0 and its length + 1).
        token_vocab_size, bos_token_id, eos_token_id: bilm-tf's token mode (made by
            `with_token_table`): the input is `token_ids` [B, W] (a word vocabulary's
            ids + 1, 0 for padding) and the token layer is a fixed table of the
            character CNN's vectors of the vocabulary's words, row 0 zeros; the
            sentence marks are the given ids.
    """
    quantize_refusal = ("its biLSTM layers have no Keras quantization (Keras' LSTM "
                        "implements none), so most of its weights would stay float32")

    def __init__(self, config: ELMoConfig | dict, stateful: bool = False,
                 max_batch_size: int = 128, keep_boundaries: bool = False,
                 token_vocab_size: int | None = None, bos_token_id: int | None = None,
                 eos_token_id: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = ELMoConfig.from_dict(config)
        self.config = config
        self.stateful = bool(stateful)
        self.max_batch_size = int(max_batch_size)
        self.keep_boundaries = bool(keep_boundaries)
        self.char_encoder = CharacterEncoder(config, name="char_encoder")
        out = min(config.projection_dim, config.lstm_dim)
        self.lstms = {
            direction: [LSTMLayer(config, config.projection_dim if i == 0 else out,
                                  name=f"RNN_{d}_Cell{i}")
                        for i in range(config.num_layers)]
            for d, direction in enumerate(("forward", "backward"))}
        for direction, layers in self.lstms.items():  # tracked as attributes
            setattr(self, f"_{direction}_layers", layers)
        marks = np.array([mark_word(BOS_CHAR, config.max_characters_per_token),
                          mark_word(EOS_CHAR, config.max_characters_per_token)]) + 1
        self._marks = tf.constant(marks, tf.int32)
        self._dropout = keras.layers.Dropout(config.dropout, name="lstm_input_dropout")
        self.token_vocab_size = token_vocab_size
        self.token_marks = None
        self.token_table = None
        if token_vocab_size is not None:
            if bos_token_id is None or eos_token_id is None:
                raise ValueError("token mode needs bos_token_id and eos_token_id")
            self.token_marks = (int(bos_token_id), int(eos_token_id))
            self.token_table = keras.layers.Embedding(
                token_vocab_size + 1, config.projection_dim, trainable=False,
                embeddings_initializer="zeros", name="token_embedding")
        self._states = None
        if self.stateful:
            self._state_store()

    # ------------------------------------------------------------ model interface
    family = "elmo"

    @property
    def hidden_size(self) -> int:
        return 2 * min(self.config.projection_dim, self.config.lstm_dim)

    @property
    def num_layers(self) -> int:
        return self.config.num_layers

    def features(self, inputs, training=None) -> dict:
        """The interface's outputs: `sequence_output` is the top biLSTM layer;
        `pooled_output` the mean of the top layer over real words (TF-Hub ELMo's
        `default`, which averages the mixed layers; here without a mix)."""
        from keras import ops

        out = self(inputs, training=training)
        mask = ops.expand_dims(ops.cast(out["padding_mask"], "float32"), -1)
        top = out["hidden_states"][-1]
        pooled = ops.sum(top * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)
        return {"sequence_output": top, "hidden_states": out["hidden_states"],
                "padding_mask": out["padding_mask"], "pooled_output": pooled}

    def keras_inputs(self) -> dict:
        if self.token_table is not None:
            return {"token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
                    "padding_mask": keras.Input((None,), dtype="int32", name="padding_mask")}
        return {"char_ids": keras.Input((None, self.config.max_characters_per_token),
                                        dtype="int32", name="char_ids"),
                "padding_mask": keras.Input((None,), dtype="int32", name="padding_mask")}

    # ------------------------------------------------------------ states
    def _state_store(self):
        if self._states is None:
            out = min(self.config.projection_dim, self.config.lstm_dim)
            self._states = {
                direction: [(self.add_weight(name=f"{direction}_c_{i}",
                                             shape=(self.max_batch_size, self.config.lstm_dim),
                                             initializer="zeros", trainable=False),
                             self.add_weight(name=f"{direction}_m_{i}",
                                             shape=(self.max_batch_size, out),
                                             initializer="zeros", trainable=False))
                             for i in range(self.config.num_layers)]
                for direction in ("forward", "backward")}
        return self._states

    def reset_states(self) -> None:
        """Zeroes the stored LSTM states (stateful models)."""
        if self._states is not None:
            for pairs in self._states.values():
                for c, m in pairs:
                    c.assign(tf.zeros_like(c))
                    m.assign(tf.zeros_like(m))

    # ------------------------------------------------------------ forward pass
    def _with_boundaries(self, char_ids, lengths):
        """[B, W, C] words -> [B, W + 2, C] with <S> first and </S> after each row."""
        b = tf.shape(char_ids)[0]
        bos = tf.tile(self._marks[None, :1], [b, 1, 1])
        padded = tf.concat([bos, char_ids, tf.zeros_like(bos)], axis=1)  # (B, W+2, C)
        positions = tf.range(tf.shape(padded)[1])[None, :]
        is_eos = tf.equal(positions, (lengths + 1)[:, None])[:, :, None]
        return tf.where(is_eos, self._marks[1][None, None, :], padded)

    def _with_boundary_ids(self, token_ids, lengths):
        """Token mode: [B, W] ids -> [B, W + 2] with the <S> and </S> ids."""
        bos, eos = self.token_marks
        b = tf.shape(token_ids)[0]
        padded = tf.concat([tf.fill([b, 1], bos), token_ids, tf.zeros([b, 1], tf.int32)], 1)
        positions = tf.range(tf.shape(padded)[1])[None, :]
        return tf.where(tf.equal(positions, (lengths + 1)[:, None]), eos, padded)

    def run_lms(self, inputs, training=None) -> dict:
        """Both LMs over the sequences with their boundary words (T = W + 2 positions):
        `tokens` [B, T, P], `forward` and `backward` (lists of each layer's states
        [B, T, P], in reading order undone: position t is word t for both), `mask` bool
        [B, T] (the boundaries and words of each row), `lengths` int [B] (words).
        With `training`, dropout at `config.dropout` on every LSTM's input, as bilm-tf's
        `DropoutWrapper` (the residual connection adds the dropped input)."""
        word_mask = tf.cast(inputs["padding_mask"], tf.int32)
        lengths = tf.reduce_sum(word_mask, axis=1)  # words, without the boundaries
        if self.token_table is not None:
            ids = self._with_boundary_ids(tf.cast(inputs["token_ids"], tf.int32), lengths)
            tokens = self.token_table(ids)  # (B, T = W + 2, P)
        else:
            char_ids = inputs["char_ids"]
            width, want = char_ids.shape[-1], self.config.max_characters_per_token
            if width is not None and width != want:
                raise ValueError(
                    f"{self.name}: char_ids have {width} characters a word; this biLM reads "
                    f"{want} (config.max_characters_per_token): use "
                    f"ELMoCharTokenizer({want})")
            ids = self._with_boundaries(tf.cast(char_ids, tf.int32), lengths)
            tokens = self.char_encoder(ids)  # (B, T = W + 2, P)
        full = lengths + 2
        mask = tf.sequence_mask(full, tf.shape(ids)[1])  # (B, T)
        b = tf.shape(ids)[0]
        outputs = {}
        states = self._state_store() if self.stateful else None
        for direction, layers in self.lstms.items():
            x = tokens if direction == "forward" else tf.reverse_sequence(
                tokens, full, seq_axis=1, batch_axis=0)
            per_layer = []
            for i, layer in enumerate(layers):
                if states is not None:
                    c_store, m_store = states[direction][i]
                    init = (c_store[:b], m_store[:b])
                else:
                    init = (tf.zeros([b, self.config.lstm_dim], x.dtype),
                            tf.zeros([b, layer.output_dim], x.dtype))
                x = self._dropout(x, training=training)
                out, (c_last, m_last) = layer(x, mask, init)
                if states is not None:
                    c_store.assign(tf.concat([c_last, c_store[b:]], axis=0))
                    m_store.assign(tf.concat([m_last, m_store[b:]], axis=0))
                if i > 0 and self.config.use_skip_connections:
                    out = out + x
                    out = tf.where(mask[:, :, None], out, tf.zeros_like(out))
                x = out
                per_layer.append(out if direction == "forward" else tf.reverse_sequence(
                    out, full, seq_axis=1, batch_axis=0))
            outputs[direction] = per_layer
        return {"tokens": tokens, "forward": outputs["forward"],
                "backward": outputs["backward"], "mask": mask, "lengths": lengths}

    def call(self, inputs, training=None):
        run = self.run_lms(inputs, training=training)
        tokens, mask = run["tokens"], run["mask"]
        layers = [tf.concat([tokens, tokens], axis=-1)] + [
            tf.concat([f, bw], axis=-1) for f, bw in zip(run["forward"], run["backward"])]
        if self.keep_boundaries:
            real = tf.cast(mask, layers[0].dtype)[:, :, None]
            return {"hidden_states": [h * real for h in layers],
                    "padding_mask": tf.cast(mask, tf.int32)}
        word_mask = tf.cast(inputs["padding_mask"], tf.int32)
        width = tf.shape(word_mask)[1]
        real = tf.cast(word_mask, layers[0].dtype)[:, :, None]
        return {"hidden_states": [h[:, 1:width + 1] * real for h in layers],
                "padding_mask": word_mask}

    def get_config(self):
        return {"config": self.config.to_dict(), "stateful": self.stateful,
                "max_batch_size": self.max_batch_size,
                "keep_boundaries": self.keep_boundaries, "name": self.name,
                "trainable": self.trainable, "token_vocab_size": self.token_vocab_size,
                "bos_token_id": self.token_marks and self.token_marks[0],
                "eos_token_id": self.token_marks and self.token_marks[1]}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    # ------------------------------------------------------------ bilm-tf weights
    def weight_map(self) -> dict:
        """bilm-tf's HDF5 dataset name -> Keras variable."""
        self.ensure_built()
        enc = self.char_encoder
        names = {"char_embed": enc.char_embed}
        for i, (w, b) in enumerate(zip(enc.conv_kernels, enc.conv_biases)):
            names[f"CNN/W_cnn_{i}"], names[f"CNN/b_cnn_{i}"] = w, b
        for k, (wc, bc, wt, bt) in enumerate(enc.highways):
            p = f"CNN_high_{k}"
            names.update({f"{p}/W_carry": wc, f"{p}/b_carry": bc, f"{p}/W_transform": wt,
                          f"{p}/b_transform": bt})
        if enc.projection is not None:
            names["CNN_proj/W_proj"], names["CNN_proj/b_proj"] = enc.projection
        for d, direction in enumerate(("forward", "backward")):
            for i, layer in enumerate(self.lstms[direction]):
                p = f"RNN_{d}/RNN/MultiRNNCell/Cell{i}/LSTMCell"
                names[f"{p}/W_0"], names[f"{p}/B"] = layer.kernel, layer.bias
                if layer.projection is not None:
                    names[f"{p}/W_P_0"] = layer.projection
        return names

    def ensure_built(self):
        """Builds the weights with a call that leaves the stored states alone."""
        if not self.built:
            c = self.config
            stateful, self.stateful = self.stateful, False
            try:
                if self.token_table is not None:
                    self.char_encoder.build()  # kept: bilm-tf's weight file has it
                    self({"token_ids": tf.zeros([1, 1], tf.int32),
                          "padding_mask": tf.ones([1, 1], tf.int32)})
                else:
                    self({"char_ids": tf.zeros([1, 1, c.max_characters_per_token], tf.int32),
                          "padding_mask": tf.ones([1, 1], tf.int32)})
            finally:
                self.stateful = stateful

    # ------------------------------------------------------------ token mode
    def token_embeddings(self, words, batch_size: int = 1024) -> np.ndarray:
        """The character CNN's vectors of `words` [len(words), P]: the rows of bilm-tf's
        `dump_token_embeddings` (`<S>` and `</S>` give the sentence marks' vectors)."""
        from kbert.tokenizers.elmo import ELMoCharTokenizer

        self.ensure_built()
        tokenizer = ELMoCharTokenizer(self.config.max_characters_per_token)
        out = [np.zeros((0, self.config.projection_dim), np.float32)]
        for i in range(0, len(words), batch_size):
            chunk = tf.constant(list(words[i:i + batch_size]))
            single = tf.RaggedTensor.from_row_lengths(chunk, tf.ones_like(chunk, tf.int64))
            ids = tokenizer(single)["char_ids"]  # (n, 1, C)
            out.append(np.asarray(self.char_encoder(ids))[:, 0].astype(np.float32))
        return np.concatenate(out)

    def with_token_table(self, words, embeddings=None) -> "ELMo":
        """bilm-tf's token mode: an `ELMo` with these LSTM (and CNN) weights whose input
        is the ids + 1 of `words` (a `WordVocabulary`'s words, with `<S>` and `</S>`),
        its token layer the table of `token_embeddings(words)`, or of `embeddings`
        (bilm-tf's `embedding` dataset, [len(words), P]), fixed."""
        words = list(getattr(words, "words", words))
        for mark in (BOS_WORD, EOS_WORD):
            if mark not in words:
                raise ValueError(f"token mode: the vocabulary has no {mark}")
        table = self.token_embeddings(words) if embeddings is None else np.asarray(
            embeddings, np.float32)
        if table.shape != (len(words), self.config.projection_dim):
            raise ValueError(f"token embeddings of shape {table.shape}: expected "
                             f"({len(words)}, {self.config.projection_dim})")
        model = ELMo(self.config, stateful=self.stateful, max_batch_size=self.max_batch_size,
                     keep_boundaries=self.keep_boundaries, token_vocab_size=len(words),
                     bos_token_id=words.index(BOS_WORD) + 1,
                     eos_token_id=words.index(EOS_WORD) + 1)
        model.ensure_built()
        self.ensure_built()
        targets = model.weight_map()
        for name, var in self.weight_map().items():
            targets[name].assign(var)
        model.token_table.embeddings.assign(
            np.concatenate([np.zeros((1, table.shape[1]), np.float32), table]))
        return model

    # from_pretrained(path, stateful=False): a folder with bilm-tf's / AllenNLP's
    # `options.json` and its weight `.hdf5` (the only `.hdf5`, or `weights.hdf5`);
    # save_pretrained: bilm-tf's layout, `options.json` and `weights.hdf5` (through
    # kbert.models.base.Pretrained).
