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
from typing import Any

from aot.data.tokenizers import Tokenizer, TrainedBPE, get_tokenizer
from aot.errors import AotError
from aot.models.base import CONFIG_NAME, WEIGHTS_NAME, AotModel
from aot.models.lm import CausalLM

#: a trained BPE saved into the run / export folder (HF ``tokenizers`` JSON)
BPE_FILE = "tokenizer.json"
#: the tokenizer's name, written beside exports
TOKENIZER_NAME_FILE = "aot_tokenizer.json"


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


def model_folder(run_dir: Path) -> Path:
    """The folder holding config.json + model.safetensors of a run or an export
    (:func:`aot.train.checkpoint.model_folder`)."""
    from aot.train.checkpoint import model_folder as run_model_folder

    folder = run_model_folder(run_dir)
    if folder is not None:
        return folder
    raise AotError(
        f"{str(run_dir)!r} holds no model (checkpoint/{WEIGHTS_NAME} + {CONFIG_NAME}); give a folder written by "
        "`aot train lm --out DIR` (after its first checkpoint) or by `aot export hf`"
    )


def tokenizer_name(run_dir: Path) -> str:
    """The run's tokenizer name (bytes, gpt2, bpe-N), from whichever record the folder has."""
    candidates: list[tuple[Path, list[str]]] = [
        (run_dir / TOKENIZER_NAME_FILE, ["name"]),
        (run_dir / "results.json", ["config", "data", "tokenizer"]),
        (run_dir / "checkpoint" / "trainer.json", ["fingerprint", "data", "tokenizer"]),
    ]
    for path, keys in candidates:
        if not path.is_file():
            continue
        value: Any = json.loads(path.read_text())
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str):
            return value
    raise AotError(
        f"{str(run_dir)!r} does not say which tokenizer its model uses (no results.json, checkpoint/trainer.json "
        f"or {TOKENIZER_NAME_FILE}); is it a run folder of `aot train lm`?"
    )


def load_tokenizer(run_dir: Path) -> Tokenizer:
    name = tokenizer_name(run_dir)
    if name.startswith("bpe-"):
        saved = run_dir / BPE_FILE
        if not saved.is_file():
            raise AotError(
                f"{str(run_dir)!r} was trained with {name} but holds no {BPE_FILE}; copy the BPE the data pipeline "
                "cached (under $AOT_DATA/shards/) into the run folder as tokenizer.json"
            )
        return TrainedBPE.load(saved)
    return get_tokenizer(name)


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
    model = load_model(model_folder(path))
    if not isinstance(model, CausalLM):
        raise AotError(f"{str(path)!r} holds a {model.cfg.task!r} model, not a language model")
    tokenizer = load_tokenizer(path)
    if tokenizer.vocab_size > model.cfg.vocab_size:
        raise AotError(
            f"{str(path)!r}: tokenizer {tokenizer.name} has {tokenizer.vocab_size} tokens but the model only "
            f"{model.cfg.vocab_size}; the folder mixes two runs"
        )
    return LMRunFolder(path, model.to(device).eval(), tokenizer)


def save_tokenizer(tokenizer: Tokenizer, folder: Path) -> None:
    """Write what :func:`load_tokenizer` needs into ``folder``: the name, and a trained BPE's file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TOKENIZER_NAME_FILE).write_text(json.dumps({"name": tokenizer.name}) + "\n")
    if isinstance(tokenizer, TrainedBPE):
        tokenizer.save(folder / BPE_FILE)
