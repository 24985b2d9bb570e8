"""Starting Python again from inside the package — a report's steps, a memory probe, pip — without the caller's
working directory on ``sys.path``.

``python -m MODULE`` puts the working directory first on ``sys.path``, so a ``yaml.py`` (or any module name the
package imports) lying in the folder ``aot reproduce`` was started in would be imported, and run, by every step.
:func:`module_argv` is the one way the package starts a module of itself (or of an installed tool): ``python -P -m
MODULE`` where Python has ``-P`` (3.11+), else ``python -c BOOTSTRAP MODULE``, whose bootstrap drops the entry
``-c`` put first on ``sys.path`` (the working directory, written ``''``) before it imports anything and then runs
the module as ``-m`` would (:func:`runpy.run_module`, ``__main__``, ``sys.argv[0]`` the module's file). Entries
the user put on ``PYTHONPATH`` are kept either way, as ``-P`` keeps them. :func:`torchrun_argv` does the same for
``torchrun``: the launcher runs through :func:`module_argv` and starts each worker with ``--no-python`` as
:func:`module_argv` would, not as ``python -u -m MODULE``.
"""

from __future__ import annotations

import sys

#: what ``python -c`` runs on a Python without ``-P``: drop the working directory, then run argv[1] as ``-m`` would
BOOTSTRAP = (
    "import sys; sys.path[:1] = [] if sys.path[:1] == [''] else sys.path[:1]; "
    "import runpy; module = sys.argv.pop(1); runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


def has_safe_path_flag(version: tuple[int, ...] | None = None) -> bool:
    """Whether this Python (or ``version``) has ``-P`` (do not prepend the working directory to ``sys.path``)."""
    return (version or sys.version_info[:2]) >= (3, 11)


def module_argv(module: str, *, safe_path_flag: bool | None = None) -> list[str]:
    """The argv prefix that runs ``module`` (``aot.cli``, ``pip``, ...) with this interpreter, the working directory
    kept off ``sys.path``; append the module's own arguments. ``safe_path_flag``: use ``-P`` (default: where this
    Python has it) or the bootstrap."""
    if has_safe_path_flag() if safe_path_flag is None else safe_path_flag:
        return [sys.executable, "-P", "-m", module]
    return [sys.executable, "-c", BOOTSTRAP, module]


def torchrun_argv(launcher_options: list[str], module: str) -> list[str]:
    """``torchrun LAUNCHER_OPTIONS -m MODULE`` with neither torchrun nor its workers importing from the working
    directory: torchrun itself through :func:`module_argv` (``torch.distributed.run``), its workers started
    ``--no-python`` as :func:`module_argv` ``(module)``."""
    return [*module_argv("torch.distributed.run"), *launcher_options, "--no-python", *module_argv(module)]
