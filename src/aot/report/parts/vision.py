"""Part ``vision``: AoT-MSSA-V, AoT-MHSA-V, ViT and CRATE trained with ``aot train vision`` at matched parameters,
their test top-1 beside the paper's ImageNet-1K table, and the class token's attention maps of the AoT-MSSA-V model
drawn with ``aot viz attention`` (the paper's attention-map figure).

The CPU scales train the ~0.8M-parameter training recipes (``fashion-*``) on Fashion-MNIST (Debian
``dataset-fashion-mnist``; ``--data images=SPEC`` picks another set: mnist, digits, a class folder, hf:NAME);
``tiny`` uses scikit-learn's 8×8 digits so that tests run in seconds. ``paper`` is the paper-size recipes
(``imagenet-*``) on an ImageNet folder under torchrun.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aot.data.images import FASHION_MNIST_INSTALL, fashion_mnist_installed
from aot.report.document import Block, Table
from aot.report.paper_numbers import IMAGENET, VISION_RECIPE
from aot.report.part import (
    Context,
    Part,
    Plan,
    Step,
    differences_blocks,
    existing_figures,
    figure_blocks,
    fmt_count,
    read_step_results,
)

# (the paper's name, our CPU training recipe, the paper-size training recipe); the paper has no CRATE number
MODELS: tuple[tuple[str, str, str], ...] = (
    ("AoT-MSSA-V", "fashion-mssa", "imagenet-mssa-s"),
    ("AoT-MHSA-V", "fashion-mhsa", "imagenet-mhsa-s"),
    ("ViT-S", "fashion-vit", "imagenet-vit-s"),
    ("CRATE", "fashion-crate", "imagenet-crate-s"),
)
TINY_MODELS = ("AoT-MSSA-V", "ViT-S")
ATTENTION_MODEL = "AoT-MSSA-V"  # the model whose attention maps are drawn
# the sizes of scikit-learn's 8x8 digits (as the digits-quick training recipe)
DIGITS = ["--set", "data.val_size=0.1", "--set", "data.padding=0", "--set", "model.image_size=8",
          "--set", "model.patch_size=2", "--set", "eval.periodic_images=null"]  # fmt: skip
TRAIN: dict[str, list[str]] = {
    "tiny": ["--steps", "4", "--batch-size", "32", "--set", "model.n_layer=1", "--set", "model.n_embd=32",
             "--set", "train.eval_every=2"],
    "quick": ["--steps", "150"],  # 0.35 epochs of Fashion-MNIST (the ablations of benchmarks/vision)
    "full": [],  # the training recipes: one epoch of Fashion-MNIST, as benchmarks/vision
}  # fmt: skip
IMAGES = {"tiny": 3, "quick": 6, "full": 6, "paper": 6}


def _slug(name: str) -> str:
    return name.lower()


def _image_set(ctx: Context) -> str:
    return "digits" if ctx.preset == "tiny" else ctx.data.get("images", "fashion-mnist")


def plan(ctx: Context) -> Plan:
    missing: list[str] = []
    if ctx.preset == "paper":
        gpus = ctx.cuda_devices or 8
        images = ctx.data.get("imagenet", "IMAGENET_DIR")
        launcher = ["torchrun", f"--nproc_per_node={gpus}"]
        steps = [Step(_slug(name), ["train", "vision", "--recipe", big, "--data", images], launcher, True)
                 for name, _, big in MODELS]  # fmt: skip
        if not ctx.cuda_devices:
            missing.append("no CUDA GPU here: the paper's vision models (15M-22M, 200 epochs of ImageNet) need GPUs")
        if "imagenet" not in ctx.data:
            missing.append(
                "no ImageNet given: pass --data imagenet=DIR (its train/ and val/ class folders, or tar shards from "
                "`aot data pack-images`)"
            )
        image_set = images
    else:
        image_set = _image_set(ctx)
        models = [m for m in MODELS if ctx.preset != "tiny" or m[0] in TINY_MODELS]
        extra = [*TRAIN[ctx.preset], *(DIGITS if image_set == "digits" else []), "--set", "train.progress=false"]
        steps = [Step(_slug(name), ["train", "vision", "--recipe", recipe, "--data", image_set, *extra],
                      resumable=ctx.preset == "full") for name, recipe, _ in models]  # fmt: skip
        if image_set == "fashion-mnist" and not fashion_mnist_installed():
            missing.append(
                f"Fashion-MNIST is not installed: run `{FASHION_MNIST_INSTALL}` "
                "(or pass --data images=mnist|digits|DIR)"
            )
    source = ctx.part_dir / _slug(ATTENTION_MODEL)
    draw = ["viz", "attention", str(source), "--images", str(IMAGES[ctx.preset])]
    steps.append(Step("attention", draw, results="attention.npz"))
    settings = {"images": image_set, "models": [s.name for s in steps[:-1]]}
    return Plan(steps, settings, missing=missing)


def collect(part_dir: Path, plan: Plan) -> dict[str, Any]:
    names = {_slug(name): name for name, _, _ in MODELS}
    runs = []
    for step in plan.settings["models"]:
        r = read_step_results(part_dir, plan, step)
        runs.append(
            {
                "paper_model": names[step],
                "step": step,
                "preset": r["config"]["model"]["preset"],
                "block": r["model"]["block"],
                "n_layer": r["model"]["n_layer"],
                "n_embd": r["model"]["n_embd"],
                "norm": r["model"]["norm"],
                "params": r["model"]["params"],
                "data": r["data"]["name"],
                "image_size": r["data"]["image_shape"][-1],
                "classes": r["data"]["num_classes"],
                "epochs": r["train"]["epochs"],
                "steps": r["train"]["steps"],
                "optimizer": r["config"]["train"]["optimizer"],
                "images_per_second": r["train"]["images_per_second"],
                "train_seconds": r["train"]["train_seconds"],
                "test_top1": r["test"]["top1"],
                "test_top5": r["test"]["top5"],
                "val_top1": r["val"]["top1"],
            }
        )
    maps = sorted((part_dir / "attention").glob("attention_layer*.png"))
    figures = {
        str(p.relative_to(part_dir)): f"{ATTENTION_MODEL}: the class token's attention over the patches of test "
        f"images, every head of layer {p.stem.removeprefix('attention_layer')}, and the mean over layers and heads "
        "(title: true → predicted class)"
        for p in maps
    }
    figures.update(existing_figures(part_dir, {"aot-mssa-v/loss_curve.png": f"{ATTENTION_MODEL}: training loss"}))
    return {"runs": runs, "figures": figures}


def render(results: dict[str, Any], part_dir: Path) -> list[Block]:
    paper = {v.name: v for v in IMAGENET}
    rows = []
    for r in results["runs"]:
        p = paper.get(r["paper_model"])
        rows.append(
            [
                r["paper_model"],
                f"`{r['preset']}` {r['n_layer']} × {r['n_embd']}",
                fmt_count(r["params"]),
                f"{r['epochs']:.2f}",
                f"{100 * r['test_top1']:.2f}",
                f"{100 * r['test_top5']:.2f}",
                f"{r['images_per_second']:,.0f}",
                p.params if p else "—",
                f"{p.top1:.1f}" if p else "—",
            ]
        )
    first = results["runs"][0]
    table = Table(
        f"Test top-1 / top-5 (%) on {first['data']} (ours) beside the paper's ImageNet-1K top-1 (%)",
        ["paper's model", "ours", "params", "epochs", "test top-1 %", "test top-5 %", "images/s", "paper: params",
         "paper: ImageNet top-1 %"],
        rows,
    )  # fmt: skip
    differences = [
        f"Data: {first['data']} ({first['image_size']}×{first['image_size']} images, {first['classes']} classes), not "
        "ImageNet-1K "
        "(224×224, 1,000 classes): the accuracies do not compare, at most the order of the models does.",
        f"Scale: {fmt_count(min(r['params'] for r in results['runs']))}-"
        f"{fmt_count(max(r['params'] for r in results['runs']))} parameters for {first['epochs']:.2f} epochs "
        f"({first['optimizer']}), against 15M-22M parameters for {VISION_RECIPE['epochs']} epochs of CRATE's "
        f"recipe ({VISION_RECIPE['optimizer']}, lr {VISION_RECIPE['lr']:g}, batch {VISION_RECIPE['batch_size']}).",
        f"Our AoT-V models keep a {first['norm']} inside each layer and a learned step size per channel (without "
        "them the small models train far worse: benchmarks/vision); the paper's vision layers have no norm inside.",
        "The paper gives no CRATE number in its table (CRATE is a baseline it cites); one seed here.",
    ]
    return [
        table,
        *figure_blocks(results, part_dir),
        *differences_blocks(differences),
    ]


PART = Part(
    name="vision",
    title="Vision: AoT-V against ViT and CRATE",
    paper_items=("imagenet",),
    plan=plan,
    collect=collect,
    render=render,
    data=("images", "imagenet"),
)
