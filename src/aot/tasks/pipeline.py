"""``run_task``: one training run of any task, the same steps for every task (see :mod:`aot.tasks.protocol`)."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from aot.bench.flops import training_flops_per_sample
from aot.bench.machine_cache import deferred_writes
from aot.devices import resolve_device
from aot.run_folder import folder_lock, write_results
from aot.runinfo import machine_info
from aot.tasks.protocol import Task, TaskRun
from aot.train.distributed import barrier, env_from_torchrun, init_distributed
from aot.train.trainer import Trainer, TrainResult, on_main


def run_task(
    task: Task,
    run: TaskRun,
    out_dir: str | Path,
    device_name: str = "auto",
    resume: bool | str = False,
    force: bool = False,
    stop_at: int | None = None,
    branch_from: str | Path | None = None,
) -> dict[str, Any]:
    """Train ``run`` of ``task`` into ``out_dir``, evaluate it, and write ``results.json`` (atomically, on the main
    process only) and the figures. Returns the results (``{}`` on the other processes, and when ``stop_at`` stopped
    the run early, with a checkpoint and no final evaluation, as an interrupted run would).

    Every task goes through the same steps: device (``device_name``; under torchrun each process takes its local
    rank's GPU), distributed init, the task's checks, ``out_dir``'s lock (:func:`aot.run_folder.folder_lock`, on
    the main process, held to the end: a second run on the same folder is refused in one line; a file or a
    read-only folder is an error before any data is read), the task's data, ``torch.manual_seed(run.train.seed)``
    then the model (so the init is the seed's), the :class:`aot.train.Trainer` (``resume`` / ``force``: see
    :meth:`aot.train.Trainer.fit`, as is ``branch_from``, a cooldown branch's checkpoint; its MFU from the block's
    analytic FLOPs; the run config in every checkpoint, for branches), the final evaluation, results.json,
    the task's artifacts and figures. What the run measures about the machine enters its cache only when the run
    has finished (:func:`aot.bench.machine_cache.deferred_writes`): a refused run writes nothing.
    """
    out = Path(out_dir)
    device = resolve_device(device_name, env_from_torchrun().local_rank)
    env = init_distributed(device)
    task.check(run, device)
    with ExitStack() as held, deferred_writes():
        on_main(lambda: held.enter_context(folder_lock(out)))
        return _run_locked(task, run, out, device, env.is_main, resume, force, stop_at, branch_from)


def _run_locked(
    task: Task,
    run: TaskRun,
    out: Path,
    device: torch.device,
    is_main: bool,
    resume: bool | str,
    force: bool,
    stop_at: int | None,
    branch_from: str | Path | None,
) -> dict[str, Any]:
    data = task.load_data(run, is_main)
    seed = run.train.seed
    torch.manual_seed(seed)
    model = task.build_model(run, data)
    setup = task.setup(run, data, model, device)
    trainer = Trainer(
        model,
        setup.batches,
        setup.loss,
        run.train,
        out,
        device=device,
        evaluate=setup.evaluate,
        fingerprint=setup.fingerprint,
        model_config=model.cfg.to_dict(),
        flops_per_sample=training_flops_per_sample(model.cfg, task.seq_len(run, model)),  # useful FLOPs: MFU <= 1
        run_config=run.to_dict(),
        notices=run.notes,  # said when training starts: a refused run prints only its one line
    )
    wall_start = time.perf_counter()
    try:
        result = trainer.fit(resume=resume, stop_at=stop_at, force=force, branch_from=branch_from)
    finally:
        close = getattr(setup.batches, "close", None)
        if callable(close):  # stop a batch source's worker processes
            close()
    if stop_at is not None and result.step < run.train.steps:
        return {}
    trainer.model.eval()
    with torch.no_grad(), trainer.autocast():
        final = task.final_eval(run, data, setup, trainer, device)
    results: dict[str, Any] = {}
    if is_main:
        results = assemble_results(task, run, model, result, time.perf_counter() - wall_start)
        own = task.results(run, data, setup, model, result, final)
        results["model"].update(own.pop("model", {}))
        results["train"].update(own.pop("train", {}))
        results.update(own)
        write_results(out, results)
        task.save_artifacts(out, data)
        task.figures(out, results)
    barrier()
    return results


def assemble_results(task: Task, run: TaskRun, model: Any, result: TrainResult, wall: float) -> dict[str, Any]:
    """The entries of results.json every task has; the task adds its own (:meth:`Task.results`)."""
    return {
        "task": run.task,
        "machine": machine_info(),
        "seed": run.train.seed,
        "config": run.to_dict(),
        "model": {},
        "train": {
            "steps": result.step,
            "train_seconds": result.train_seconds,
            "wall_seconds": wall,
            "final_train_loss": result.last_loss,
            "curve": [{"step": s, "loss": v} for s, v in result.losses],
            "evals": result.evals,
            **({"branched_from": result.branched_from} if result.branched_from else {}),
        },
    }
