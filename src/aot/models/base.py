"""What every model shares: its config, the backbone, hooks, parameter counts, and safetensors I/O."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aot.config import CAUSAL_TASKS, ModelConfig
from aot.errors import AotError, ConfigError
from aot.models.backbone import Backbone, init_weights
from aot.nn.cache import MIN_CAPACITY, Cache
from aot.nn.hooks import HookedModule
from aot.run_folder import atomic_target, write_text_atomic

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"

#: task → its head class; :mod:`aot.models.factory` registers the three heads (``import aot`` imports it)
HEADS: dict[str, type[AotModel]] = {}


def build_model(cfg: ModelConfig) -> AotModel:
    """The model of ``cfg``: the task picks the head (:data:`HEADS`), the block picks the backbone. A model whose
    weights the machine cannot hold is refused in one line before anything is allocated
    (:func:`aot.models.budget.check_model_fits`); on the meta device (no memory: the preset table's paper-scale
    counts) there is nothing to check."""
    if cfg.task in CAUSAL_TASKS and not cfg.causal:
        raise ConfigError(
            f"task={cfg.task!r} predicts each position from the ones before it and needs causal=True "
            "(causal=False would let every token see what it predicts); leave causal unset"
        )
    import torch

    from aot.models.budget import check_model_fits

    if torch.get_default_device().type != "meta":
        check_model_fits(cfg, HEADS[cfg.task])
    return HEADS[cfg.task](cfg)


class AotModel(HookedModule):
    """Base class of the three heads. Subclasses build their embedding and head, then call ``_finish``."""

    #: parameter names (prefixes) that hold embeddings, for ``num_params(non_embedding=True)``
    embedding_names: tuple[str, ...] = ()

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.backbone = Backbone(cfg)

    def _finish(self) -> None:
        init_weights(self, self.cfg)

    # -- sizes ----------------------------------------------------------------------------------------
    def num_params(self, non_embedding: bool = False) -> int:
        """Unique parameters (a tied weight counts once); ``non_embedding`` leaves out token / position /
        patch embeddings and the class token (the convention of the scaling-law papers)."""
        seen: set[int] = set()
        total = 0
        for name, param in self.named_parameters():
            if id(param) in seen:
                continue
            seen.add(id(param))
            if non_embedding and name.startswith(self.embedding_names):
                continue
            total += param.numel()
        return total

    def new_cache(self, capacity: int = MIN_CAPACITY) -> Cache:
        """An empty cache whose buffers first hold ``capacity`` tokens (they grow by doubling beyond)."""
        return Cache.for_layers(self.cfg.n_layer, capacity)

    def no_weight_decay(self) -> set[str]:
        """Parameter names kept out of weight decay: biases, norms, embeddings of positions, η, and parameters
        marked ``_no_weight_decay`` (Mamba's A_log and D, as mambapy marks them)."""
        names = set()
        for name, param in self.named_parameters():
            if (
                param.ndim < 2
                or name.startswith(("pos_embed", "cls_token"))
                or getattr(param, "_no_weight_decay", False)
            ):
                names.add(name)
        return names

    # -- persistence ----------------------------------------------------------------------------------
    def save_pretrained(self, directory: str | Path) -> Path:
        """Write ``config.json`` and ``model.safetensors`` (each atomically: a crash leaves the old file). A write
        that fails for the disk or the folder (full, a file-size limit, read-only) is one line,
        :class:`aot.run_folder.WriteFailed`, and leaves the old files and no scratch file."""
        from safetensors.torch import save_model

        from aot.run_folder import WriteFailed, as_os_error

        directory = Path(directory)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with atomic_target(directory / WEIGHTS_NAME) as scratch:
                save_model(self, str(scratch), metadata={"format": "pt", "aot_block": self.cfg.block})
            write_text_atomic(directory / CONFIG_NAME, json.dumps(self.cfg.to_dict(), indent=2) + "\n")
        except Exception as exc:  # safetensors raises its own error type for a failed write
            cause = as_os_error(exc)
            if cause is None:
                raise
            raise WriteFailed(cause, f"cannot save the model into {str(directory)!r}") from None
        return directory

    @classmethod
    def from_pretrained(cls, directory: str | Path, **overrides: Any) -> AotModel:
        """Load a model saved by :meth:`save_pretrained` (any head: the config says which), or the model of an
        ``aot export hf`` folder (transformers is not needed). Every problem is one line naming the file: a
        config.json that is not JSON or not an object, or does not validate (the field named); weights that are
        not safetensors, or disagree with the config (the tensor and both shapes named). Checksums are not
        checked here: :mod:`aot.loader` reads run folders, verifying their checkpoints first."""
        import torch

        from aot.models.weights import WeightsFile, read_model_config

        directory = Path(directory)
        config_path, weights_path = directory / CONFIG_NAME, directory / WEIGHTS_NAME
        if not config_path.is_file() or not weights_path.is_file():
            raise AotError(
                f"{str(directory)!r} has no {CONFIG_NAME} + {WEIGHTS_NAME}; "
                "point to a folder written by save_pretrained"
            )
        cfg, prefix = read_model_config(config_path, overrides)
        weights = WeightsFile(weights_path, config_path, prefix)
        weights.check_layers(cfg)  # before building anything: 200000 layers of config beside 2 of weights
        with torch.device("meta"):  # the model's names and shapes, nothing allocated
            weights.check(build_model(cfg))
        try:
            model = build_model(cfg)  # which refuses a model the machine cannot hold, before allocating it
        except ConfigError as exc:
            raise ConfigError(f"{str(config_path)!r}: {exc}") from None
        weights.load_into(model)
        return model

    def extra_repr(self) -> str:
        return f"block={self.cfg.block}, task={self.cfg.task}, params={self.num_params():,}"
