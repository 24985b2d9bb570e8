"""Record the README's two commands as a new user meets them: a fresh clone, `make run`, then `make test`.

    flock /tmp/aot-cpu.lock python benchmarks/main_job/record.py            # both commands (~15-25 min)
    flock /tmp/aot-cpu.lock python benchmarks/main_job/record.py --skip-test
    flock /tmp/aot-cpu.lock python benchmarks/main_job/record.py --report   # `make report` instead

It clones the committed HEAD of this repository into a temporary folder (uncommitted changes are not part of
the clone: commit first), with an empty data directory (``AOT_DATA``) so Shakespeare is fetched and tokenized
as on a fresh machine, runs ``make run`` and ``make test`` there and times each as a whole. It writes
``results.json`` (wall times, the run's val / test nats per byte, the unigram and bigram, tokens/s, MFU, the
test summary, the machine with its CPU model, the date and the commit) and ``results.md`` (a small table)
beside this script, and keeps each command's output tail in ``logs/``. Re-running overwrites them.

The machine matters: timings differ between CPUs of the same size (an AMD EPYC and an Intel Xeon of 2 cores
differ by 2x in matmul throughput, and bf16 autocast is faster than fp32 on one and slower on the other), and
other jobs on a shared machine slow every step. The record states the CPU, the load average before and after,
and the matmul peaks in fp32 and bf16 measured right after the job.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TAIL_LINES = 60


def run_timed(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run ``command`` in ``cwd``; return its wall seconds, exit code and output (also written to ``log``)."""
    print(f"$ {' '.join(command)}   (in {cwd})", flush=True)
    start = time.perf_counter()
    with log.open("w") as sink:
        process = subprocess.run(command, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - start
    print(f"  exit {process.returncode} after {seconds:.0f} s", flush=True)
    return {"command": " ".join(command), "seconds": seconds, "returncode": process.returncode}


def tail(path: Path, n: int = TAIL_LINES) -> str:
    lines = path.read_text(errors="replace").replace("\r", "\n").splitlines()
    return "\n".join(line for line in lines[-n:] if line.strip()) + "\n"


def pytest_summary(output: str) -> dict[str, int]:
    """Counts from pytest's last line, e.g. ``412 passed, 3 skipped, 20 deselected in 201.3s``."""
    found = re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)", output)
    return {word: int(count) for count, word in found[-8:]}


def matmul_peaks(clone: Path) -> dict[str, float]:
    """fp32 and bf16 matmul peaks (FLOP/s) measured by the clone's own aot, right after the job."""
    code = (
        "import json, torch; from aot.bench.peaks import measure_matmul_peak; "
        "print(json.dumps({n: measure_matmul_peak(d)['peak'] for n, d in "
        "(('fp32', torch.float32), ('bf16', torch.bfloat16))}))"
    )
    return json.loads(clone_python(clone, code))


def machine(clone: Path) -> dict[str, Any]:
    code = "import json; from aot.runinfo import machine_info; print(json.dumps(machine_info()))"
    return json.loads(clone_python(clone, code))


def clone_python(clone: Path, code: str) -> str:
    """Run ``code`` with the clone's .venv python and its sources; return the last line printed."""
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}
    command = [str(clone / ".venv" / "bin" / "python"), "-c", code]
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return out.stdout.strip().splitlines()[-1]


def summarise_run(run_results: dict[str, Any]) -> dict[str, Any]:
    train, val, test = run_results["train"], run_results["val"], run_results["test"]
    baselines = run_results["baselines"]["val"]
    return {
        "model": run_results["model"],
        "steps": train["steps"],
        "tokens": train["tokens"],
        "precision": train.get("precision", {}).get("precision") or run_results["config"]["train"].get("precision"),
        "precision_reason": train.get("precision", {}).get("reason"),
        "train_seconds": train["train_seconds"],
        "train_and_eval_seconds": train["wall_seconds"],
        "tokens_per_second": train["tokens_per_second"],
        "mfu": train["mfu"],
        "peak_flops": train["peak_flops"],  # this machine's cached matmul peak (aot bench --refresh-peak)
        "val_nats_per_byte": val["nats_per_byte"],
        "test_nats_per_byte": test["nats_per_byte"],
        "val_bits_per_byte": val["bits_per_byte"],
        "unigram_val_nats_per_byte": baselines["unigram"]["nats_per_byte"],
        "bigram_val_nats_per_byte": baselines["bigram"]["nats_per_byte"],
        "bigram_test_nats_per_byte": run_results["baselines"]["test"]["bigram"]["nats_per_byte"],
        "beats_bigram": run_results["beats_bigram"],
    }


def markdown(record: dict[str, Any]) -> str:
    m, run = record["machine"], record.get("run_summary")
    peaks = record.get("matmul_peaks", {})
    lines = [
        "# The main job: the README's two commands from a fresh clone",
        "",
        f"{record['date']} · {m.get('processor', '?')} · {m.get('cpu_count', '?')} CPUs · torch {m.get('torch', '?')}"
        f" · commit {record['commit'][:10]} · load average {record['load_average_start']} → "
        f"{record['load_average_end']}" + (" · other jobs shared the machine" if record.get("shared") else ""),
        "",
        "Recorded by `python benchmarks/main_job/record.py` (fresh clone, empty data directory). Matmul peak "
        f"measured right after: fp32 {peaks.get('fp32', 0) / 1e9:.0f} GFLOP/s, bf16 {peaks.get('bf16', 0) / 1e9:.0f} "
        "GFLOP/s.",
        "",
        "| command | wall time | exit | what it did |",
        "|---|---|---|---|",
    ]
    make_run = record["make_run"]
    if run:
        did = (
            f"set-up (venv, install, fetch, tokenize) {record['setup_seconds']:.0f} s; trained "
            f"{run['tokens'] / 1e6:.2f} M tokens in {run['train_seconds']:.0f} s "
            f"({run['tokens_per_second']:,.0f} tok/s, "
            f"{run['precision']}, MFU {100 * run['mfu']:.0f} %); val {run['val_nats_per_byte']:.3f} / test "
            f"{run['test_nats_per_byte']:.3f} nats/byte against the bigram's {run['bigram_val_nats_per_byte']:.3f} "
            f"(unigram {run['unigram_val_nats_per_byte']:.2f})"
        )
    else:
        did = "no results.json (see logs/make_run.log)"
    lines.append(f"| `make run` | {make_run['seconds'] / 60:.1f} min | {make_run['returncode']} | {did} |")
    if "make_test" in record:
        t = record["make_test"]
        counts = ", ".join(f"{v} {k}" for k, v in record.get("pytest", {}).items())
        lines.append(
            f"| `make test` (after `make run`: set-up done) | {t['seconds'] / 60:.1f} min | {t['returncode']} | "
            f"ruff, mypy, pytest: {counts} |"
        )
    return "\n".join(lines) + "\n"


def readme_blocks(record: dict[str, Any]) -> dict[str, str]:
    """The README's sentences that quote this record, by marker name (``<!-- main_job:NAME -->``)."""
    m, run, peaks = record["machine"], record["run_summary"], record.get("matmul_peaks", {})
    cpu = f"{m.get('cpu_count', '?')}-core {m.get('processor', 'CPU (not read)')}"
    shared = ", shared with other jobs" if record.get("shared") else ""
    times = (
        f"Times recorded by `python benchmarks/main_job/record.py` on {record['date'][:10]} (a fresh clone on a "
        f"{cpu}{shared}; [results.md](benchmarks/main_job/results.md)): `make run` "
        f"{record['make_run']['seconds'] / 60:.0f} min ({record['setup_seconds'] / 60:.0f} min of set-up, "
        f"{run['train_seconds'] / 60:.0f} min of training), "
        + (
            f"`make test` {record['make_test']['seconds'] / 60:.0f} min. "
            if "make_test" in record
            else "`make test` not timed in this record (`--skip-test`). "
        )
        + "They vary with the machine: CPUs of the same size differ in matmul throughput (this one measured "
        f"{peaks.get('fp32', 0) / 1e9:.0f} GFLOP/s in fp32 and {peaks.get('bf16', 0) / 1e9:.0f} in bf16; a 2-core AMD "
        "EPYC measured 187 in fp32 on the same day). Large bf16 products "
        f"{'lose to' if peaks.get('bf16', 0) < peaks.get('fp32', 0) else 'beat'} fp32 here, but what counts is the "
        "model's own shapes: `aot train lm` (`--precision auto`, the default) times one block of the model in "
        f"both and trained in {run['precision'] if run else 'the faster'} "
        f"({(run or {}).get('precision_reason') or 'see results.json'}). "
        "Other jobs on the machine slow everything."
    )
    relation = "below" if run["beats_bigram"] else "not below"
    lm = (
        f"On a {cpu} ({record['date'][:10]}, `make run` from a fresh clone{shared}) it trained "
        f"{run['tokens'] / 1e6:.2f} M tokens in {run['train_seconds']:.0f} s ({run['tokens_per_second']:,.0f} tok/s, "
        f"{run['precision']}, {100 * run['mfu']:.0f} % MFU, causal FLOPs, against this machine's cached matmul "
        "peak) to val "
        f"{run['val_nats_per_byte']:.3f} / test {run['test_nats_per_byte']:.3f} nats/byte, {relation} the "
        f"bigram's {run['bigram_val_nats_per_byte']:.3f} (unigram {run['unigram_val_nats_per_byte']:.2f}; "
        "[benchmarks/main_job](benchmarks/main_job/results.md))."
    )
    return {"times": times, "lm": lm}  # one line each: a wrapped "20 min" could split across lines


def update_readme(readme: Path, record: dict[str, Any]) -> None:
    """Rewrite the text between ``<!-- main_job:NAME -->`` and ``<!-- /main_job:NAME -->`` from the record."""
    text = readme.read_text()
    for name, block in readme_blocks(record).items():
        pattern = re.compile(rf"(<!-- main_job:{name} -->\n).*?(<!-- /main_job:{name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{readme} has no <!-- main_job:{name} --> block")
        text = pattern.sub(lambda match, block=block: match.group(1) + block + "\n" + match.group(2), text)
    readme.write_text(text)


def record_report(
    record: dict[str, Any], clone: Path, env: dict[str, str], out: Path, logs: Path, scratch: Path, keep: bool
) -> int:
    """`make report` in the clone, timed as a whole, with each part's state and command time from its
    report.json; writes results.json / results.md into ``out``."""
    record["make_report"] = run_timed(["make", "report"], clone, env, logs / "make_report.log")
    report_file = clone / "runs" / "report" / "report.json"
    if report_file.is_file():
        report = json.loads(report_file.read_text())
        record["parts"] = [
            {"name": p["name"], "state": p["state"], "command_seconds": p.get("command_seconds"), "error": p["error"]}
            for p in report["parts"]
        ]
    record["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    try:
        record["machine"] = machine(clone)
    except (OSError, subprocess.CalledProcessError, json.JSONDecodeError, IndexError) as exc:
        print(f"could not read the machine with the clone's python: {exc}")
    log = logs / "make_report.log"
    log.write_text(tail(log))
    (out / "results.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "results.md").write_text(report_markdown(record))
    print(report_markdown(record))
    if keep:
        print(f"clone kept in {clone}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if record["make_report"]["returncode"] else 0


def report_markdown(record: dict[str, Any]) -> str:
    machine_info = record.get("machine", {})
    lines = [
        "# `make report` from a fresh clone",
        "",
        f"{record['date']}, commit {record['commit'][:10]}, {machine_info.get('processor', '?')} "
        f"({machine_info.get('cpu_count', '?')} CPUs), load average {record['load_average_start']} → "
        f"{record.get('load_average_end')}{' (other jobs shared the machine)' if record['shared'] else ''}; "
        "an empty data directory, so the corpora are fetched as on a new machine "
        "(`python benchmarks/main_job/record.py --report`).",
        "",
        f"`make report` (set-up + data + `aot reproduce --preset quick`): **{record['make_report']['seconds'] / 60:.1f}"
        f" min**, exit {record['make_report']['returncode']}.",
        "",
        "| part | state | its commands (min) |",
        "|---|---|---|",
    ]
    for part in record.get("parts", []):
        minutes = "—" if part["command_seconds"] is None else f"{part['command_seconds'] / 60:.1f}"
        lines.append(f"| {part['name']} | {part['state']}{': ' + part['error'] if part['error'] else ''} | {minutes} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="record.py",
        description="Time the README's `make run` and `make test` from a fresh clone and record the result.",
        epilog="example: flock /tmp/aot-cpu.lock python benchmarks/main_job/record.py --skip-test",
    )
    parser.add_argument("--skip-test", action="store_true", help="run `make run` only")
    parser.add_argument("--repo", default=str(ROOT), help="repository to clone (default: this one)")
    parser.add_argument("--ref", default="HEAD", help="commit or branch to record (default: HEAD)")
    parser.add_argument("--out", default=str(HERE), help="where results.json, results.md, logs/ go")
    parser.add_argument("--keep", action="store_true", help="keep the temporary clone (its path is printed)")
    parser.add_argument(
        "--update-readme",
        action="store_true",
        help="rewrite the README's <!-- main_job:... --> blocks from the new record (then update the minutes "
        "of training in `aot train lm --help`: tests/test_readme.py checks both)",
    )
    parser.add_argument(
        "--readme-only",
        action="store_true",
        help="do not run anything: rewrite the README's blocks from the existing results.json",
    )
    parser.add_argument("--shared", action="store_true", help="note in the record that other jobs shared the machine")
    parser.add_argument(
        "--report",
        action="store_true",
        help="time `make report` (the quick report) instead of `make run` / `make test`; the record goes to "
        "benchmarks/report/fresh_clone/ unless --out says otherwise",
    )
    args = parser.parse_args(argv)
    out = Path(args.out) if not (args.report and args.out == str(HERE)) else ROOT / "benchmarks/report/fresh_clone"
    if args.readme_only:
        update_readme(ROOT / "README.md", json.loads((out / "results.json").read_text()))
        return 0
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="aot-main-job-"))
    clone, data = scratch / "aot", scratch / "data"
    data.mkdir()
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", args.repo, str(clone)], check=True)
    subprocess.run(["git", "checkout", "--quiet", args.ref], cwd=clone, check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["AOT_DATA"] = str(data)
    record: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit.stdout.strip(),
        "shared": args.shared,
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }
    if args.report:
        return record_report(record, clone, env, out, logs, scratch, keep=args.keep)
    record["make_run"] = run_timed(["make", "run"], clone, env, logs / "make_run.log")
    run_file = clone / "runs" / "lm" / "results.json"
    if run_file.is_file():
        run_results = json.loads(run_file.read_text())
        record["run_summary"] = summarise_run(run_results)
        record["setup_seconds"] = record["make_run"]["seconds"] - run_results["train"]["wall_seconds"]
    if not args.skip_test:
        record["make_test"] = run_timed(["make", "test"], clone, env, logs / "make_test.log")
        record["pytest"] = pytest_summary((logs / "make_test.log").read_text(errors="replace"))
    record["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    record["machine"], record["matmul_peaks"] = {}, {}
    for key, measure in (("machine", machine), ("matmul_peaks", matmul_peaks)):
        try:  # a failure here must not lose the timings measured above
            record[key] = measure(clone)
        except (OSError, subprocess.CalledProcessError, json.JSONDecodeError, IndexError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            print(f"could not read {key} with the clone's python: {detail.strip().splitlines()[-1:]}")
    for name in ("make_run", "make_test"):
        log = logs / f"{name}.log"
        if log.is_file():
            log.write_text(tail(log))  # keep the tail only: the full pip output is long
    (out / "results.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "results.md").write_text(markdown(record))
    print(markdown(record))
    if args.update_readme and "run_summary" in record:
        update_readme(ROOT / "README.md", record)
    if args.keep:
        print(f"clone kept in {clone}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    failed = record["make_run"]["returncode"] or record.get("make_test", {}).get("returncode", 0)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
