"""`from_pretrained` and `save_pretrained` once, for every family's model classes."""

from __future__ import annotations

import importlib
import os
from typing import ClassVar


class Pretrained:
    """Folder loading and saving through the family's checkpoint module (`checkpoints`,
    a module path), which offers `load(cls, path, dtype=None, **config_overrides)` and
    `save(model, path, tokenizer=None)` on `kbert.convert.folders`: the formats it
    reads are the family's (see its checkpoint module and docs)."""

    checkpoints: ClassVar[str] = ""

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype=None, **config_overrides):
        """Builds the model and loads its weights from a folder (a kbert folder, a
        Hugging Face folder, or the family's other reference formats). A missing, extra
        or mis-shaped variable raises a ValueError that names it; a folder of another
        family, one naming it. `config_overrides` replace config fields (`dropout=0.0`)."""
        module = importlib.import_module(cls.checkpoints)
        return module.load(cls, os.fspath(path), dtype=dtype, **config_overrides)

    def save_pretrained(self, path: str | os.PathLike, tokenizer=None) -> None:
        """Writes a kbert folder atomically: `config.json`, `model.safetensors` and,
        given a tokenizer, its files. A quantized model is refused (the folder formats
        hold float weights): save it with `model.save("name.keras")`."""
        mode = getattr(self, "quantization_mode_of_layers", lambda: None)()
        if mode is not None:
            raise ValueError(f"{type(self).__name__}.save_pretrained: the model is quantized "
                             f"({mode}) and the folder formats hold float weights; save it "
                             "with model.save('name.keras'), or quantize after loading")
        importlib.import_module(self.checkpoints).save(self, path, tokenizer=tokenizer)


class Quantizable:
    """`quantize(mode)` for kbert's models: Keras' own (`keras.Model.quantize`, which
    quantizes every layer that implements it), then a check that every kbert `Dense`
    kernel and token table was quantized, so that a layer Keras skipped (it only warns)
    fails loudly. A model with layers Keras cannot quantize sets `quantize_refusal`."""
    quantize_refusal: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs):
        # A quantized model's config says so, and from_config quantizes the new model
        # before Keras loads the int8 weights into it (`.keras` files): each model
        # class rebuilds its layers from its own config, which would otherwise lose
        # the layers' quantized dtype policies.
        super().__init_subclass__(**kwargs)
        if "get_config" in cls.__dict__:
            get_config = cls.__dict__["get_config"]

            def with_mode(self):
                config = get_config(self)
                mode = self.quantization_mode_of_layers()
                if mode is not None:
                    config["quantization_mode"] = mode
                return config

            cls.get_config = with_mode
        if "from_config" in cls.__dict__:
            from_config = cls.__dict__["from_config"].__func__

            def quantized_from_config(klass, config):
                config = dict(config)
                mode = config.pop("quantization_mode", None)
                model = from_config(klass, config)
                if mode is not None:
                    model.quantize(mode)
                return model

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
        with warnings.catch_warnings(record=True) as caught:
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
