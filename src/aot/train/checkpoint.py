"""Checkpoints: a run folder keeps the latest checkpoint ``checkpoint/`` and the one before, ``checkpoint.prev/``.
Each holds

- ``model.safetensors`` + ``config.json`` — loadable by ``AotModel.from_pretrained`` as they are (full format);
- ``optimizer.safetensors`` — optimizer state tensors (full format);
- ``sharded/`` instead of both safetensors files when FSDP trains in several processes: each process writes its own
  shards of the model and optimizer through ``torch.distributed.checkpoint`` (nothing is gathered on rank 0);
  ``aot export safetensors`` turns it into one ``model.safetensors``;
- ``rng-rank{R}.safetensors`` — every process's random-number-generator states (dropout streams differ per rank);
- ``trainer.json`` — step, tokens seen, optimizer parameter groups, the run's fingerprint (model, data and
  training config), the sha256 of every other file and of its own content.

``train.keep_checkpoints`` also keeps the checkpoint of chosen steps as ``checkpoint-step{N}/`` (the same files,
checksums and atomic write: :func:`keep_checkpoint`), which rotation never touches: a cooldown branch starts from
one (:func:`aot.train.resume.plan_branch`), and every command that reads a model takes it as a model folder.

Written atomically: everything goes to a scratch folder first; then three renames rotate
``checkpoint.prev`` out, ``checkpoint`` to ``checkpoint.prev`` and the scratch folder to ``checkpoint``. A run
killed at any moment leaves at least one complete checkpoint. Loading verifies every checksum: a damaged
checkpoint (a flipped byte, a truncated or missing file) is a one-line :class:`aot.run_folder.CheckpointDamaged`
naming it, and :func:`aot.run_folder.latest_good_checkpoint` falls back to the previous one (reading and verifying
checkpoints lives in :mod:`aot.run_folder`, with the rest of a run folder's layout). A failed write (a full disk,
a read-only folder) is a one-line error that removes the scratch folder and leaves the existing checkpoints as
they were.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aot.errors import AotError, os_error_line
from aot.run_folder import (
    CHECKPOINT_DIR,
    MODEL_CONFIG,
    MODEL_WEIGHTS,
    OLD_DIR,
    PREV_DIR,
    TRAINER_JSON,
    as_os_error,
    checkpoint_candidates,
    file_sha256,
    fsync_tree,
    state_digest,
    verify_checkpoint,
)
from aot.train.distributed import current_env, first_error, unwrap

SCRATCH_DIR = ".checkpoint.tmp"
TRASH_DIR = ".checkpoint.trash"
OPTIMIZER_WEIGHTS = "optimizer.safetensors"
SHARDED_DIR = "sharded"
FORMAT_FULL, FORMAT_SHARDED = "full", "sharded"


def rng_file(rank: int) -> str:
    return f"rng-rank{rank}.safetensors"


# -- saving -------------------------------------------------------------------------------------------------


def _full_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    return get_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def _sharded_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optim": optim_state}


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
    sharded: bool = False,
) -> Path | None:
    """Write the checkpoint of ``model`` (plain, DDP or FSDP) and ``optimizer``; every process must call it.
    ``sharded``: each process writes its shards through ``torch.distributed.checkpoint``; otherwise the state is
    gathered and rank 0 writes it. Returns the folder on rank 0. A failed write is a one-line :class:`AotError`
    on every process, the scratch folder removed and the previous checkpoints untouched."""
    from safetensors.torch import _remove_duplicate_names, save_file

    env = current_env()
    scratch = out_dir / SCRATCH_DIR
    error = ""
    if env.is_main:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir()
        except OSError as exc:
            error = os_error_line(exc, f"cannot write a checkpoint into {str(out_dir)!r}")
    _raise_agreed(first_error(error), out_dir, scratch, env.is_main)
    try:
        if sharded:
            import torch.distributed.checkpoint as dcp

            dcp.save(_sharded_state(model, optimizer), checkpoint_id=str(scratch / SHARDED_DIR))
            optimizer_meta: dict[str, Any] = {}
        else:
            model_state, optim_state = _full_state(model, optimizer)
            optimizer_meta = {}
            if env.is_main:
                for aliases in _remove_duplicate_names(model_state).values():  # tied weights are stored once
                    for alias in aliases:
                        model_state.pop(alias)
                tensors = {k: v.contiguous() for k, v in model_state.items()}
                save_file(tensors, str(scratch / MODEL_WEIGHTS), {"format": "pt"})
                optim_tensors, optimizer_meta = _flatten_optimizer(optim_state)
                save_file(optim_tensors, str(scratch / OPTIMIZER_WEIGHTS))
        save_file(_rng_state(), str(scratch / rng_file(env.rank)))
    except Exception as exc:  # safetensors and torch.distributed.checkpoint raise their own error types
        doing = f"cannot write a checkpoint into {str(out_dir)!r}"
        cause = as_os_error(exc)
        error = os_error_line(cause, doing) if cause is not None else f"{doing}: {_first_line(exc)}"
    _raise_agreed(first_error(error), out_dir, scratch, env.is_main)
    folder: Path | None = None
    if env.is_main:
        try:
            if model_config is not None:
                (scratch / MODEL_CONFIG).write_text(json.dumps(model_config, indent=2) + "\n")
            files = {
                str(path.relative_to(scratch)): file_sha256(path)
                for path in sorted(scratch.rglob("*"))
                if path.is_file()
            }
            state = {
                **trainer_state,
                "format": FORMAT_SHARDED if sharded else FORMAT_FULL,
                "world_size": env.world_size,
                "optimizer": optimizer_meta,
                "files": files,
            }
            state["state_sha256"] = state_digest(state)
            (scratch / TRAINER_JSON).write_text(json.dumps(state, indent=2) + "\n")
            fsync_tree(scratch)
            _rotate(out_dir, scratch)
            folder = out_dir / CHECKPOINT_DIR
        except OSError as exc:
            error = os_error_line(exc, f"cannot write a checkpoint into {str(out_dir)!r}")
    _raise_agreed(first_error(error), out_dir, scratch, env.is_main)
    return folder


def _rotate(out_dir: Path, scratch: Path) -> None:
    """checkpoint.prev -> trash, checkpoint -> checkpoint.prev, scratch -> checkpoint (a kill between any two
    leaves a complete checkpoint), then drop the trash and what killed runs left."""
    latest, prev, trash = out_dir / CHECKPOINT_DIR, out_dir / PREV_DIR, out_dir / TRASH_DIR
    shutil.rmtree(trash, ignore_errors=True)
    if latest.exists() and prev.exists():
        prev.rename(trash)
    if latest.exists():
        latest.rename(prev)
    scratch.rename(latest)
    shutil.rmtree(trash, ignore_errors=True)
    shutil.rmtree(out_dir / OLD_DIR, ignore_errors=True)
    for stale in out_dir.glob(".checkpoint.tmp-*"):  # the previous layout's scratch folders
        shutil.rmtree(stale, ignore_errors=True)


def _raise_agreed(error: str, out_dir: Path, scratch: Path, is_main: bool) -> None:
    if not error:
        return
    if is_main:
        shutil.rmtree(scratch, ignore_errors=True)
    kept = [p.name for p in checkpoint_candidates(out_dir)]
    note = f"; the last checkpoint ({', '.join(kept)}) is intact" if kept else ""
    raise AotError(error + note)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


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


def kept_name(step: int) -> str:
    """The folder ``train.keep_checkpoints`` keeps step ``step``'s checkpoint in."""
    return f"{CHECKPOINT_DIR}-step{step}"


def keep_checkpoint(out_dir: Path, step: int) -> Path:
    """Keep the latest checkpoint (just saved at ``step``) as ``out_dir/checkpoint-step{step}/``: copied into a
    scratch folder, its checksums verified, synced to disk, then renamed into place (a copy of the same step
    left by an earlier attempt is replaced). A failed copy is a one-line error; the scratch folder is removed and
    the run's checkpoints stay as they were."""
    target = out_dir / kept_name(step)
    scratch, old = out_dir / f".{target.name}.tmp", out_dir / f".{target.name}.old"
    try:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(out_dir / CHECKPOINT_DIR, scratch)
        verify_checkpoint(scratch)
        fsync_tree(scratch)
        shutil.rmtree(old, ignore_errors=True)
        if target.exists():
            target.rename(old)
        scratch.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise AotError(os_error_line(exc, f"cannot keep the checkpoint of step {step} as {str(target)!r}")) from None
    except AotError:  # the copy does not verify
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return target


def check_fingerprint(
    saved: dict[str, Any],
    current: dict[str, Any],
    folder: Path,
    ignore: tuple[str, ...] = (),
    fix: str = "use the same settings to --resume, or a new --out",
) -> None:
    """One-line error naming the first setting (outside ``ignore``) in which the checkpoint's run and this run
    differ, and ``fix``."""
    saved, current = _flatten(_canonical(saved)), _flatten(_canonical(current))
    for key in sorted((set(saved) | set(current)) - set(ignore)):
        if saved.get(key) != current.get(key):
            raise AotError(
                f"checkpoint {str(folder)!r} was written by a different config ({key}={saved.get(key)!r} there, "
                f"{current.get(key)!r} here); {fix}"
            )


def _canonical(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """``fingerprint`` with its model section as today's ``ModelConfig.to_dict`` writes it: a checkpoint saved
    before a field was renamed (``attn_scale``) or before the blocks' options moved out of the shared fields (when
    every block's were saved) is the same config, and resumes."""
    model = fingerprint.get("model")
    if not isinstance(model, dict):
        return fingerprint
    from aot.config import ModelConfig

    try:
        return {**fingerprint, "model": ModelConfig.from_dict(model, saved=True).to_dict()}
    except (AotError, TypeError, ValueError):  # not a config this version reads: compared as saved
        return fingerprint


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return flat


# -- loading ------------------------------------------------------------------------------------------------


def load_checkpoint(
    folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer, verified: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Restore model, optimizer and this process's RNG state in place (every process calls it); returns the
    trainer state from ``trainer.json``. The checksums are verified first, unless ``verified`` is the state a
    verification already returned (rank 0 verifies once for all processes)."""
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    state = verified if verified is not None else verify_checkpoint(folder)
    try:
        if state.get("format") == FORMAT_SHARDED:
            import torch.distributed.checkpoint as dcp

            sharded = _sharded_state(model, optimizer)
            dcp.load(sharded, checkpoint_id=str(folder / SHARDED_DIR))
            set_state_dict(model, optimizer, model_state_dict=sharded["model"], optim_state_dict=sharded["optim"])
        else:
            model_state = load_file(str(folder / MODEL_WEIGHTS))
            _restore_aliases(model_state, unwrap(model))
            expected = set(unwrap(model).state_dict())
            if set(model_state) != expected:
                missing, unexpected = sorted(expected - set(model_state)), sorted(set(model_state) - expected)
                raise AotError(
                    f"checkpoint {str(folder)!r} does not fit this model (missing {missing[:3]}, unexpected "
                    f"{unexpected[:3]}); use the config it was written with, or a new --out"
                )
            optim_state = _unflatten_optimizer(load_file(str(folder / OPTIMIZER_WEIGHTS)), state["optimizer"])
            set_state_dict(
                model,
                optimizer,
                model_state_dict=model_state,  # type: ignore[arg-type]
                optim_state_dict=optim_state,
                options=StateDictOptions(full_state_dict=True),
            )
    except (RuntimeError, KeyError, ValueError) as exc:
        raise AotError(f"checkpoint {str(folder)!r} does not fit this model: {_first_line(exc)}") from None
    rank = current_env().rank
    path = folder / rng_file(rank)
    if not path.is_file():  # written by another number of processes: rank 0's streams
        path = folder / rng_file(0)
    if path.is_file():
        rng = load_file(str(path))
        torch.set_rng_state(rng["rng.torch"])
        if "rng.cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state(rng["rng.cuda"])
    return state


def _restore_aliases(model_state: dict[str, torch.Tensor], model: nn.Module) -> None:
    """Tied weights are stored once: give their other names the same tensor."""
    for names in _alias_groups(model):
        present = [n for n in names if n in model_state]
        for name in names:
            if present and name not in model_state:
                model_state[name] = model_state[present[0]]


def _alias_groups(model: nn.Module) -> list[list[str]]:
    groups: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(param), []).append(name)
    return [names for names in groups.values() if len(names) > 1]
