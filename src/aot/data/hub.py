"""HuggingFace ``datasets`` for the ``hf:NAME`` corpora and image sets, failing fast when the hub cannot be reached.

``datasets.load_dataset`` on a machine without a network retries the hub for half a minute or more
(huggingface_hub's ``http_backoff``: five retries, 1-8 s apart, each printed) before its own error. Here one
request probes the hub first — ``HEAD`` of ``huggingface_hub.constants.ENDPOINT`` (``HF_ENDPOINT``) through
huggingface_hub's own session (its proxies and certificates), :data:`PROBE_TIMEOUT` seconds at most — and an
unreachable hub is one line naming the endpoint, why, and what works offline: ``HF_HUB_OFFLINE=1`` (datasets then
reads its local cache) or a local file. There is no probe in offline mode (``HF_HUB_OFFLINE`` /
``HF_DATASETS_OFFLINE``: datasets reads the cache without a request) or for a dataset folder on disk.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aot.errors import AotError

#: the environment variables that put huggingface_hub / datasets offline
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
#: seconds the hub has to answer the probe (a refused connection or an unknown host answers at once)
PROBE_TIMEOUT = 3.0
#: the endpoints that answered a probe in this process: a hub that answered is not probed again
_ANSWERED: set[str] = set()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def hub_unreachable(timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why the HuggingFace hub does not answer (one line), or ``None`` when it answers (any HTTP status)."""
    from huggingface_hub import constants, get_session

    try:
        get_session().head(constants.ENDPOINT, timeout=timeout)
    except Exception as exc:  # the transport's errors: unknown host, refused, timed out, proxy, TLS
        return f"{constants.ENDPOINT} does not answer ({type(exc).__name__}: {_first_line(exc)})"
    return None


def require_hub(spec: str, what: str, fix: str, offline: bool | None = None) -> None:
    """One :class:`AotError` at once when dataset ``spec`` (``NAME[:CONFIG]``) would need the hub and the hub does
    not answer; nothing in offline mode (``offline``; ``None``: the ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``
    environment) or for a dataset folder on disk. Cheap (no ``datasets`` import): a task calls it before its other
    checks, so that an offline ``hf:NAME`` run says so within a second or two of starting."""
    if offline is None:
        offline = any(os.environ.get(v, "").upper() in ("1", "ON", "YES", "TRUE") for v in OFFLINE_VARIABLES)
    if offline or Path(spec.partition(":")[0]).exists():
        return
    from huggingface_hub import constants

    if constants.ENDPOINT in _ANSWERED:  # probed in this process already (the task's check, then the load)
        return
    reason = hub_unreachable()
    if reason is None:
        _ANSWERED.add(constants.ENDPOINT)
    else:
        raise AotError(
            f"cannot load {what}: the HuggingFace hub {reason}; set HF_HUB_OFFLINE=1 to read it from the local "
            f"datasets cache, or {fix}"
        )


def load_hub_dataset(spec: str, what: str, fix: str, **kwargs: Any) -> Any:
    """``datasets.load_dataset(NAME, CONFIG, **kwargs)`` for ``spec`` = ``NAME[:CONFIG]`` (without ``hf:``); every
    failure is one :class:`AotError` naming ``what`` (``corpus 'hf:NAME'``) and ending in ``fix`` (what works
    without the hub)."""
    try:
        import datasets  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise AotError(f"{what} needs HuggingFace datasets: pip install 'aot[hf-data]'") from None
    name, _, config = spec.partition(":")
    offline = bool(datasets.config.HF_HUB_OFFLINE)
    require_hub(spec, what, fix, offline=offline)
    try:
        return datasets.load_dataset(name, config or None, **kwargs)
    except Exception as exc:
        where = " (HF_HUB_OFFLINE is set: only the local datasets cache is read)" if offline else ""
        raise AotError(f"cannot load {what}{where}: {_first_line(exc)}; {fix}") from None
