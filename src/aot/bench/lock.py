"""One lock file that long benchmark runs take in turn, so that runs sharing a few cores do not time each other."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator


@contextlib.contextmanager
def cpu_lock(path: str | None) -> Iterator[None]:
    """An exclusive flock on ``path`` for one run (``None``: no lock), so other heavy jobs interleave between
    runs, not within them. The same lock as ``flock PATH command`` on the command line."""
    if path is None:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
