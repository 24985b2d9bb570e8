"""Reading a model folder's two files for :meth:`aot.models.AotModel.from_pretrained`, with one-line errors that
name the file: ``config.json`` (our config as written by ``save_pretrained``, or an ``aot export hf`` folder's HF
config with ours under ``aot``) and ``model.safetensors`` (a file that is not safetensors, and weights that
disagree with the config: the tensor and both shapes; the number of layers, before the model is built)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from torch import nn

from aot.config import ModelConfig
from aot.errors import AotError
from aot.run_folder import RunFileError, json_field, read_json_object

#: what an HF config has that ours does not (``aot export hf`` writes them beside our config under ``aot``)
HF_KEYS = ("model_type", "architectures", "transformers_version")
#: the prefix of our weights' names in an ``aot export hf`` folder (``AotForCausalLM.aot``)
HF_PREFIX = "aot."
CONFIG_FIX = "rewrite it with save_pretrained, `aot export hf` or `aot export safetensors`"


def read_model_config(config_path: Path, overrides: dict[str, Any] | None = None) -> tuple[ModelConfig, str]:
    """The validated ``ModelConfig`` in ``config_path`` (``overrides`` replacing fields), and the prefix of the
    weights' names beside it (``""``, or :data:`HF_PREFIX` for an HF export). Not JSON, not an object, an HF config
    without our ``aot`` section, a field that does not validate: one :class:`AotError` line naming the file (and the
    field)."""
    fields, prefix = _model_fields(config_path)
    try:
        cfg = ModelConfig.from_dict({**fields, **(overrides or {})}, saved=True)
    except AotError as exc:
        raise AotError(f"{str(config_path)!r}: {exc}") from None
    except (TypeError, ValueError) as exc:  # a rule of a block spec meeting values from_dict let through
        raise AotError(f"{str(config_path)!r}: the model config does not validate ({exc})") from None
    return cfg, prefix


def _model_fields(config_path: Path) -> tuple[dict[str, Any], str]:
    fields = read_json_object(config_path, CONFIG_FIX)
    if not any(key in fields for key in HF_KEYS):
        return fields, ""
    model_type = json_field(fields, "model_type", str, config_path, CONFIG_FIX)
    if model_type not in (None, "aot"):
        raise RunFileError(
            config_path, f"is the HuggingFace config of a {model_type!r} model, not of an aot model", CONFIG_FIX
        )
    ours = json_field(fields, "aot", dict, config_path, CONFIG_FIX)
    if ours is None:
        raise RunFileError(
            config_path, "is a HuggingFace config without its aot section (our model config)", "export it again"
        )
    return ours, HF_PREFIX


class WeightsFile:
    """A ``model.safetensors``'s tensor names and shapes (its header: no tensor read yet), named as the model
    names them (``prefix`` removed), to check against a config before and after the model is built, then load.
    A file that is not safetensors (truncated, foreign) is one line naming it."""

    def __init__(self, path: Path, config_path: Path, prefix: str = "") -> None:
        from safetensors import safe_open

        self.path, self.config_path, self.prefix = path, config_path, prefix
        try:
            with safe_open(str(path), framework="pt") as handle:
                self.shapes = {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}  # noqa: SIM118
        except Exception as exc:  # safetensors raises its own error type for a truncated or foreign file
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise AotError(f"{str(path)!r} is damaged or not a safetensors file ({first})") from None
        self.stored = {name.removeprefix(prefix): name for name in self.shapes if name.startswith(prefix)}

    def _disagree(self, what: str) -> AotError:
        return AotError(
            f"{str(self.path)!r} does not fit {str(self.config_path)!r}: {what}; the two files come from different "
            "models, put the pair that was saved together back"
        )

    def check_layers(self, cfg: ModelConfig) -> None:
        """The file holds ``cfg.n_layer`` layers (``backbone.blocks.N``): checked before the model is built, so a
        config.json of 200000 layers beside the weights of 2 is refused at once, not after building them."""
        layers = {int(m.group(1)) for name in self.stored if (m := _LAYER.match(name))}
        held = max(layers) + 1 if layers else 0
        if held != cfg.n_layer:
            raise self._disagree(f"the config has n_layer={cfg.n_layer}, the weights {held} layer{'s' * (held != 1)}")

    def check(self, model: nn.Module) -> None:
        """The file's tensors are ``model``'s, name for name and shape for shape (``model`` may be built on the meta
        device: nothing allocated yet). One line for a tensor of another shape (named, with both shapes), a tensor
        missing, or one the model has no place for. A tied weight (the LM head shares the token embedding) is
        stored once, under either name."""
        expected = model.state_dict()
        shape_of = {name: self.shapes[key] for name, key in self.stored.items()}
        wrong = [name for name, tensor in expected.items() if name in shape_of and shape_of[name] != tensor.shape]
        if wrong:
            name, others = wrong[0], f" (and {len(wrong) - 1} more tensors)" if len(wrong) > 1 else ""
            raise self._disagree(
                f"tensor {name!r} is {list(shape_of[name])} in the weights but {list(expected[name].shape)} for the "
                f"config{others}"
            )
        unexpected = sorted(set(self.shapes) - {key for name, key in self.stored.items() if name in expected})
        tied = _tied_names(model)
        missing = [n for n in expected if n not in shape_of and not tied.get(n, set()) & shape_of.keys()]
        if missing or unexpected:
            what = [f"{len(missing)} missing (first {missing[0]!r})"] if missing else []
            what += [f"{len(unexpected)} the config has no place for (first {unexpected[0]!r})"] if unexpected else []
            raise self._disagree(f"of its tensors, {' and '.join(what)}")

    def load_into(self, model: nn.Module) -> None:
        """:meth:`check`, then copy the tensors into ``model``."""
        from safetensors import safe_open

        self.check(model)
        with safe_open(str(self.path), framework="pt") as handle:
            state = {name: handle.get_tensor(key) for name, key in self.stored.items()}
        model.load_state_dict(state, strict=False)


_LAYER = re.compile(r"backbone\.blocks\.(\d+)\.")


def _tied_names(model: nn.Module) -> dict[str, set[str]]:
    """Each parameter or buffer name -> the other names of the same tensor (a tied weight is one object under two
    names; on the meta device too, where storages cannot tell)."""
    names: dict[int, set[str]] = {}
    for name, tensor in [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]:
        names.setdefault(id(tensor), set()).add(name)
    return {name: group - {name} for group in names.values() for name in group}
