"""`from_pretrained` and `save_pretrained` once, for every family's model classes."""

from __future__ import annotations

import importlib
import os
from typing import ClassVar

from kbert import hub, internals


class Pretrained:
    """Folder loading and saving through the family's checkpoint module (the
    `checkpoints` module of the model class's package, or the module path `checkpoints`
    names), which offers `load(cls, path, dtype=None, **config_overrides)` and
    `save(model, path, tokenizer=None)` on `kbert.convert.folders`: the formats it
    reads are the family's (see its checkpoint module and docs)."""

    checkpoints: ClassVar[str] = ""

    @classmethod
    def checkpoint_module(cls):
        """The family's checkpoint module: `checkpoints`, else the `checkpoints` module
        beside the class's own (kbert/models/NAME/checkpoints.py)."""
        return importlib.import_module(
            cls.checkpoints or f"{cls.__module__.rsplit('.', 1)[0]}.checkpoints")

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype=None, quantize: str | None = None,
                        **config_overrides):
        """Builds the model and loads its weights from a folder (a kbert folder, a
        Hugging Face folder, or the family's other reference formats; a quantized kbert
        folder loads quantized). A missing, extra or mis-shaped variable raises a
        ValueError that names it; a folder of another family, one naming it.
        `config_overrides` replace config fields (`dropout=0.0`).

        The model is built without computing random values for the weights the folder
        provides, and the folder is read tensor by tensor, each converted and assigned
        before the next (`kbert.convert.initialization`, `kbert.convert.load_into`):
        the peak memory is about the model's own. `dtype="bfloat16"` builds bfloat16
        variables, so half that. `quantize="int8"` quantizes each layer as its weights
        load (what `model.quantize("int8")` after a float load gives, without the float
        model in memory)."""
        from kbert.convert import initialization

        path = hub.resolve(path)
        if quantize is not None:
            check_quantize_load(cls, quantize, dtype)
        with initialization.deferred(quantize=quantize):
            if os.path.exists(os.path.join(path, QUANTIZED_FILE)):
                if quantize is not None:
                    raise ValueError(f"{path}: a quantized folder; it loads quantized as "
                                     "saved, without quantize=")
                return load_quantized(cls, path, dtype, config_overrides)
            model = cls.checkpoint_module().load(cls, path, dtype=dtype, **config_overrides)
        if quantize is not None:
            mode = model.quantization_mode_of_layers()
            if mode != quantize:
                raise ValueError(f"{type(model).__name__}.from_pretrained(quantize="
                                 f"{quantize!r}): the layers' mode is {mode!r}")
        return model

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None,
                        format: str = "kbert") -> None:  # noqa: A002 - transformers' word
        """Writes a kbert folder atomically: `config.json`, `model.safetensors` and,
        given a tokenizer, its files. A quantized model (`model.quantize("int8")`) is
        written as kbert's own quantized folder (`save_quantized`): its int8 weights and
        scales, which no Hugging Face layout holds.

        `format="huggingface"` writes the folder `transformers` writes for the family's
        model (`BertModel`, `GPT2LMHeadModel` / `OpenAIGPTLMHeadModel`, `RobertaModel`,
        `RobertaForMaskedLM`): its names, layout and config.json, so that
        `transformers`' `from_pretrained` loads it."""
        check_save_format(self, format)
        mode = getattr(self, "quantization_mode_of_layers", lambda: None)()
        if mode is not None:
            if format != "kbert":
                raise ValueError(f"{type(self).__name__}: quantized ({mode}); the Hugging "
                                 "Face layout holds float weights only (save before "
                                 "quantizing)")
            return save_quantized(self, path, mode, tokenizer)
        module = self.checkpoint_module()
        (module.save_hf if format == "huggingface" else module.save)(
            self, path, tokenizer=tokenizer)


SAVE_FORMATS = ("kbert", "huggingface")


class Backbone:
    """`get_config`/`from_config` written once for a model built from its family's
    `ModelConfig`: the constructor takes the config (a dict or the dataclass) first,
    then `dtype`, `name`, `trainable` and the model's own `serialized_options()`.
    Listed before `keras.Model` among the bases."""

    config_key: ClassVar[str] = "config"  # the config's key (GPTLanguageModel: decoder)

    def serialized_options(self) -> dict:
        """Constructor arguments besides the config, dtype, name and trainable."""
        return {}

    def serialized_dtype(self):
        return self.dtype_policy

    def get_config(self):
        import keras

        return with_quantization_mode(self, {
            self.config_key: self.config.to_dict(), **self.serialized_options(),
            "name": self.name, "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.serialized_dtype())})

    @classmethod
    def from_config(cls, config):
        from kbert.models.interface import dtype_from_config

        config = dict(config)
        mode = config.pop("quantization_mode", None)
        dtype = dtype_from_config(config)
        return quantized(cls(config.pop(cls.config_key), dtype=dtype, **config), mode)


class Wrapper:
    """`get_config`/`from_config` once for a model that holds another model (its
    backbone, serialized whole under `wrapped_key`) and adds heads: the constructor takes
    that model, `name` and the model's own `serialized_options()`. Listed before
    `keras.Model` among the bases."""

    wrapped_key: ClassVar[str] = "encoder"

    def serialized_options(self) -> dict:
        return {}

    def get_config(self):
        import keras

        return with_quantization_mode(self, {
            self.wrapped_key: keras.saving.serialize_keras_object(
                getattr(self, self.wrapped_key)), **self.serialized_options(),
            "name": self.name})

    @classmethod
    def from_config(cls, config):
        import keras

        config = dict(config)
        mode = config.pop("quantization_mode", None)
        config[cls.wrapped_key] = keras.saving.deserialize_keras_object(
            config[cls.wrapped_key])
        return quantized(cls(**config), mode)


def with_quantization_mode(model, config: dict) -> dict:
    """A quantized model's config says so (`Quantizable`): `quantization_mode`."""
    mode = model.quantization_mode_of_layers() if isinstance(model, Quantizable) else None
    if mode is not None:
        config["quantization_mode"] = mode
    return config


def quantized(model, mode: str | None):
    """`model` quantized to `mode` before Keras loads its (int8) weights into it; each
    model class rebuilds its layers from its own config, which would otherwise lose the
    layers' quantized dtype policies."""
    if mode is not None:
        model.quantize(mode)
    return model


def check_save_format(model, format: str) -> None:  # noqa: A002
    """`save_pretrained`'s `format`: one of SAVE_FORMATS, and one the family writes."""
    if format not in SAVE_FORMATS:
        raise ValueError(f"save_pretrained(format={format!r}): use one of "
                         f"{', '.join(SAVE_FORMATS)}")
    if format == "huggingface" and not _writes_hf(model):
        raise NotImplementedError(f"{type(model).__name__}: no Hugging Face layout to write "
                                  "(transformers has no such model); save_pretrained "
                                  "writes the family's own")


def _writes_hf(model) -> bool:
    """Whether the model's checkpoint module writes transformers' layout (`save_hf`)."""
    try:
        return hasattr(model.checkpoint_module(), "save_hf")
    except (AttributeError, ModuleNotFoundError):  # not a `Pretrained`, or no module
        return False


QUANTIZE_MODES = ("int8",)


def check_quantize_load(cls, quantize: str, dtype) -> None:
    """`from_pretrained(quantize=...)`'s arguments, or one ValueError / the class's
    refusal (ELMo's LSTMs)."""
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"quantize={quantize!r}: use one of {', '.join(QUANTIZE_MODES)}")
    if dtype not in (None, "float32"):
        raise ValueError(f"quantize={quantize!r} and dtype={dtype!r}: give one of them")
    refusal = getattr(cls, "quantize_refusal", None)
    if refusal:
        raise NotImplementedError(f"{cls.__name__}: quantize({quantize!r}): {refusal}")


# A quantized model's folder: `config.json` says the family and the mode only (no
# `model_type`, no `model.safetensors`: Hugging Face refuses the folder rather than
# misread int8 tensors), the Keras config and the variables by their Keras paths.
QUANTIZED_FILE = "kbert_quantized.json"
QUANTIZED_WEIGHTS = "kbert_quantized.safetensors"


def refuse_quantized(model) -> None:
    """For the models with heads of their own (`BertPretrainer`, `RobertaMaskedLM`),
    whose folders hold float weights: a quantized one is one ValueError."""
    mode = model.quantization_mode_of_layers()
    if mode is not None:
        raise ValueError(f"{type(model).__name__}.save_pretrained: the model is quantized "
                         f"({mode}); its folder holds float weights: save it with "
                         "model.save('name.keras'), or quantize after loading")


def save_quantized(model, path, mode: str, tokenizer=None) -> None:
    """`model`'s quantized folder (see QUANTIZED_FILE), written atomically."""
    import json

    import keras

    from kbert.convert import LazyTensors
    from kbert.convert.folders import write_safetensors
    from kbert.io import atomic_directory
    from kbert.models import registry

    variables = {}
    for v in model.weights:
        if v.path in variables:
            raise ValueError(f"{type(model).__name__}: two variables named {v.path}")
        variables[v.path] = v
    tensors = LazyTensors({name: v.numpy for name, v in variables.items()},
                          {name: tuple(v.shape) for name, v in variables.items()})
    info = {"class": type(model).__name__, "quantization_mode": mode,
            "keras_config": keras.saving.serialize_keras_object(model)}
    with atomic_directory(path) as tmp:
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
            json.dump({"kbert_model": registry.family_of(model).name,
                       "quantization_mode": mode}, f, indent=2)
        with open(os.path.join(tmp, QUANTIZED_FILE), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2)
        write_safetensors(os.path.join(tmp, QUANTIZED_WEIGHTS), tensors,
                          {"format": "kbert-quantized", "mode": mode},
                          dtypes={name: v.dtype for name, v in variables.items()})
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)


def load_quantized(cls, path: str, dtype=None, config_overrides=None):
    """The model of a quantized folder, quantized as saved; a class, dtype or config
    override it cannot honour, or a missing, extra or mis-shaped variable, is one
    ValueError naming it."""
    import keras

    from kbert.convert import initialization, read_safetensors
    from kbert.io import read_json

    info = read_json(os.path.join(path, QUANTIZED_FILE))
    mode = info.get("quantization_mode")
    if info.get("class") != cls.__name__:
        raise ValueError(f"{path}: a quantized {info.get('class')}, not a {cls.__name__}")
    if dtype is not None or config_overrides:
        raise ValueError(f"{path}: a quantized ({mode}) folder loads as it was saved; "
                         "no dtype or config overrides")
    model = keras.saving.deserialize_keras_object(info["keras_config"])
    tensors = read_safetensors(os.path.join(path, QUANTIZED_WEIGHTS))
    names = {v.path for v in model.weights}
    extra = sorted(set(tensors) - names)
    if extra:
        raise ValueError(f"{path}: {QUANTIZED_WEIGHTS} has {extra[0]}, which the "
                         f"{cls.__name__} of its config does not")
    for v in model.weights:
        if v.path not in tensors:
            raise ValueError(f"{path}: {QUANTIZED_WEIGHTS} lacks {v.path}")
        value = tensors[v.path]
        if tuple(value.shape) != tuple(v.shape) or str(value.dtype) != v.dtype:
            raise ValueError(f"{path}: {v.path} is {value.dtype} {list(value.shape)}, the "
                             f"model's is {v.dtype} {list(v.shape)}")
        v.assign(value)
        initialization.provided(v)
    return model


class Quantizable:
    """`quantize(mode)` for kbert's models: Keras' own (`keras.Model.quantize`, which
    quantizes every layer that implements it), then a check that every kbert `Dense`
    kernel and token table was quantized, so that a layer Keras skipped (it only warns)
    fails loudly. A model with layers Keras cannot quantize sets `quantize_refusal`."""
    quantize_refusal: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs):
        # A quantized model's config says so, and from_config quantizes the new model
        # before Keras loads the int8 weights into it (`.keras` files). `Backbone` and
        # `Wrapper` do it themselves; a class that writes its own get_config/from_config
        # gets them wrapped here.
        super().__init_subclass__(**kwargs)
        if "get_config" in cls.__dict__:
            get_config = cls.__dict__["get_config"]

            def with_mode(self):
                return with_quantization_mode(self, get_config(self))

            cls.get_config = with_mode
        if "from_config" in cls.__dict__:
            from_config = cls.__dict__["from_config"].__func__

            def quantized_from_config(klass, config):
                config = dict(config)
                mode = config.pop("quantization_mode", None)
                return quantized(from_config(klass, config), mode)

            cls.from_config = classmethod(quantized_from_config)

    def quantization_mode_of_layers(self) -> str | None:
        """The quantization mode of the model's kbert Dense layers and token tables
        (None: not quantized)."""
        from kbert.layers.dense import Dense
        from kbert.layers.embeddings import TokenEmbedding

        modes = {layer.quantization_mode for layer in self._flatten_layers()
                 if isinstance(layer, (Dense, TokenEmbedding))} - {None}
        return modes.pop() if len(modes) == 1 else (None if not modes else "mixed")

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        import warnings

        import keras

        from kbert.layers.dense import Dense
        from kbert.layers.embeddings import TokenEmbedding

        refusing = next((layer for layer in [self, *self._flatten_layers()]
                         if getattr(layer, "quantize_refusal", None)), None)
        if refusing is not None:
            raise NotImplementedError(f"{type(refusing).__name__}: quantize({mode!r}): "
                                      f"{refusing.quantize_refusal}")
        # One garbage collection for the model, not one per dropped kernel (see
        # internals.one_gc_collect).
        with warnings.catch_warnings(record=True) as caught, internals.one_gc_collect():
            warnings.simplefilter("always")
            keras.Model.quantize(self, mode, config=config, filters=filters, **kwargs)
        if filters is None:
            left = [layer.path for layer in self._flatten_layers()
                    if isinstance(layer, (Dense, TokenEmbedding))
                    and layer.quantization_mode != mode]
            if left:
                names = {path.rsplit("/", 1)[-1] for path in left}
                reasons = "; ".join(str(w.message) for w in caught
                                    if any(str(w.message).startswith(f"{n}:") for n in names))
                raise ValueError(f"{type(self).__name__}: quantize({mode!r}) left {len(left)} "
                                 f"layer(s) unquantized (e.g. {left[0]})"
                                 + (f": {reasons}" if reasons else ""))
