"""A scaling study as ``aot sweep --file`` runs it: issue 27's method, read from a sweep file of ``kind: scaling``
(benchmarks/scaling/cpu.yaml, gpu-a.yaml, gpu-b.yaml).

- families (a model preset each) grow in width at a fixed depth; each width is a *size*;
- budgets: training lengths in steps, or in tokens per non-embedding parameter (steps rounded);
- the lr: fixed, or a rule measured by sweeps at two sizes (:mod:`aot.sweep.scaling.lr_rule`: a sweep extended along
  a ladder while its best lr is at an edge, the best read off a parabola, carried to every size in log N);
- one WSD run per (family, size, seed) to its largest budget, keeping the stable-phase checkpoints where each
  smaller budget's cooldown starts, and a cooldown branch per smaller budget
  (``aot train lm --branch-from``): exactly the run of that budget from scratch (tests/train/test_wsd_branch.py);
- optional checks: cosine runs from scratch beside the WSD rows, and runs with a token shift (issue 29).

The file is read by :mod:`aot.sweep.scaling.study_file`. A trial's key is its run folder under the file's ``runs``
folder (``main/gpt2-d64-s0-2000``), so a store's rows keep their identity however they were run.
:class:`ScalingStudy` is what :class:`aot.sweep.execute.Study` asks for; it and its trials hold plain values only,
since a launcher pickles them into cluster jobs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from aot.bench.flops import training_flops_per_sample
from aot.config import ModelConfig
from aot.errors import ConfigError
from aot.sweep.execute import Execution
from aot.sweep.grid import Plan
from aot.sweep.render import table
from aot.sweep.scaling.lr_rule import log_linear_lr, stable_checkpoint, sweep_losses, sweep_lrs, swept_lr
from aot.sweep.scaling.runs import STUDY_KIND
from aot.sweep.scaling.study_file import (
    UNITS,
    Budgets,
    CosineCheck,
    Family,
    Fields,
    LrRule,
    Remedy,
    SeedRule,
    read_cosine,
    read_data,
    read_family,
    read_lr,
    read_remedy,
    read_seed,
    read_sets,
)
from aot.sweep.spec import SweepSpec, renamed_fields
from aot.sweep.store import STORE_FILE
from aot.sweep.training import build_run, finished_results
from aot.tasks import TaskRun, get_task

TASK = "lm"
#: the row fields that name a config of a scaling store (what its ``sweep`` entry declares)
GROUP = ("kind", "family", "n_embd", "steps", "token_shift")
#: the top folder of each kind of run under the study's runs folder
FOLDERS = {"sweep": "sweep", "main": "main", "branch": "main", "cosine": "cosine", "remedy": "remedy"}


class ModelFacts(NamedTuple):
    """What the plan needs of a (family, size): its model config (the data's vocabulary), N non-embedding
    parameters, sequences per step and training FLOPs per sequence (None: no analytic count)."""

    config: ModelConfig
    non_embedding: int
    batch_size: int
    flops_per_sample: float | None

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.config.block_size


@functools.cache
def model_facts(recipe: str, model: str, sets: tuple[str, ...], data: tuple[tuple[str, str], ...]) -> ModelFacts:
    """:class:`ModelFacts` of the lm run of training recipe ``recipe`` with ``model`` and ``sets`` on ``data`` (its
    fields), the model built on the meta device (no memory); cached, since the lr rule asks for every size on each
    plan."""
    import torch

    from aot.models import build_model

    run = build_run(TASK, recipe, list(sets), model, flags={"data": dict(data)} if data else None)
    config, _ = get_task(TASK).planned_model(run)  # the data's vocabulary, known before any data is read
    with torch.device("meta"):
        params = int(build_model(config).num_params(non_embedding=True))
    flops = training_flops_per_sample(config, config.block_size)
    return ModelFacts(config, params, int(run.train.batch_size), flops)


TOP_REQUIRED = ("kind", "runs", "recipe", "data", "families", "budgets", "lr", "seeds")
TOP_OPTIONAL = ("title", "sets", "head_dim", "schedule", "cosine", "remedy", "order", "device", "launcher")


@dataclass(frozen=True)
class ScalingStudy:
    """A scaling study read from a sweep file (see the module and benchmarks/scaling/cpu.yaml, whose comments say
    what each field means). ``launcher``: the file's launcher settings, passed through untouched."""

    source: str
    runs: str
    recipe: str  # the lm training recipe every run starts from (``recipe:``; was ``preset:``)
    data: tuple[tuple[str, str], ...]
    families: tuple[Family, ...]
    budgets: Budgets
    lr: LrRule
    seeds: tuple[SeedRule, ...]
    title: str = "Scaling study"
    train_tokens: int | None = None
    model_sets: tuple[str, ...] = ()
    recipe_sets: tuple[str, ...] = ()
    size_budgets: tuple[tuple[int, Budgets], ...] = ()
    head_dim: int | None = None
    schedule: str = "wsd"
    decay_fraction: float = 0.2
    cosine: tuple[CosineCheck, ...] = ()
    remedy: Remedy | None = None
    first_sizes: int | None = None
    last: tuple[str, ...] = ()
    device: str | None = None
    launcher: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    # -- reading ------------------------------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path) -> ScalingStudy:
        """The study of the YAML sweep file at ``path``."""
        import yaml

        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot be read as YAML ({str(exc).splitlines()[0]})") from None
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: Any, source: str) -> ScalingStudy:
        """The study of a sweep file's mapping (``source``: its name, for errors); a one-line ConfigError naming
        the field for an unknown or missing field, a bad value or an unknown model preset."""
        f = Fields(source)
        if isinstance(data, Mapping):
            data = renamed_fields(data, source)
        top = f.mapping(data, "the study", TOP_REQUIRED, TOP_OPTIONAL)
        if top["kind"] != STUDY_KIND:
            raise f.error("kind", f"must be {STUDY_KIND!r} for a scaling study, not {top['kind']!r}")
        named = f.named(top["families"], "families", "family names to their label, model, n_layer and widths")
        families = tuple(read_family(f, name, spec) for name, spec in named.items())
        budgets = f.mapping(top["budgets"], "budgets", (), (*UNITS, "sizes"))
        every = f.budgets(budgets, "budgets")
        sizes = f.named(budgets["sizes"], "budgets.sizes", "size indices to budgets") if "sizes" in budgets else {}
        sets = f.mapping(top.get("sets", {}), "sets", (), ("model", "recipe"))
        schedule = f.mapping(top.get("schedule", {}), "schedule", (), ("name", "decay_fraction"))
        order = f.mapping(top.get("order", {}), "order", (), ("first_sizes", "last"))
        launcher = top.get("launcher", {})
        if not isinstance(launcher, dict):
            raise f.error(
                "launcher", f"must be a mapping (gpus, cpus, mem, time, partition, account), not {launcher!r}"
            )
        data_fields, train_tokens = read_data(f, top["data"])
        study = cls(
            source=source,
            runs=f.text(top["runs"], "runs"),
            recipe=f.text(top["recipe"], "recipe"),
            data=data_fields,
            families=families,
            budgets=every,
            lr=read_lr(f, top["lr"]),
            seeds=f.listed(top["seeds"], "seeds", read_seed(f)),
            title=f.text(top.get("title", cls.title), "title"),
            train_tokens=train_tokens,
            model_sets=read_sets(f, sets.get("model"), "sets.model"),
            recipe_sets=read_sets(f, sets.get("recipe"), "sets.recipe"),
            size_budgets=tuple(
                (f.integer(size, "budgets.sizes"), Budgets(every.unit, f.listed(v, f"budgets.sizes.{size}", f.number)))
                for size, v in sizes.items()
            ),
            head_dim=None if "head_dim" not in top else f.integer(top["head_dim"], "head_dim", 1),
            schedule=f.text(schedule.get("name", "wsd"), "schedule.name"),
            decay_fraction=f.number(schedule.get("decay_fraction", 0.2), "schedule.decay_fraction"),
            cosine=f.listed(top["cosine"], "cosine", read_cosine(f)) if top.get("cosine") else (),
            remedy=read_remedy(f, top["remedy"]) if top.get("remedy") else None,
            first_sizes=None if "first_sizes" not in order else f.integer(order["first_sizes"], "order.first_sizes"),
            last=f.listed(order["last"], "order.last", f.text) if order.get("last") else (),
            device=None if top.get("device") is None else f.text(top["device"], "device"),
            launcher=dict(launcher),
        )
        study.check_names()
        return study

    def check_names(self) -> None:
        """Every family, size and preset the file names exists, and the lr and schedule rules are whole (one line
        each otherwise)."""
        from aot.models.presets import get_preset

        f = Fields(self.source)
        for family in self.families:
            try:
                get_preset(family.model)
            except ConfigError as exc:
                raise f.error(f"families.{family.name}.model", str(exc)) from None
            if family.widths and family.n_layer is None:
                raise f.error(f"families.{family.name}", "widths need n_layer (the family's depth)")
            if family.widths and (family.head_dim or self.head_dim) is None:
                raise f.error(f"families.{family.name}", "widths need head_dim (the study's or the family's)")
        for name in (*(c.family for c in self.cosine), *([self.remedy.family] if self.remedy else []), *self.last):
            self.family(name)
        for where, family, size in self.named_sizes():
            if not -len(family.sizes) <= size < len(family.sizes):
                raise f.error(where, f"size {size} is not one of {family.name}'s {len(family.sizes)} sizes")
        if self.lr.value is None and not set(self.lr.first) <= set(self.lr.ladder):
            raise f.error("lr", "every lr of sweep must be on the ladder (the sweep extends along it)")
        if self.schedule not in ("wsd", "cosine"):
            raise f.error("schedule.name", f"must be wsd or cosine, not {self.schedule!r}")

    def named_sizes(self) -> list[tuple[str, Family, int]]:
        """(where the file says it, family, size index) for every size the file names."""
        every = [
            *((f"budgets.sizes.{size}", size) for size, _ in self.size_budgets),
            *((f"seeds[{i}].size", r.size) for i, r in enumerate(self.seeds) if r.size is not None),
            *(("lr.sizes", size) for size in self.lr.sizes),
        ]
        out = [(where, family, size) for where, size in every for family in self.families]
        out += [(f"cosine[{i}].size", self.family(c.family), c.size) for i, c in enumerate(self.cosine)]
        if self.remedy:
            family = self.family(self.remedy.family)
            out += [(f"remedy.runs[{i}].size", family, r.size) for i, r in enumerate(self.remedy.runs)]
        return out

    def family(self, name: str) -> Family:
        """The family called ``name``; one line naming the file's families otherwise."""
        for family in self.families:
            if family.name == name:
                return family
        known = ", ".join(f.name for f in self.families)
        raise ConfigError(f"{self.source}: no family {name!r}; the file's families: {known}")

    # -- what Study asks for ---------------------------------------------------------------------------------------

    @property
    def task(self) -> str:
        return TASK

    def check(self) -> None:
        """Every (family, size) builds into a valid run config (an unknown field or a bad value of the recipe:
        one line), and a study of several budgets has WSD runs to branch from."""
        if self.schedule != "wsd" and any(len(s) > 1 for f in self.families for s in self.all_budgets(f)):
            raise Fields(self.source).error(
                "schedule.name", "several budgets per run need wsd: the smaller ones are its cooldown branches"
            )
        lr = self.lr.value or self.lr.first[0]
        for family in self.families:
            for size in family.sizes:
                try:
                    steps = self.steps(family, size, self.budgets_at(size))
                    self.trial("main", family, size, self.sweep_seed, steps[-1], lr).build()
                except ConfigError as exc:
                    raise ConfigError(f"{self.source}: the run of {family.name} at size {size}: {exc}") from None

    def plan(self, store: dict[str, Any]) -> Plan[ScalingTrial]:
        """Every trial in the order they start (:meth:`priority`): ``runs`` those that can start now (or have
        finished), ``pending`` those that wait: sizes whose lr rule needs an unfinished sweep, branches whose
        parent's kept checkpoint does not exist yet."""
        rows = store["runs"]
        recorded = {r.get("key") for r in rows}
        runs = Path(self.runs)
        plan: Plan[ScalingTrial] = Plan()
        for trial in sorted(self.trials(rows, recorded), key=self.priority):
            (plan.runs if trial.ready(runs, recorded) else plan.pending).append(trial)
        return plan

    def execution(self, out: Path, device: str = "auto", log: Callable[[str], None] = print) -> Execution:
        """Runs train in the file's ``runs`` folder, rows land in ``out/results.json``; on the file's device unless
        ``device`` names one."""
        chosen = device if device != "auto" or self.device is None else self.device
        return Execution(Path(self.runs), Path(out) / STORE_FILE, self.row_of, self.spec(), chosen, log=log)

    def spec(self) -> SweepSpec:
        """How the store's rows are read: a config is (kind, family, width, steps, token shift); ``kind: scaling``
        tells :func:`aot.sweep.scaling.runs.read_scaling_runs` to read every run (the lr is a rule's)."""
        return SweepSpec(TASK, self.recipe, GROUP, "val_loss", extra={"kind": STUDY_KIND, "runs": self.runs})

    def markdown(self, store: dict[str, Any]) -> str:
        """A line per recorded run of the plan, in its order: kind, folder, tokens, lr, val loss ± SE."""
        by_key = {r.get("key"): r for r in store["runs"]}
        plan = self.plan(store)
        done = [(t, by_key[t.key]) for t in [*plan.runs, *plan.pending] if t.key in by_key]
        rows = [[t.kind, t.key, f"{r['tokens'] / 1e6:.3g} M", f"{r['lr']:.3g}", _loss(r)] for t, r in done]
        total = len(plan.runs) + len(plan.pending)
        lines = [f"# {self.title}", "", f"{len(done)} of {total} runs recorded ({len(plan.pending)} wait).", ""]
        lines += table(["kind", "run", "tokens", "lr", "val loss ± SE"], rows)
        return "\n".join(lines) + "\n"

    # -- sizes, budgets, lrs ------------------------------------------------------------------------------------

    def facts(self, family: Family, size: int) -> ModelFacts:
        """:class:`ModelFacts` of ``family`` at ``size`` with the study's recipe (its batch, its context)."""
        sets = (*self.shape_sets(family, size), *self.model_sets, *self.recipe_sets)
        return model_facts(self.recipe, family.model, sets, self.data)

    def shape_sets(self, family: Family, size: int) -> list[str]:
        """The ``--set`` of a size's shape: depth, width, heads (none for a family of the preset's own shape)."""
        if not family.widths:
            return []
        width = family.widths[size]
        head_dim = family.head_dim or self.head_dim
        assert family.n_layer is not None and head_dim is not None  # check_names
        return [f"model.n_layer={family.n_layer}", f"model.n_embd={width}", f"model.n_head={width // head_dim}"]

    def width(self, family: Family, size: int) -> int:
        return family.widths[size] if family.widths else self.facts(family, size).config.n_embd

    def non_embedding(self, family: Family, size: int) -> int:
        return self.facts(family, size).non_embedding

    def budgets_at(self, size: int) -> Budgets:
        return dict(self.size_budgets).get(size, self.budgets)

    def all_budgets(self, family: Family) -> list[tuple[int, ...]]:
        """The steps of every (size, seed) run chain of ``family``."""
        return [steps for size in family.sizes for _, steps in self.seed_budgets(family, size)]

    def steps(self, family: Family, size: int, budgets: Budgets) -> tuple[int, ...]:
        """``budgets`` in steps at ``size``: as given, or tokens per parameter × N / tokens per step, rounded."""
        if budgets.unit == "steps":
            return tuple(int(v) for v in budgets.values)
        facts = self.facts(family, size)
        return tuple(max(1, round(v * facts.non_embedding / facts.tokens_per_step)) for v in budgets.values)

    def size_index(self, family: Family, size: int) -> int:
        return size % len(family.sizes)

    def seed_budgets(self, family: Family, size: int) -> list[tuple[int, tuple[int, ...]]]:
        """(seed, the steps of its budgets, longest last) of each seed rule that covers ``size``."""
        return [
            (rule.seed, self.steps(family, size, rule.budgets or self.budgets_at(size)))
            for rule in self.seeds
            if rule.size is None or self.size_index(family, rule.size) == size
        ]

    @property
    def sweep_seed(self) -> int:
        """The seed of the lr sweeps (the first seed rule's)."""
        return self.seeds[0].seed

    def lr_at(self, rows: Sequence[Mapping[str, Any]], family: Family, size: int) -> float | None:
        """The lr of ``family`` at ``size``: the file's, or :func:`log_linear_lr` through the swept sizes' best lrs
        (:func:`swept_lr`); None until both sweeps have finished."""
        rule = self.lr
        if rule.value is not None:
            return rule.value
        anchors = []
        for swept in rule.sizes:
            best = swept_lr(sweep_losses(rows, family.name, swept), rule.first, rule.ladder)
            if best is None:
                return None
            anchors.append((self.non_embedding(family, swept), best))
        return log_linear_lr(anchors, self.non_embedding(family, size))

    # -- trials -------------------------------------------------------------------------------------------------

    def trial(
        self, kind: str, family: Family, size: int, seed: int, steps: int, lr: float | None, **more: Any
    ) -> ScalingTrial:
        return ScalingTrial(self, kind, family.name, size, seed, steps, lr, **more)

    def trials(self, rows: Sequence[Mapping[str, Any]], recorded: set[Any]) -> list[ScalingTrial]:
        """Every trial, before :meth:`priority` orders them: the sweeps (smallest swept size first), then each
        family's runs and branches, the cosine check and the remedy runs."""
        return [
            *self.sweep_trials(rows),
            *self.main_trials(rows, recorded),
            *self.cosine_trials(rows),
            *self.remedy_trials(rows),
        ]

    def sweep_trials(self, rows: Sequence[Mapping[str, Any]]) -> list[ScalingTrial]:
        rule, trials = self.lr, []
        if rule.value is not None or rule.budget is None:
            return []
        for family in self.families:
            for size in rule.sizes:
                steps = self.steps(family, size, rule.budget)[0]
                for lr in sweep_lrs(sweep_losses(rows, family.name, size), rule.first, rule.ladder):
                    trials.append(self.trial("sweep", family, size, self.sweep_seed, steps, lr))
        return sorted(trials, key=lambda t: t.size)  # the cheap smallest size of every family first

    def main_trials(self, rows: Sequence[Mapping[str, Any]], recorded: set[Any]) -> list[ScalingTrial]:
        """The WSD run of each (family, size, seed) to its largest budget, keeping the stable-phase checkpoints of
        the others, then a cooldown branch per other budget. A branch whose parent is recorded but whose kept
        checkpoint is gone (a fresh machine: runs/ is not in git) is the from-scratch run of its budget, the same
        run (tests/train/test_wsd_branch.py) at five times a branch's cost, not the parent's retraining."""
        trials = []
        for family in self.families:
            for size in family.sizes:
                lr = self.lr_at(rows, family, size)
                for seed, steps in self.seed_budgets(family, size):
                    keep = tuple(stable_checkpoint(s, self.decay_fraction) for s in steps[:-1])
                    main = self.trial("main", family, size, seed, steps[-1], lr, keep=keep)
                    trials.append(main)
                    for short in steps[:-1]:
                        branch = self.trial("branch", family, size, seed, short, lr, branch_of=main.key)
                        parent = branch.parent(Path(self.runs))
                        if main.key in recorded and parent is not None and not parent.is_dir():
                            branch = replace(branch, branch_of=None)
                        trials.append(branch)
        return trials

    def cosine_trials(self, rows: Sequence[Mapping[str, Any]]) -> list[ScalingTrial]:
        trials = []
        for check in self.cosine:
            family = self.family(check.family)
            lr = self.lr_at(rows, family, check.size)
            for seed in check.seeds:
                for steps in self.steps(family, check.size, check.budgets):
                    trials.append(self.trial("cosine", family, check.size, seed, steps, lr))
        return trials

    def remedy_trials(self, rows: Sequence[Mapping[str, Any]]) -> list[ScalingTrial]:
        if self.remedy is None:
            return []
        family = self.family(self.remedy.family)
        return [
            self.trial(
                "remedy",
                family,
                r.size,
                r.seed,
                self.steps(family, r.size, self.remedy.budget)[0],
                self.lr_at(rows, family, r.size),
                token_shift=r.shift,
            )
            for r in self.remedy.runs
        ]

    def priority(self, trial: ScalingTrial) -> tuple[float, int, int]:
        """The order trials start in, so that wherever a sitting stops the grid done is the most useful one: the
        sweeps, then the sweep seed's runs size by size (every family at a size before the next size; the cosine
        check at the sweep seed and the token-shift runs after the first ``order.first_sizes`` sizes), then the
        other seeds, then every family's largest size, then the ``order.last`` families (the costliest). A branch
        keeps its place after its main run (the sort is stable)."""
        family = self.family(trial.family)
        if family.name in self.last:
            stage = 5.0
        elif trial.kind == "sweep":
            stage = 0.0
        elif trial.kind == "cosine":
            stage = 1.5 if trial.seed == self.sweep_seed else 3.0
        elif trial.kind == "remedy":
            stage = 1.7
        elif trial.size == len(family.sizes) - 1:
            stage = 4.0
        elif trial.seed != self.sweep_seed:
            stage = 3.0
        else:
            first = len(family.sizes) if self.first_sizes is None else self.first_sizes
            stage = 1.0 if trial.size < first else 2.0
        return stage, trial.size, [f.name for f in self.families].index(family.name)

    # -- the command line and the row --------------------------------------------------------------------------

    def base_argv(self, family: Family) -> list[str]:
        """``aot train lm`` of ``family``'s model on the study's recipe and data."""
        flags = {"corpus": "--corpus", "shards": "--data", "tokenizer": "--tokenizer"}
        data = [a for name, value in self.data for a in (flags[name], value)]
        return ["train", TASK, "--recipe", self.recipe, "--model", family.model, *data, "--resume", "auto"]

    def device_argv(self) -> list[str]:
        return ["--device", self.device] if self.device else []

    def row_of(self, trial: ScalingTrial, results: dict[str, Any], folder: Path) -> dict[str, Any]:
        """A store row of a finished trial: what it is, its size, budget and lr, then its numbers (val / test loss
        over the whole split with standard errors), the machine, and how it was run."""
        family = self.family(trial.family)
        facts = self.facts(family, trial.size)
        tokens = trial.steps * facts.tokens_per_step
        flops = facts.flops_per_sample
        machine = results["machine"]
        parent = trial.parent(Path(self.runs))
        return {
            "kind": trial.kind,
            "family": trial.family,
            "size": trial.size,
            "n_layer": facts.config.n_layer,
            "n_embd": facts.config.n_embd,
            "non_embedding_params": results["model"]["non_embedding_params"],
            "params": results["model"]["params"],
            "steps": trial.steps,
            "tokens": tokens,
            "epochs": None if self.train_tokens is None else tokens / self.train_tokens,
            "lr": trial.lr,
            "seed": trial.seed,
            "training_flops": None if flops is None else flops * (trial.steps * facts.batch_size),
            "val_loss": results["val"]["loss"],
            "val_loss_se": results["val"].get("loss_se"),
            "val_windows": results["val"].get("windows"),
            "test_loss": results["test"]["loss"],
            "test_loss_se": results["test"].get("loss_se"),
            "precision": results["train"]["precision"]["precision"],
            "train_seconds": results["train"]["train_seconds"],
            "cpu": machine.get("processor") or machine.get("machine"),
            "device": machine.get("gpu", self.device) if self.device not in (None, "cpu") else "cpu",
            "date": machine.get("date"),
            "token_shift": trial.token_shift,
            "branched_from": None if parent is None else str(parent),
            "run_dir": str(folder),
            "command": "aot " + " ".join(trial.argv(Path(self.runs))),
        }


@dataclass(frozen=True)
class ScalingTrial:
    """One run of a :class:`ScalingStudy`: its ``kind`` (sweep, main, branch, cosine, remedy), family, size, seed,
    steps and lr (None: waits for the lr rule); a main run's ``keep`` (the kept checkpoints' steps), a branch's
    ``branch_of`` (the key of the main run it branches from; None: trained from scratch), a remedy's
    ``token_shift``."""

    study: ScalingStudy
    kind: str
    family: str
    size: int
    seed: int
    steps: int
    lr: float | None
    keep: tuple[int, ...] = ()
    branch_of: str | None = None
    token_shift: str = "none"

    @property
    def task(self) -> str:
        return TASK

    @property
    def name(self) -> str:
        """The run folder's name: family, width, then the lr (a sweep) or seed and steps."""
        width = self.study.width(self.study.family(self.family), self.size)
        if self.kind == "sweep":
            return f"{self.family}-d{width}-lr{self.lr:g}"
        shift = f"-shift-{self.token_shift}" if self.kind == "remedy" else ""
        return f"{self.family}{shift}-d{width}-s{self.seed}-{self.steps}"

    @property
    def key(self) -> str:
        return f"{FOLDERS[self.kind]}/{self.name}"

    def folder(self, runs: Path) -> Path:
        return Path(runs) / self.key

    def parent(self, runs: Path) -> Path | None:
        """The main run's checkpoint at this branch's cooldown start (None: not a branch, or from scratch)."""
        if self.branch_of is None:
            return None
        return (
            Path(runs) / self.branch_of / f"checkpoint-step{stable_checkpoint(self.steps, self.study.decay_fraction)}"
        )

    def ready(self, runs: Path, recorded: set[Any]) -> bool:
        """Whether it can start now: it has finished (recorded, or a whole results.json in its folder), or it has
        its lr and, as a branch, its parent's kept checkpoint."""
        if self.key in recorded or finished_results(self.folder(runs)) is not None:
            return True
        parent = self.parent(runs)
        return self.lr is not None and (parent is None or parent.is_dir())

    def sets(self) -> list[str]:
        """The ``--set`` of its run from scratch: shape, the study's model settings, its own, then its length, lr
        (none while it waits for the lr rule: the preset's, enough to plan its cost), seed, schedule, the recipe and
        what it keeps."""
        study, family = self.study, self.study.family(self.family)
        schedule = "cosine" if self.kind == "cosine" else study.schedule
        model = [f"model.token_shift={self.token_shift}"] if self.kind == "remedy" else []
        lr = [] if self.lr is None else [f"train.lr={self.lr:g}"]
        shape = [f"train.decay_fraction={study.decay_fraction}"] if schedule == "wsd" else []
        keep = [f"train.keep_checkpoints=[{','.join(str(s) for s in self.keep)}]"] if self.kind == "main" else []
        return [
            *study.shape_sets(family, self.size), *study.model_sets, *model,
            f"train.steps={self.steps}", *lr, f"train.seed={self.seed}",
            f"train.schedule={schedule}", *shape, *study.recipe_sets, *keep,
        ]  # fmt: skip

    def build(self) -> TaskRun:
        """Its run config; a branch's is its parent's with ``train.steps`` of its budget (and nothing kept), which is
        the config of the same run from scratch."""
        data = dict(self.study.data)
        return build_run(TASK, self.study.recipe, self.sets(), self.study.family(self.family).model,
                         flags={"data": data} if data else None)  # fmt: skip

    def argv(self, runs: Path) -> list[str]:
        """``aot train lm ...`` of this run into its folder; a branch's starts from its parent's checkpoint."""
        out, device = ["--out", str(self.folder(runs))], self.study.device_argv()
        parent = self.parent(runs)
        if parent is not None:
            steps = ["--set", f"train.steps={self.steps}"]
            return ["train", TASK, "--branch-from", str(parent), *steps, "--resume", "auto", *out, *device]
        sets = [a for item in self.sets() for a in ("--set", item)]
        return [*self.study.base_argv(self.study.family(self.family)), *sets, *out, *device]

    def describe(self) -> str:
        lr = "after the sweeps" if self.lr is None else f"{self.lr:.3g}"
        source = f", branching from {self.branch_of}" if self.branch_of else ""
        return f"{self.kind} {self.key}: {self.steps} steps, lr {lr}, seed {self.seed}{source}"


def _loss(row: Mapping[str, Any]) -> str:
    se = row.get("val_loss_se")
    return f"{row['val_loss']:.4f}" + ("" if se is None else f" ± {se:.4f}")


# -- the file's sections --------------------------------------------------------------------------------------
