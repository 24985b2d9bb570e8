"""Load a trained language model and its tokenizer from a run folder (``aot train lm --out DIR``) or an export
folder (``aot export hf``): what ``aot eval lm``, ``aot sample`` and ``aot export hf`` start from.

Where things are: the model in ``DIR/checkpoint/{config.json, model.safetensors}`` (a run) or
``DIR/{config.json, model.safetensors}``; the tokenizer's name in ``DIR/results.json`` (``config.data.tokenizer``)
or, for an unfinished run, in the checkpoint's ``trainer.json`` fingerprint, or in ``DIR/aot_tokenizer.json``
(exports). A trained BPE is read from ``DIR/tokenizer.json``, which ``aot train lm`` writes into the run folder, so
a run folder is self-sufficient.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aot.data.tokenizers import Tokenizer, load_tokenizer
from aot.errors import AotError
from aot.models.base import CONFIG_NAME, WEIGHTS_NAME, AotModel
from aot.models.lm import CausalLM
from aot.run_folder import require_model_folder


@dataclass
class LMRunFolder:
    path: Path
    model: CausalLM
    tokenizer: Tokenizer

    @property
    def block_size(self) -> int:
        return self.model.cfg.block_size

    @property
    def name(self) -> str:
        return self.path.name


def load_model(folder: Path) -> AotModel:
    """Our model from ``folder``: saved by ``save_pretrained`` / a checkpoint, or an ``aot export hf`` folder (HF
    config with our config under ``aot``, weights prefixed ``aot.``); transformers is not needed for either."""
    config = json.loads((folder / CONFIG_NAME).read_text())
    if config.get("model_type") != "aot":
        return AotModel.from_pretrained(folder)
    from safetensors.torch import load_file

    from aot.config import ModelConfig
    from aot.models import build_model

    model = build_model(ModelConfig.from_dict(config["aot"]))
    state = {k.removeprefix("aot."): v for k, v in load_file(str(folder / WEIGHTS_NAME)).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if set(missing) - {"lm_head.weight"} or unexpected:  # the output head is tied to the token embedding
        raise AotError(
            f"{str(folder)!r}: weights do not match the config (missing {missing[:3]}, extra {unexpected[:3]})"
        )
    return model


def load_lm_run(run_dir: str | Path, device: str = "cpu") -> LMRunFolder:
    """The model (eval mode, on ``device``) and tokenizer of a run or export folder."""
    path = Path(run_dir)
    if not path.is_dir():
        raise AotError(f"run folder {str(path)!r} does not exist")
    model = load_model(require_model_folder(path, "`aot train lm --out DIR` or `aot export hf`"))
    if not isinstance(model, CausalLM):
        raise AotError(f"{str(path)!r} holds a {model.cfg.task!r} model, not a language model")
    tokenizer = load_tokenizer(path)
    if tokenizer.vocab_size > model.cfg.vocab_size:
        raise AotError(
            f"{str(path)!r}: tokenizer {tokenizer.name} has {tokenizer.vocab_size} tokens but the model only "
            f"{model.cfg.vocab_size}; the folder mixes two runs"
        )
    return LMRunFolder(path, model.to(device).eval(), tokenizer)
