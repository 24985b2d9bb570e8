"""`aot reproduce` end to end at the tiny preset: every section, table and figure present, the numbers in the
tables are the ones in the parts' results.json, finished parts are skipped, a failing part is reported, Ctrl-C
leaves a usable report, the paper preset lists what it cannot run, and the page renders in headless chromium."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from aot.cli import main
from aot.errors import AotError
from aot.report import paper_numbers
from aot.report.browser import check_page, external_references, find_browser
from aot.report.build import write_report
from aot.report.document import (
    Bullets,
    Code,
    Document,
    Figure,
    Paragraph,
    Section,
    Table,
    inline_html,
    to_html,
    to_markdown,
)
from aot.report.execute import RESULTS, STATUS, run_parts
from aot.report.part import Context, Part, Plan, Step
from aot.report.parts import all_parts

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"
ZEROSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "zeroshot"
SCALING_RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "scaling" / "runs.json"  # synthetic runs
# the tiny report's data: the sonnets as the text corpus, the zero-shot fixtures as the real sets (no Austen here)
DATA = ["--data", f"text={FIXTURE}", "--data", f"lambada={ZEROSHOT / 'lambada.jsonl'}",
        "--data", f"cbt-ne={ZEROSHOT / 'cbtest_NE_tiny.txt'}", "--data", f"ptb={ZEROSHOT / 'ptb.tiny.txt'}",
        "--data", f"wikitext={ZEROSHOT / 'wiki.tiny.raw'}",
        "--data", f"scaling-runs={SCALING_RUNS}"]  # fmt: skip
# table columns that hold words; every other cell is a number, "a → b", or "—"
TEXT_COLUMNS = {"model", "paper's model", "ours", "conditions: layer 0 / all layers", "beats bigram", "same tokens",
                "paper: attention params per layer", "layer", "source", "block × layers", "previous-token head",
                "induction head", "φ",
                # the scaling part: families, ranges and "value [low, high]" cells
                "family", "N (sizes)", "D (budgets)", "E [95 %]", "A [95 %]", "α [95 %]", "B [95 %]", "β [95 %]",
                "N_opt ∝ C^a: a [95 %]", "compute", "gap [95 %]", "predicted loss [95 %]",
                "gap to GPT-2 [95 %]", "fitted on N"}  # fmt: skip
NUMBER = re.compile(r"^[+-]?[\d,]*\.?\d+(?:[eE][+-]?\d+)?\s*(?:%|×|[kMB]|MiB)?$")


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    """One tiny report for the module: every registered part, the sonnets as the text corpus. ``AOT_DATA`` points
    to an empty folder for the whole module, so no fetched corpus (Austen) changes what the parts plan."""
    root = tmp_path_factory.mktemp("report")
    mp = pytest.MonkeyPatch()
    mp.setenv("AOT_DATA", str(root / "data"))
    out = root / "report"
    code = main(["reproduce", "--scale", "tiny", "--out", str(out), *DATA])
    assert code == 0
    yield out
    mp.undo()


def step_results(report: Path, part: str, step: str) -> dict:
    return json.loads((report / part / step / "results.json").read_text())


def md_sections(text: str) -> dict[str, str]:
    """``## Title <a id="key"></a>`` → the section's text, by key."""
    parts = re.split(r'^## .*<a id="([\w-]+)"></a>$', text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def md_tables(text: str) -> list[list[dict[str, str]]]:
    """Every Markdown table as a list of {header: cell} rows."""
    tables, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---") and i > 0:
            header = [h.strip() for h in lines[i - 1].strip("|").split(" | ")]
            rows = []
            for row in lines[i + 1 :]:
                if not row.startswith("| "):
                    break
                rows.append(dict(zip(header, (c.strip() for c in row.strip().strip("|").split(" | ")))))
            tables.append(rows)
    return tables


def test_every_part_has_its_section_tables_and_figures(tiny_report):
    text = (tiny_report / "report.md").read_text()
    sections = md_sections(text)
    assert list(sections) == [p.name for p in all_parts()]
    for name, body in sections.items():
        assert "Status: **done**" in body, name
        assert md_tables(body), f"{name}: no table"
        assert "What differs from the paper:" in body, name
        figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", body)
        assert figures, f"{name}: no figure"
        for rel in figures:
            assert (tiny_report / rel).stat().st_size > 1000, rel
        results = json.loads((tiny_report / name / RESULTS).read_text())
        assert results["commands"] and all(c.startswith("aot ") for c in results["commands"])
        assert all(c in body for c in results["commands"])  # the command behind every number is shown
    summary = md_tables(text.split("\n## ")[0])[0]
    assert [row["status"] for row in summary] == ["done"] * len(sections)


def test_table_numbers_parse_and_come_from_results_json(tiny_report):
    sections = md_sections((tiny_report / "report.md").read_text())
    for name, body in sections.items():
        for table in md_tables(body):
            for row in table:
                for header, cell in row.items():
                    if header in TEXT_COLUMNS:
                        continue
                    for value in re.split(r" → ", cell):
                        assert value == "—" or NUMBER.match(value), f"{name}: {header} = {cell!r}"
    lm = json.loads((tiny_report / "lm" / RESULTS).read_text())
    lm_table = md_tables(sections["lm"])[0]
    paper = {m.name: m for m in paper_numbers.LM_MODELS}
    for run, row in zip(lm["runs"], lm_table):
        assert row["paper's model"] == run["paper_model"]
        assert float(row["val loss"]) == pytest.approx(run["val_loss"], abs=5e-4)
        assert float(row["test loss"]) == pytest.approx(run["test_loss"], abs=5e-4)
        assert float(row["paper: val loss"]) == paper[run["paper_model"]].val_loss
    mssa = next(row for row in lm_table if row["paper's model"] == "AoT-MSSA-L Base")
    assert mssa["paper: gap"] == f"{100 * (3.18 - 2.85) / 2.85:+.1f} %"
    theory = json.loads((tiny_report / "theory" / RESULTS).read_text())
    for r, row in zip(theory["summary"], md_tables(sections["theory"])[0]):
        assert float(row["mean factor per layer"]) == pytest.approx(r["mean_factor"], abs=5e-5)
        assert float(row["1 + ητ (Theorem 1)"]) == pytest.approx(r["predicted_factor"], abs=5e-5)
        if r["delta"] in paper_numbers.THEOREM1_SNR:
            first, last = paper_numbers.THEOREM1_SNR[r["delta"]]
            assert row["paper: SNR first → last"] == f"{first:.2f} → {last:.2f}"
    eff = json.loads((tiny_report / "efficiency" / RESULTS).read_text())
    eff_rows = [row for table in md_tables(sections["efficiency"])[:2] for row in table]
    assert len(eff_rows) == len(eff["models"])
    for r, row in zip(eff["models"], eff_rows):
        assert row["model"] == r["label"]
        assert float(row["train tok/s"].replace(",", "")) == pytest.approx(r["train_tokens_per_s"], abs=0.5)
        d2 = paper_numbers.PARAMS_PER_LAYER_D2.get(r["label"])
        assert row["paper: attention params per layer"] == (f"{d2} d²" if d2 else "—")


def test_zeroshot_and_vision_tables_equal_their_commands_results(tiny_report):
    """zeroshot: the lm part's runs, evaluated; each "ours" cell is the eval's results.json value of the set that
    stands in the paper's column, each "paper" cell the paper's. vision: test top-1 / top-5 of each run."""
    from aot.report.parts.zeroshot import COLUMNS

    sections = md_sections((tiny_report / "report.md").read_text())
    ev = step_results(tiny_report, "zeroshot", "eval")
    lm = json.loads((tiny_report / "lm" / RESULTS).read_text())
    assert list(ev["runs"]) == [r["step"] for r in lm["runs"]]  # every lm model, read from the lm part's folders
    rows = md_tables(sections["zeroshot"])[0]
    assert [r["source"] for r in rows] == ["ours", "paper"] * len(lm["runs"])
    for run, ours, paper in zip(lm["runs"], rows[::2], rows[1::2]):
        assert ours["paper's model"] == paper["paper's model"] == run["paper_model"]
        for key, header, candidates, metric in COLUMNS:
            used = next((c for c in candidates if c in ev["sets"]), None)
            if used is None:
                assert ours[header] == "—", header
            else:
                assert float(ours[header]) == pytest.approx(ev["runs"][run["step"]][used][metric], abs=5e-4), header
            assert float(paper[header]) == paper_numbers.ZERO_SHOT[run["paper_model"]][key]
    assert rows[0]["CBT-CN acc"] == "—" and "CBT-NE acc ← cbt-ne" in sections["zeroshot"]  # no CN set was given
    vision = md_tables(sections["vision"])[0]
    imagenet = {v.name: v for v in paper_numbers.IMAGENET}
    assert [r["paper's model"] for r in vision] == ["AoT-MSSA-V", "ViT-S"]
    for row, step in zip(vision, ["aot-mssa-v", "vit-s"]):
        r = step_results(tiny_report, "vision", step)
        assert float(row["test top-1 %"]) == pytest.approx(100 * r["test"]["top1"], abs=5e-3)
        assert float(row["test top-5 %"]) == pytest.approx(100 * r["test"]["top5"], abs=5e-3)
        assert float(row["paper: ImageNet top-1 %"]) == imagenet[row["paper's model"]].top1
        assert r["data"]["name"] == "digits"
    assert re.search(r"!\[AoT-MSSA-V: the class token's attention[^\]]*\]\(vision/attention/attention_layer0\.png\)",
                     sections["vision"])  # fmt: skip


def test_icl_and_inside_tables_equal_their_commands_results(tiny_report):
    sections = md_sections((tiny_report / "report.md").read_text())
    ev = step_results(tiny_report, "icl", "eval")
    d = ev["data"]["n_dims"]
    rows = md_tables(sections["icl"])[0]
    assert [r["model"] for r in rows] == list(ev["curves"])  # the models, then the baselines
    assert {"GPT-2", "AoT-MSSA", "least squares", "zero"} <= set(ev["curves"])
    for row in rows:
        mean = ev["curves"][row["model"]]["mean"]
        for k in (2, d, 2 * d):
            assert float(row[f"k = {k}"]) == pytest.approx(mean[k], abs=5e-4)
    assert float(next(r for r in rows if r["model"] == "least squares")[f"k = {d}"]) == pytest.approx(0, abs=1e-3)
    inside = md_tables(sections["inside"])
    models, calibration = inside[0], inside[1]
    assert [r["model"] for r in models] == ["GPT-2 Base", "AoT-MSSA-L Base", "AoT-MSSA-V"]  # lm's, then vision's
    for row, step in zip(models, ["gpt-2-base", "aot-mssa-l-base", "vision-aot-mssa-v"]):
        r = step_results(tiny_report, "inside", step)
        snr = [layer["snr_in"]["mean"] for layer in r["denoising"]["layers"]]
        gains = [layer["gain"]["mean"] for layer in r["denoising"]["layers"]]
        assert row["SNR first → last layer"] == f"{snr[0]:.3f} → {snr[-1]:.3f}"
        assert float(row["mean gain per layer"]) == pytest.approx(sum(gains) / len(gains), abs=5e-4)
        assert int(row["layers with gain > 1"]) == sum(g > 1 for g in gains)
        if "induction" in r["circuits"]:
            scores = r["circuits"]["induction"]
            best = max(max(layer) for layer in scores)
            layer = next(i for i, heads in enumerate(scores) if best in heads)
            assert float(row["induction score"]) == pytest.approx(best, abs=5e-4)
            assert row["induction head"] == f"L{layer} H{scores[layer].index(best)}"
        else:
            assert row["induction score"] == "—"  # an image classifier has no induction heads
    calib = json.loads((tiny_report / "inside" / "calibration" / "calibration.json").read_text())
    for row in calibration:
        c = calib[row["φ"]]
        gains = [layer["gain"]["mean"] for layer in c["profile"]["layers"]]
        assert float(row["1 + ητ (Theorem 1)"]) == pytest.approx(c["setting"]["predicted_factor"], abs=5e-4)
        assert row["gain per layer min → max"] == f"{min(gains):.3f} → {max(gains):.3f}"
    threshold = next(r for r in calibration if r["φ"] == "threshold")
    assert float(threshold["mean gain"]) == pytest.approx(float(threshold["1 + ητ (Theorem 1)"]), abs=2e-3)


def test_zeroshot_and_inside_depend_on_the_lm_part(tiny_report, tmp_path):
    """Their key (and their steps' keys) change with the lm part's results; a failed or absent lm part is one line."""
    from aot.report.execute import _step_key, code_version, part_key
    from aot.report.parts import inside, zeroshot

    out = tmp_path / "report"
    shutil.copytree(tiny_report, out)
    data = {"text": str(FIXTURE), "lambada": str(ZEROSHOT / "lambada.jsonl")}

    def keys(module) -> tuple[str, str]:
        ctx = Context("tiny", out / module.PART.name, data)
        plan = module.plan(ctx)
        assert plan.blockers == []
        return part_key(module.PART, "tiny", plan, ctx.part_dir, "c"), _step_key(plan.steps[0], ctx.part_dir, plan, "c")

    before = {m: keys(m) for m in (zeroshot, inside)}
    lm_results = out / "lm" / RESULTS
    results = json.loads(lm_results.read_text())
    results["runs"][0]["val_loss"] += 0.1  # the lm part ran again and its models changed
    lm_results.write_text(json.dumps(results))
    for module in (zeroshot, inside):
        part, step = keys(module)
        assert part != before[module][0] and step != before[module][1], module.PART.name
    status = json.loads((out / "lm" / STATUS).read_text())
    (out / "lm" / STATUS).write_text(json.dumps({**status, "state": "failed"}))
    for module in (zeroshot, inside):
        [line] = module.plan(Context("tiny", out / module.PART.name, data)).needs
        assert line.startswith("the lm part failed") and "\n" not in line
    shutil.rmtree(out / "lm")
    [line] = zeroshot.plan(Context("tiny", out / "zeroshot", data)).needs
    assert "needs the lm part's outputs" in line and "--only lm zeroshot" in line
    assert code_version()  # the real key also holds the code version (tested through the reruns above)


def test_missing_data_is_one_line_and_the_other_parts_still_run(tiny_report, tmp_path, capsys):
    """No zero-shot set and no fetched Austen corpus: zeroshot is listed as not run with the one-line fix, theory
    (removed) runs again, and the finished parts are reused; Fashion-MNIST absent: vision says how to install it."""
    out = tmp_path / "report"
    shutil.copytree(tiny_report, out)
    shutil.rmtree(out / "theory")
    data = ["--data", f"text={FIXTURE}", "--data", f"scaling-runs={SCALING_RUNS}"]
    assert main(["reproduce", "--scale", "tiny", "--out", str(out), *data]) == 0
    printed = capsys.readouterr().out
    assert (
        "zeroshot: not run here (no zero-shot data here: the Austen-built sets need `aot data fetch austen`" in printed
    )
    assert "Traceback" not in printed
    summary = {row["part"]: row["status"] for row in md_tables((out / "report.md").read_text().split("\n## ")[0])[0]}
    assert summary["Zero-shot language tasks (`zeroshot`)"] == "not run here (listed)"
    reused = ["done (finished before, reused)"] * (len(summary) - 2)  # every part but zeroshot and theory
    assert [v for k, v in summary.items() if "zeroshot" not in k] == ["done", *reused]
    section = md_sections((out / "report.md").read_text())["zeroshot"]
    assert "aot data fetch austen" in section and "--data lambada=FILE" in section

    import aot.data.images
    from aot.report.parts import vision

    mp = pytest.MonkeyPatch()
    mp.setattr(aot.data.images, "FASHION_MNIST_DIR", tmp_path / "no-fashion")
    try:
        [line] = vision.plan(Context("quick", tmp_path / "vision")).missing
    finally:
        mp.undo()
    assert "apt-get install -y dataset-fashion-mnist" in line and "\n" not in line


def test_html_is_self_contained_with_every_figure_embedded(tiny_report):
    page = (tiny_report / "index.html").read_text()
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (tiny_report / "report.md").read_text())
    assert page.count('<img src="data:image/png;base64,') == len(figures) > 0
    assert external_references(page) == []
    md = (tiny_report / "report.md").read_text()
    assert page.count("<table>") == len(re.findall(r"^\|---", md, flags=re.M)) > 0


def test_rerun_skips_finished_parts(tiny_report, capsys):
    stamps = {p.name: (tiny_report / p.name / RESULTS).stat().st_mtime_ns for p in all_parts()}
    assert main(["reproduce", "--scale", "tiny", "--out", str(tiny_report), *DATA]) == 0
    out = capsys.readouterr().out
    assert out.count("finished before") == len(stamps) and "command(s)" not in out
    assert stamps == {p.name: (tiny_report / p.name / RESULTS).stat().st_mtime_ns for p in all_parts()}
    # another preset is another config: the part runs again (its plan differs), not reused
    status = json.loads((tiny_report / "theory" / STATUS).read_text())
    assert status["state"] == "done" and status["key"]


def _failing_part(name: str = "broken") -> Part:
    """A part whose command fails with a one-line aot error."""

    def plan(ctx: Context) -> Plan:
        return Plan([Step("main", ["denoise", "--threads", "0"])])

    return Part(name, "A part that fails", (), plan, lambda d, p: {}, lambda r, d: [])


def _report(parts, outcomes, out):
    return write_report(parts, outcomes, preset="tiny", out=out, command="test", machine=_machine(), code="x",
                        commit=None)  # fmt: skip


def _machine():
    from aot.runinfo import machine_info

    return machine_info()


def test_a_failing_part_is_reported_and_the_others_still_run(tiny_report, tmp_path, monkeypatch):
    out = tmp_path / "report"
    shutil.copytree(tiny_report, out)  # the real parts are finished there (keys do not depend on the folder)
    theory = next(p for p in all_parts() if p.name == "theory")
    shutil.rmtree(out / "theory")  # so theory runs again, after the failing part
    monkeypatch.setenv("AOT_DATA", str(tmp_path / "data"))
    parts = [_failing_part(), theory]
    lines: list[str] = []
    outcomes = run_parts(parts, "tiny", out, echo=lines.append)
    assert [o.state for o in outcomes] == ["failed", "done"]
    assert "--threads=0 must be an integer in [1, 1,024]" in outcomes[0].error
    _report(parts, outcomes, out)
    sections = md_sections((out / "report.md").read_text())
    assert "FAILED" in sections["broken"] and "--threads=0 must be an integer in [1, 1,024]" in sections["broken"]
    assert "Status: **done**" in sections["theory"] and md_tables(sections["theory"])


def test_a_resumable_step_starts_when_there_is_nothing_to_resume(tmp_path):
    """full / paper steps are resumable: their first run must start (``--resume auto``), not fail for want of a
    checkpoint (``--resume`` alone refuses an empty folder)."""
    argv = ["train", "icl", "--steps", "2", "--set", "model.n_embd=16", "--set", "model.n_layer=1", "--set",
            "eval.final_prompts=16", "--set", "eval.periodic_prompts=16", "--set", "train.progress=false"]  # fmt: skip
    part = Part("resumable", "A resumable step", (), lambda ctx: Plan([Step("run", argv, resumable=True)]),
                lambda d, p: {}, lambda r, d: [])  # fmt: skip
    [outcome] = run_parts([part], "tiny", tmp_path, echo=lambda s: None)
    assert outcome.state == "done", outcome.error
    assert outcome.commands[0].endswith("--resume auto")
    assert json.loads((tmp_path / "resumable" / "run" / "results.json").read_text())["train"]["steps"] == 2


def test_ctrl_c_leaves_finished_parts_and_a_report(tiny_report, tmp_path):
    out = tmp_path / "report"
    shutil.copytree(tiny_report, out)
    theory = next(p for p in all_parts() if p.name == "theory")

    def interrupt(ctx: Context) -> Plan:
        raise KeyboardInterrupt

    stop = Part("stop", "Interrupted", (), interrupt, lambda d, p: {}, lambda r, d: [])
    later = _failing_part("later")
    written = []
    with pytest.raises(KeyboardInterrupt):
        run_parts([theory, stop, later], "tiny", out, echo=lambda s: None, on_progress=lambda o: written.append(o))
    states = [o.state for o in written[-1]]
    assert states == ["skipped", "interrupted", "not reached"]  # theory finished before: reused, still usable
    _report([theory, stop, later], written[-1], out)
    sections = md_sections((out / "report.md").read_text())
    assert "interrupted" in sections["stop"] and "stopped before it" in sections["later"]
    assert md_tables(sections["theory"])


def test_only_keeps_showing_parts_finished_under_an_earlier_code_version(tiny_report, tmp_path):
    """`--only theory` after a code change: the other parts are not re-run, and their earlier results are still
    shown, marked as coming from an earlier version (a part that never finished stays "not selected")."""
    out = tmp_path / "report"
    shutil.copytree(tiny_report, out)
    status_path = out / "lm" / STATUS
    status = json.loads(status_path.read_text())
    status_path.write_text(json.dumps({**status, "key": "an-earlier-code-version"}))
    assert main(["reproduce", "--scale", "tiny", "--out", str(out), "--only", "theory", *DATA]) == 0
    sections = md_sections((out / "report.md").read_text())
    assert "from an earlier code or plan version" in sections["lm"] and md_tables(sections["lm"])
    assert md_tables(sections["theory"])


def test_paper_preset_lists_what_it_cannot_run(tmp_path, capsys):
    code = main(["reproduce", "--scale", "paper", "--out", str(tmp_path), "--only", "lm", "efficiency"])
    assert code == 0
    out = capsys.readouterr().out
    assert "not run here" in out and "torchrun --nproc_per_node=8 -m aot.cli train lm --model aot-mssa-l-medium" in out
    report = (tmp_path / "report.md").read_text()
    sections = md_sections(report)
    assert "no OpenWebText given" in sections["lm"] and "no CUDA GPU here" in sections["efficiency"]
    assert "not run (not selected by --only)" in sections["theory"]
    assert not (tmp_path / "efficiency" / "bench").exists()  # nothing ran


def test_dry_run_prints_every_command_and_runs_nothing(tmp_path, capsys):
    assert main(["reproduce", "--scale", "full", "--out", str(tmp_path / "r"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")] == [
        p.name for p in all_parts()
    ]
    assert "needs the lm part's outputs" not in out  # the run makes them before the parts that read them
    assert "aot denoise --learn" in out and "--model aot-mssa-l-cpu --corpus shakespeare" in out
    assert "train.checkpoint_every=100" in out and " --resume auto" in out and "aot bench --out" in out
    assert not (tmp_path / "r").exists()


def test_paper_preset_of_the_new_parts_prints_the_papers_commands(tmp_path, capsys):
    only = ["zeroshot", "vision", "icl", "inside"]
    assert main(["reproduce", "--scale", "paper", "--out", str(tmp_path / "r"), "--dry-run", "--only", *only]) == 0
    out = capsys.readouterr().out
    assert "--task lambada,cbt-cn,cbt-ne,ptb,wikitext --data lambada=LAMBADA_FILE" in out
    assert "pass --data lambada=FILE --data cbt-cn=FILE" in out and "no ImageNet given" in out
    assert "torchrun --nproc_per_node=8 -m aot.cli train vision --recipe imagenet-vit-s --data IMAGENET_DIR" in out
    assert "aot train icl --model aot-mssa-icl --recipe garg" in out and "mamba-icl" in out
    assert out.count("aot analyze") == 4 and "aot analyze --calibrate" in out
    assert not (tmp_path / "r").exists()


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["reproduce", "--out", str(tmp_path), "--only", "nope"]) == 2
    assert "unknown part 'nope'" in capsys.readouterr().err
    assert main(["reproduce", "--out", str(tmp_path), "--data", "openwebtext"]) == 2
    assert "must look like NAME=PATH" in capsys.readouterr().err


def test_a_folder_not_written_by_reproduce_is_not_overwritten(tmp_path):
    theory = next(p for p in all_parts() if p.name == "theory")
    (tmp_path / "theory" / "main").mkdir(parents=True)
    (tmp_path / "theory" / "main" / "mine.txt").write_text("keep me")
    [outcome] = run_parts([theory], "tiny", tmp_path, echo=lambda s: None)
    assert outcome.state == "failed" and "was not written by aot reproduce" in outcome.error
    assert (tmp_path / "theory" / "main" / "mine.txt").read_text() == "keep me"


def test_markdown_and_html_renderings(tmp_path):
    png = tmp_path / "f.png"
    shutil.copy(Path(__file__).resolve().parents[2] / "benchmarks" / "denoise" / "snr_per_layer.png", png)
    doc = Document(
        "T",
        [Paragraph("a <b> `x<y` **z**")],
        [Section("s", "S", [Table("c", ["a|b", "n"], [["1", "2"]]), Figure(png, "fig"), Bullets(["i"]), Code("<x>")])],
    )
    md = to_markdown(doc, tmp_path)
    assert "| a\\|b | n |" in md and "![fig](f.png)" in md and "```\n<x>\n```" in md
    page = to_html(doc)
    assert "a &lt;b&gt; <code>x&lt;y</code> <b>z</b>" in page and "&lt;x&gt;" in page
    assert inline_html("`a` & **b**") == "<code>a</code> &amp; <b>b</b>"
    with pytest.raises(ValueError, match="cells"):
        Table("bad", ["a", "b"], [["1"]])


def test_paper_numbers_are_consistent():
    assert paper_numbers.lm_gap("AoT-MSSA-L Base") == pytest.approx((3.18 - 2.85) / 2.85)
    assert paper_numbers.lm_gap("AoT-MHSA-L Base") == pytest.approx(0.0316, abs=1e-4)
    from aot.models import PRESETS

    assert all(m.preset in PRESETS for m in paper_numbers.LM_MODELS)
    assert all(v.preset in PRESETS for v in paper_numbers.IMAGENET)
    for part in all_parts():
        keys = {i.key for i in paper_numbers.PAPER_ITEMS if i.part == part.name}
        assert set(part.paper_items) == keys, part.name


def test_page_renders_in_headless_chromium(tiny_report, tmp_path):
    if find_browser() is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    check = check_page(tiny_report / "index.html", tmp_path / "index.png")
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (tiny_report / "report.md").read_text())
    assert check.images == len(figures) and check.console == []
    assert check.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and check.screenshot.stat().st_size > 10_000


def test_chromium_check_catches_a_broken_image_and_an_external_resource(tmp_path):
    page = tmp_path / "p.html"
    page.write_text('<html><body><img src="https://example.com/x.png"></body></html>')
    with pytest.raises(AotError, match="not self-contained"):
        check_page(page, tmp_path / "p.png")
    if find_browser() is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    page.write_text('<html><body><img src="data:image/png;base64,AAAA"></body></html>')
    with pytest.raises(AotError, match="1 of 1 images did not load"):
        check_page(page, tmp_path / "p.png")


def test_render_writes_the_same_page_from_the_record_and_runs_nothing(tiny_report, tmp_path, capsys):
    """`aot reproduce --render`: the page and report.md again from report.json and the parts' results (how the
    committed benchmarks/report's page is built without keeping it in git); byte-identical, nothing run."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_report, copy)
    for name in ("index.html", "report.md"):
        (copy / name).unlink()
    logs_before = sorted(p.name for p in copy.rglob("*.log"))
    assert main(["reproduce", "--render", "--out", str(copy)]) == 0
    assert "ran nothing" in capsys.readouterr().out
    for name in ("index.html", "report.md", "report.json"):
        assert (copy / name).read_bytes() == (tiny_report / name).read_bytes(), name
    assert sorted(p.name for p in copy.rglob("*.log")) == logs_before
    assert main(["reproduce", "--render", "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert "report.json" in err and "\n" not in err
