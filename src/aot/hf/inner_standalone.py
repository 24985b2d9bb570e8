"""What an export's standalone modelling code has in place of :mod:`aot.hf.inner` (:mod:`aot.hf.standalone` pastes
this source there): config.json's ``aot`` fields as the model's config, read as attributes the way aot's modules
read :class:`aot.config.ModelConfig`. The fields are ``ModelConfig.to_dict()`` of a config that aot validated and
completed (``head_dim``, ``norm``, ``position``, ``causal`` filled in) when it exported the model.
"""

from __future__ import annotations

from typing import Any


class SavedConfig:
    """The exported config's fields as attributes, and ``p`` (the head dimension) and ``padded_vocab`` as
    ``ModelConfig`` has them."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.__dict__.update(fields)

    @property
    def p(self) -> int:
        return int(self.__dict__["head_dim"])

    @property
    def padded_vocab(self) -> int:
        """``ModelConfig.padded_vocab``: vocab_size rounded up to vocab_multiple (absent from older configs: 1)."""
        multiple = int(self.__dict__.get("vocab_multiple", 1))
        return -(-int(self.__dict__["vocab_size"]) // multiple) * multiple

    def __repr__(self) -> str:
        return f"SavedConfig({self.__dict__!r})"


def model_config(fields: dict[str, Any]) -> SavedConfig:
    """The config of the exported language model."""
    return SavedConfig(fields)
