"""The command-line options several commands share: the experiment options (``--config``, ``--seed``,
``--device``, ``--out``), ``--set`` (every command that takes a config) and those of every ``aot train TASK``
(preset, model, steps, ...)."""

from __future__ import annotations

import argparse
from typing import Any

from aot.train.trainer import PRECISIONS


def add_experiment_args(parser: argparse.ArgumentParser, default_out: str) -> None:
    """The options every experiment command shares."""
    group = parser.add_argument_group("experiment")
    group.add_argument("--config", metavar="FILE", help="YAML or JSON config; command-line options override it")
    group.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    group.add_argument(
        "--device", default="auto", help="cpu, cuda, cuda:N or auto (cuda when available; default: auto)"
    )
    group.add_argument(
        "--out",
        metavar="DIR",
        default=default_out,
        help=f"folder for results.json and figures (default: {default_out})",
    )


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set SECTION.FIELD=VALUE`` (repeatable), the last layer of a config (:mod:`aot.layering`)."""
    parser.add_argument(
        "--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", help="override any field (repeatable)"
    )


def add_train_args(
    parser: argparse.ArgumentParser, presets: dict[str, dict[str, Any]], default_preset: str, default_out: str
) -> None:
    """The options every ``aot train TASK`` has: preset, model, steps, batch, lr, precision, compile, resume,
    ``--set``, ``--dump-config`` and the experiment options (config, seed, device, out)."""
    parser.add_argument(
        "--preset",
        default=default_preset,
        help=f"training preset: {', '.join(presets)} (default: {default_preset})",
    )
    parser.add_argument("--model", help="model preset (see `aot models`); replaces the training preset's model")
    parser.add_argument("--steps", type=int, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, help="global batch size (all processes together)")
    parser.add_argument("--lr", type=float, help="peak learning rate")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="auto (default): bf16 autocast where it is measured faster on this machine (cached), else fp32; "
        "or bf16 / fp32",
    )
    parser.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    parser.add_argument(
        "--resume",
        nargs="?",
        const="yes",
        choices=("yes", "auto"),
        help="continue the run in --out exactly from its last good checkpoint (an error when there is none); "
        "`--resume auto`: resume when there is a checkpoint, else start",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="start over in an --out that holds a run: the old run is moved to a sibling folder OUT.old-N",
    )
    add_set_option(parser)
    parser.add_argument("--dump-config", action="store_true", help="print the merged config as YAML and exit")
    add_experiment_args(parser, default_out=default_out)
    # no default: the seed comes from the config (train.seed, default 0) unless --seed is given, so that a
    # dumped config fed back with --config reproduces the run
    parser.set_defaults(seed=None)


def train_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The ``train`` section set by the shared flags of :func:`add_train_args` (those given)."""
    given = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "precision": args.precision,
        "compile": args.compile,
        "seed": args.seed,
    }
    return {"train": {k: v for k, v in given.items() if v is not None}}


def fit_options(args: argparse.Namespace) -> dict[str, Any]:
    """``Trainer.fit``'s run-folder options from the shared flags: ``resume`` (``no``/``yes``/``auto``), ``force``."""
    return {"resume": args.resume or "no", "force": bool(args.force)}
