"""The batches of a step, made ahead: while step ``s`` runs on the GPU, a background thread slices step ``s + 1``'s
rows out of the (memmapped) data and pins them, so the next step's host-to-device copies start at once
(``non_blocking``) instead of waiting for numpy.

A step's batch is a pure function of the step number (:class:`aot.data.shards.LMBatches` and every task's batches),
so making it early changes nothing that the step computes: a run with prefetching equals one without, bit for bit.
:attr:`Prefetcher.wait_seconds` counts the time the training loop spent waiting for data (the ``data_wait_s`` of the
metrics): near zero when the data keeps up, the step time when the loop is data-bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

StepBatches = list[tuple[torch.Tensor, ...]]


class Prefetcher:
    """``get(step)`` returns the micro-batches of ``step`` on ``device``; with ``ahead``, the next step's are made in
    a background thread meanwhile (pinned when the device is CUDA)."""

    def __init__(self, make: Callable[[int], StepBatches], device: torch.device, ahead: bool) -> None:
        self.make, self.device, self.ahead = make, device, ahead
        self.pin = device.type == "cuda"
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="aot-prefetch") if ahead else None
        self.pending: tuple[int, Future[StepBatches]] | None = None
        self.wait_seconds = 0.0

    def _host(self, step: int) -> StepBatches:
        batches = self.make(step)
        if self.pin:
            batches = [tuple(t.pin_memory() for t in batch) for batch in batches]
        return batches

    def get(self, step: int) -> StepBatches:
        start = time.perf_counter()
        if self.pending is not None and self.pending[0] == step:
            host = self.pending[1].result()
        else:
            if self.pending is not None:  # a step other than the one made ahead (never in a plain run)
                self.pending[1].cancel()
            host = self._host(step)
        self.pending = None
        if self.pool is not None:
            self.pending = (step + 1, self.pool.submit(self._host, step + 1))
        batches = [tuple(t.to(self.device, non_blocking=True) for t in batch) for batch in host]
        self.wait_seconds += time.perf_counter() - start
        return batches

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def __del__(self) -> None:  # pragma: no cover - a trainer dropped without close()
        pool: Any = getattr(self, "pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
