"""The command-line options several commands share: the experiment options (``--config``, ``--seed``,
``--device``, ``--out``), ``--set`` (every command that takes a config) and those of every ``aot train TASK``
(recipe, model, steps, ...); how every command takes a number; and how a renamed flag keeps working for one release
(:class:`RenamedFlag`).

Numbers. A numeric option of a command without a config is declared with :func:`add_number` and the
:class:`aot.validation.Number` the library states its range with (``aot.eval.sampling.SAMPLE_OPTIONS``, ...):
``--help`` states the range and the default, and the library refuses a value outside it (or NaN / infinity for a
float) before any work, in the words of the config errors (``--top-p=1.5 must be a number in (0, 1]``): one line,
exit status 2, and the same error for a Python caller. A numeric option that sets
a config field is declared with :func:`add_config_number`: the type and range come from the field (its type hint
and its class's ``LIMITS``, stated once), ``--help`` states them, and the config check refuses a bad value.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any

from aot.errors import warn_renamed
from aot.train.trainer import PRECISIONS, TrainConfig
from aot.validation import SEED, Limit, Number

#: how ``--seed`` is described (``aot`` checks every command's seed with :func:`aot.validation.check_seed`)
SEED_NUMBER = Number(int, SEED)


#: what --recipe is, said where --preset is given (the old flag of aot train and aot sweep)
RECIPE_WHY = "training recipes; model presets are model.preset, `aot models`"


class RenamedFlag(argparse.Action):
    """An old flag that still works for one release: hidden from ``--help``, it stores into the new flag's ``dest``
    and says once, as one line, that it is renamed (:func:`aot.errors.warn_renamed`):

        parser.add_argument("--preset", dest="recipe", action=RenamedFlag, new="--recipe", why=RECIPE_WHY)
    """

    def __init__(self, option_strings: list[str], dest: str, new: str, why: str = "", **kwargs: Any) -> None:
        kwargs.setdefault("default", argparse.SUPPRESS)  # the new flag's default stands
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)
        self.new, self.why = new, why

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        warn_renamed(str(option_string), self.new, self.why, kind="flag")
        setattr(namespace, self.dest, values)


def add_recipe_arg(parser: argparse.ArgumentParser, default: str | None, help_text: str) -> None:
    """``--recipe NAME`` (a training recipe) and its old name ``--preset`` (one release, one line when used)."""
    parser.add_argument("--recipe", default=default, metavar="RECIPE", help=help_text)
    parser.add_argument("--preset", dest="recipe", action=RenamedFlag, new="--recipe", why=RECIPE_WHY)


def _with_range(help_text: str, description: str, default: Any) -> str:
    shown = "" if default is None or default is argparse.SUPPRESS else f"; default: {default}"
    return f"{help_text} ({description}{shown})"


def add_number(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, flag: str, kind: Number, help: str, **kwargs: Any
) -> argparse.Action:
    """``parser.add_argument(flag, type=kind, ...)`` with the range (and the default) said in ``--help``."""
    named = kind.named(flag)
    text = _with_range(help, named.describe(), kwargs.get("default"))
    return parser.add_argument(flag, type=named, help=text, **kwargs)


def add_config_number(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    config: type,
    name: str,
    help: str,
    *,
    show_default: bool = True,
    **kwargs: Any,
) -> argparse.Action:
    """A flag that sets config field ``config.name``: its type from the field's hint (int / float), the range
    from ``config.LIMITS`` (and, with ``show_default``, the field's default) said in ``--help``. The value is
    checked with the config (one line naming ``section.name``), so this only parses the number."""
    hint = typing.get_type_hints(config)[name]
    kind = int if int in (hint, *typing.get_args(hint)) else float
    limit = getattr(config, "LIMITS", {}).get(name, Limit())
    spec = {f.name: f for f in dataclasses.fields(config)}[name]
    default = spec.default if spec.default is not dataclasses.MISSING else None
    if spec.default_factory is not dataclasses.MISSING:
        default = spec.default_factory()
    if not show_default:
        default = None
    description = Number(kind, limit).describe()
    return parser.add_argument(flag, type=kind, help=_with_range(help, description, default), **kwargs)


def add_experiment_args(parser: argparse.ArgumentParser, default_out: str) -> None:
    """The options every experiment command shares."""
    group = parser.add_argument_group("experiment")
    group.add_argument("--config", metavar="FILE", help="YAML or JSON config; command-line options override it")
    group.add_argument("--seed", type=int, default=0, help=_with_range("random seed", SEED_NUMBER.describe(), 0))
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
    parser: argparse.ArgumentParser, recipes: dict[str, dict[str, Any]], default_recipe: str, default_out: str
) -> None:
    """The options every ``aot train TASK`` has: recipe, model, steps, batch, lr, precision, compile, resume,
    ``--set``, ``--dump-config`` and the experiment options (config, seed, device, out)."""
    add_recipe_arg(
        parser,
        default_recipe,
        f"training recipe: {', '.join(recipes)} (default: {default_recipe}); was --preset",
    )
    parser.add_argument("--model", help="model preset (see `aot models`); replaces the training recipe's model")
    add_config_number(parser, "--steps", TrainConfig, "steps", "optimizer steps", show_default=False)
    add_config_number(
        parser,
        "--batch-size",
        TrainConfig,
        "batch_size",
        "global batch size (all processes together)",
        show_default=False,
    )
    add_config_number(parser, "--lr", TrainConfig, "lr", "peak learning rate", show_default=False)
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
