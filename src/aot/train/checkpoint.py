"""Checkpoints: a folder ``checkpoint/`` holding

- ``model.safetensors`` + ``config.json`` — loadable by ``AotModel.from_pretrained`` as they are;
- ``optimizer.safetensors`` — optimizer state tensors and RNG states;
- ``trainer.json`` — step, tokens seen, optimizer parameter groups, the run's fingerprint (model, data and
  training config) and anything else the trainer records (the data position is the step).

Written atomically: everything goes to a scratch folder first, which then replaces the old checkpoint by two
renames; a run killed at any moment leaves either the previous complete checkpoint or the new complete one
(``.checkpoint.old`` covers the instant between the renames). Works for plain, DDP and FSDP models: the state
is gathered in full with ``torch.distributed.checkpoint.state_dict`` and written by rank 0.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aot.errors import AotError
from aot.train.distributed import barrier, current_env, unwrap

CHECKPOINT_DIR = "checkpoint"
OLD_DIR = ".checkpoint.old"
TRAINER_JSON = "trainer.json"
MODEL_WEIGHTS = "model.safetensors"
MODEL_CONFIG = "config.json"
OPTIMIZER_WEIGHTS = "optimizer.safetensors"


def find_checkpoint(out_dir: Path) -> Path | None:
    """The complete checkpoint under ``out_dir`` (a half-written scratch folder is never returned)."""
    for name in (CHECKPOINT_DIR, OLD_DIR):
        folder = out_dir / name
        if (folder / TRAINER_JSON).is_file():
            return folder
    return None


def _full_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    return get_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def _rng_state() -> dict[str, torch.Tensor]:
    states = {"rng.torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["rng.cuda"] = torch.cuda.get_rng_state()
    return states


def save_checkpoint(
    out_dir: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    trainer_state: dict[str, Any],
    model_config: dict[str, Any] | None = None,
) -> Path | None:
    """Write the checkpoint of ``model`` (plain, DDP or FSDP) and ``optimizer``; every process must call it,
    rank 0 writes. Returns the folder on rank 0."""
    from safetensors.torch import _remove_duplicate_names, save_file

    model_state, optim_state = _full_state(model, optimizer)
    env = current_env()
    folder: Path | None = None
    if env.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        scratch = out_dir / f".checkpoint.tmp-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        for aliases in _remove_duplicate_names(model_state).values():  # tied weights are stored once
            for alias in aliases:
                model_state.pop(alias)
        save_file({k: v.contiguous() for k, v in model_state.items()}, str(scratch / MODEL_WEIGHTS), {"format": "pt"})
        if model_config is not None:
            (scratch / MODEL_CONFIG).write_text(json.dumps(model_config, indent=2) + "\n")
        tensors, optimizer_meta = _flatten_optimizer(optim_state)
        tensors.update(_rng_state())
        save_file(tensors, str(scratch / OPTIMIZER_WEIGHTS))
        state = {**trainer_state, "optimizer": optimizer_meta}
        (scratch / TRAINER_JSON).write_text(json.dumps(state, indent=2) + "\n")
        _fsync_folder(scratch)
        final, old = out_dir / CHECKPOINT_DIR, out_dir / OLD_DIR
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        scratch.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        for stale in out_dir.glob(".checkpoint.tmp-*"):  # left by killed runs
            shutil.rmtree(stale, ignore_errors=True)
        folder = final
    barrier()
    return folder


def _fsync_folder(folder: Path) -> None:
    for path in folder.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())


def _flatten_optimizer(optim_state: dict) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Optimizer state (keyed by parameter name) → flat tensors ``state/<name>/<field>`` + JSON metadata."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for param_name, fields in optim_state["state"].items():
        for field, value in fields.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state/{param_name}/{field}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(param_name), {})[field] = value
    return tensors, {"param_groups": optim_state["param_groups"], "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict:
    state: dict[str, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("state/"):
            param_name, field = key[len("state/") :].rsplit("/", 1)
            state.setdefault(param_name, {})[field] = value
    for param_name, fields in meta.get("scalars", {}).items():
        state.setdefault(param_name, {}).update(fields)
    return {"state": state, "param_groups": meta["param_groups"]}


def read_trainer_state(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / TRAINER_JSON).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise AotError(
            f"checkpoint {str(folder)!r} is unreadable ({exc}); start a fresh run with a new --out"
        ) from None


def check_fingerprint(saved: dict[str, Any], current: dict[str, Any], folder: Path) -> None:
    """One-line error naming the first setting in which the checkpoint's run and this run differ."""
    saved, current = _flatten(saved), _flatten(current)
    for key in sorted(set(saved) | set(current)):
        if saved.get(key) != current.get(key):
            raise AotError(
                f"checkpoint {str(folder)!r} was written by a different config ({key}={saved.get(key)!r} there, "
                f"{current.get(key)!r} here); use the same settings to --resume, or a new --out"
            )


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return flat


def load_checkpoint(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Restore model, optimizer and RNG state in place; returns the trainer state from ``trainer.json``."""
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    state = read_trainer_state(folder)
    model_state = load_file(str(folder / MODEL_WEIGHTS))
    for names in _alias_groups(unwrap(model)):  # restore the names of tied weights stored once
        present = [n for n in names if n in model_state]
        for name in names:
            if present and name not in model_state:
                model_state[name] = model_state[present[0]]
    expected = set(unwrap(model).state_dict())
    if set(model_state) != expected:
        missing, unexpected = sorted(expected - set(model_state)), sorted(set(model_state) - expected)
        raise AotError(
            f"checkpoint {str(folder)!r} does not fit this model (missing {missing[:3]}, unexpected {unexpected[:3]});"
            " use the config it was written with, or a new --out"
        )
    tensors = load_file(str(folder / OPTIMIZER_WEIGHTS))
    optim_state = _unflatten_optimizer(tensors, state["optimizer"])
    try:
        set_state_dict(
            model,
            optimizer,
            model_state_dict=model_state,  # type: ignore[arg-type]
            optim_state_dict=optim_state,
            options=StateDictOptions(full_state_dict=True),
        )
    except (RuntimeError, KeyError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise AotError(f"checkpoint {str(folder)!r} does not fit this model: {first}") from None
    torch.set_rng_state(tensors["rng.torch"])
    if "rng.cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["rng.cuda"])
    return state


def _alias_groups(model: nn.Module) -> list[list[str]]:
    groups: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(param), []).append(name)
    return [names for names in groups.values() if len(names) > 1]
