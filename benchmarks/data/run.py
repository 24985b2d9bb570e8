"""Throughput and memory of ``aot data prepare`` on synthetic web-like JSON lines, against tiktoken alone and
nanoGPT's OpenWebText method (HF ``datasets``).

    OMP_NUM_THREADS=1 python benchmarks/data/run.py                  # 0.1, 1 and 4 GB: results.json, then --render
    OMP_NUM_THREADS=1 python benchmarks/data/run.py --quick          # 0.1 GB only (a smoke test)
    python benchmarks/data/run.py --render                           # results.md and README.md from results.json

Each measurement runs as a subprocess, timed from start to exit (interpreter start included), while a thread samples
every 0.1 s the resident memory of its whole process tree (the process and all its descendants): the sum of RSS
(``VmRSS``; pages shared between a parent and its forked workers count once per process) and the sum of PSS
(``smaps_rollup``; shared pages split between the processes sharing them: the tree's real footprint).

Rows (each recorded in results.json as soon as it is measured; a rerun skips recorded rows unless ``--force``):

- ``aot/SIZE/TOKENIZER/wN``: ``aot data prepare CORPUS --tokenizer {bytes,gpt2} --workers {1,2}`` (val / test
  fraction 0.005, default shard size, ``--no-progress``) into a fresh folder, deleted afterwards;
- ``tiktoken/SIZE`` (the 1 GB corpus, or the smallest one measured without it): tiktoken's own
  ``encode_ordinary_batch(batch, num_threads=1)`` over the same documents in batches of about 1 MB (1 Mi characters,
  as ``aot data prepare`` batches them), in this process; only the encode calls are timed. The same pass times the
  plain bytes baseline (``np.frombuffer(text.encode())``) and the JSON reading (``json.loads`` per line);
- ``nanogpt/SIZE`` (same size): ``nanogpt_prepare.py``, nanoGPT's method re-implemented, ``num_proc=2``, with the
  datasets cache in a scratch folder whose disk use is recorded and which is deleted afterwards.

MB/s is UTF-8 text bytes (meta.json ``source.bytes``: the documents' text, without the JSON around it) per second of
wall time; the JSON-lines file's bytes are recorded too (``jsonl_bytes``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shlex
import shutil
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any

os.environ["OMP_NUM_THREADS"] = "1"

import numpy as np
import psutil

HERE = Path(__file__).resolve().parent


def shown(command: list[str]) -> str:
    """``command`` as recorded: paths in the checkout relative to its root, the work folder as $WORK, the
    interpreter as python (the record must not name this machine's folders)."""
    root = str(HERE.parents[1])
    text = shlex.join(command).replace(sys.executable, "python").replace(root + "/", "")
    return re.sub(r"/\S*/aot-data-bench", "$WORK", text)


RESULTS = HERE / "results.json"
RESULTS_MD = HERE / "results.md"
README = HERE / "README.md"
SIZES = (0.1, 1.0, 4.0)
TOKENIZERS = ("bytes", "gpt2")
WORKERS = (1, 2)
FRACTION = 0.005
SEED = 0
NANOGPT_PROCS = 2
BATCH_CHARS = 1 << 20  # as aot.data.prepare.BATCH_CHARS
MB = 1e6
nan = float("nan")
TABLE_START, TABLE_END = "<!-- data:table -->", "<!-- /data:table -->"


# -- the record -------------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if not model:
        try:
            lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
            model = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if "Model name" in ln), "")
        except OSError:
            pass
    return {
        "cpu": model or platform.processor(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def versions() -> dict[str, str]:
    out = {}
    for name in ("aot", "tiktoken", "datasets", "pyarrow", "numpy", "psutil", "tokenizers"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    try:
        commit = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(HERE), "status", "--porcelain", "--", "../../src"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        out["aot_commit"] = commit + (" (src/ modified)" if dirty else "")
    except OSError:
        pass
    return out


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def load() -> dict[str, Any]:
    if RESULTS.is_file():
        return json.loads(RESULTS.read_text())
    return {"rows": {}, "corpora": {}}


def save(results: dict[str, Any]) -> None:
    scratch = RESULTS.with_name(f".{RESULTS.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps(results, indent=1) + "\n")
    os.replace(scratch, RESULTS)


def record(key: str, row: dict[str, Any]) -> None:
    """Add one row to results.json (read again first: the file is the only state) in one atomic replace."""
    results = load()
    results.setdefault("rows", {})[key] = row
    results["machine"], results["versions"], results["updated"] = machine(), versions(), now()
    save(results)
    print(f"recorded {key}: {summary(row)}", flush=True)


def summary(row: dict[str, Any]) -> str:
    parts = []
    if "tiktoken_mb_s" in row:
        parts.append(f"tiktoken {row['tiktoken_mb_s']:.2f} MB/s, bytes {row['bytes_mb_s']:.0f} MB/s")
    if "wall_s" in row:
        parts.append(f"{row['wall_s']:.1f} s")
    if "text_mb_s" in row:
        parts.append(f"{row['text_mb_s']:.2f} MB/s of text")
    if "peak_rss_mb" in row:
        parts.append(f"peak RSS {row['peak_rss_mb']:.0f} MB (PSS {row['peak_pss_mb']:.0f} MB)")
    return ", ".join(parts)


# -- measuring a process tree -------------------------------------------------------------------------------------


def _status_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in kB; zeros for a process that is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    rss, hwm = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M), re.search(r"^VmHWM:\s+(\d+) kB", text, re.M)
    return (int(rss.group(1)) if rss else 0), (int(hwm.group(1)) if hwm else 0)


def _pss_kb(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    match = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) if match else 0


class TreeSampler(threading.Thread):
    """Samples the summed RSS of a process and all its descendants every ``interval`` seconds, and their summed PSS
    at every ``pss_every``-th sample. ``VmRSS`` is a counter (about 1.5 ms of CPU for three processes);
    ``smaps_rollup`` walks each process's page tables under its memory-map lock (about 23 ms of CPU for a 1 GB process
    and two workers), so reading it every 50 ms takes a quarter of a core from what it measures."""

    def __init__(self, pid: int, interval: float = 0.1, pss_every: int = 1) -> None:
        super().__init__(daemon=True)
        self.root, self.interval, self.pss_every = psutil.Process(pid), interval, pss_every
        self.stop = threading.Event()
        self.peak_rss_kb = self.peak_pss_kb = self.samples = self.max_processes = self.max_hwm_kb = 0

    def sample(self) -> None:
        try:
            pids = [self.root.pid, *(p.pid for p in self.root.children(recursive=True))]
        except psutil.Error:
            return
        status = [_status_kb(pid) for pid in pids]
        self.peak_rss_kb = max(self.peak_rss_kb, sum(r for r, _ in status))
        self.max_hwm_kb = max(self.max_hwm_kb, *(h for _, h in status))
        if self.samples % self.pss_every == 0:
            self.peak_pss_kb = max(self.peak_pss_kb, sum(_pss_kb(pid) for pid in pids))
        self.max_processes = max(self.max_processes, len(pids))
        self.samples += 1

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.interval)


def busy_cpu_s() -> float:
    """CPU seconds all cores of the machine have been busy since boot (``/proc/stat``: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class Contention:
    """How many cores other processes kept busy while a measurement ran: the machine's busy CPU time less this
    process's own and its reaped descendants', over the wall time."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.busy = busy_cpu_s()
        self.own = self._own()

    @staticmethod
    def _own() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    def cores(self) -> float:
        wall = time.perf_counter() - self.start
        others = (busy_cpu_s() - self.busy) - (self._own() - self.own)
        return round(max(others, 0.0) / max(wall, 1e-9), 2)


def measure(
    command: list[str], env: dict[str, str] | None = None, interval: float = 0.1, pss_every: int = 1
) -> dict[str, Any]:
    """Run ``command`` (its output captured), timing it and sampling its process tree's memory (:class:`TreeSampler`
    with ``interval`` and ``pss_every``); its CPU time (user + system of the process and the descendants it reaped)
    and the cores other processes used meanwhile."""
    load_before = [round(x, 2) for x in os.getloadavg()]
    contention = Contention()
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    sampler = TreeSampler(proc.pid, interval, pss_every)
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    sampler.stop.set()
    sampler.join()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (children.ru_utime - children_before.ru_utime) + (children.ru_stime - children_before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed ({proc.returncode}):\n{stderr[-4000:]}")
    return {
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(sampler.peak_rss_kb * 1024 / MB, 1),
        "peak_pss_mb": round(sampler.peak_pss_kb * 1024 / MB, 1),
        "max_process_hwm_mb": round(sampler.max_hwm_kb * 1024 / MB, 1),  # the peak RSS of the largest process
        "cpu_s": round(cpu, 2),
        "other_cores": contention.cores(),
        "processes": sampler.max_processes,
        "samples": sampler.samples,
        "load_average_before": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "stdout": stdout.strip()[-2000:],
    }


def disk_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def warm(path: Path) -> None:
    """Read the file once so every row reads it from the page cache (the first row would otherwise pay the disk)."""
    with open(path, "rb") as handle:
        while handle.read(1 << 24):
            pass


def child_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", **extra}


# -- the corpora --------------------------------------------------------------------------------------------------


def size_name(size: float) -> str:
    return f"{size:g}"


def corpus(work: Path, size: float) -> Path:
    """The corpus of ``size`` GB in ``work``, generated once (a sidecar JSON says with what)."""
    path = work / f"corpus-{size_name(size)}gb-seed{SEED}.jsonl"
    sidecar = path.with_name(path.name + ".json")
    if path.is_file() and sidecar.is_file():
        info = json.loads(sidecar.read_text())
        if info.get("bytes") == path.stat().st_size and "text_bytes" in info:
            return path
    work.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(HERE / "generate.py"), "--size-gb", str(size), "--out", str(path)]
    command += ["--seed", str(SEED)]
    print(f"generating {path} ...", flush=True)
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=child_env())
    info = json.loads(done.stdout.strip().splitlines()[-1])
    info["command"] = shown(command)
    sidecar.write_text(json.dumps(info, indent=1) + "\n")
    results = load()
    results.setdefault("corpora", {})[size_name(size)] = {**info, "file": path.name}
    save(results)
    return path


# -- the rows -----------------------------------------------------------------------------------------------------


def aot_executable() -> str:
    beside = Path(sys.executable).with_name("aot")
    return str(beside) if beside.is_file() else (shutil.which("aot") or "aot")


def run_aot(path: Path, work: Path, size: float, tokenizer: str, workers: int) -> dict[str, Any]:
    out = work / f"out-aot-{size_name(size)}-{tokenizer}-w{workers}"
    shutil.rmtree(out, ignore_errors=True)
    command = [aot_executable(), "data", "prepare", str(path), "--tokenizer", tokenizer, "--out", str(out)]
    command += ["--workers", str(workers), "--val-fraction", str(FRACTION), "--test-fraction", str(FRACTION)]
    command += ["--no-progress"]
    warm(path)
    row = measure(command, child_env())
    meta = json.loads((out / "meta.json").read_text())
    text_bytes = meta["source"]["bytes"]
    jsonl_bytes = path.stat().st_size
    reported = re.search(r" in ([\d.]+)s \(", row["stdout"])
    row.update(
        kind="aot",
        size_gb=size,
        tokenizer=tokenizer,
        workers=workers,
        command="OMP_NUM_THREADS=1 " + shown(command),
        date=now(),
        jsonl_bytes=jsonl_bytes,
        text_bytes=text_bytes,
        documents=meta["source"]["documents"],
        tokens=sum(s["tokens"] for s in meta["splits"].values()),
        split_tokens={k: s["tokens"] for k, s in meta["splits"].items()},
        shards=sum(len(s["shards"]) for s in meta["splits"].values()),
        out_disk_bytes=disk_bytes(out),
        reported_s=float(reported.group(1)) if reported else None,
        text_mb_s=round(text_bytes / MB / row["wall_s"], 3),
        jsonl_mb_s=round(jsonl_bytes / MB / row["wall_s"], 3),
        text_mb_s_per_worker=round(text_bytes / MB / row["wall_s"] / workers, 3),
    )
    shutil.rmtree(out, ignore_errors=True)
    return row


def run_baselines(path: Path, size: float) -> dict[str, Any]:
    """tiktoken's encode_ordinary_batch on one thread, the plain bytes encoding and the JSON reading, one pass."""
    from aot.data.tokenizers import GPT2Tokenizer

    enc = GPT2Tokenizer().encoding
    warm(path)
    timer = time.perf_counter
    read_s = tiktoken_s = bytes_s = 0.0
    documents = text_bytes = tokens = batches = 0
    batch: list[str] = []
    chars = 0

    def flush() -> None:
        nonlocal tiktoken_s, bytes_s, tokens, batches, text_bytes
        mark = timer()
        rows = enc.encode_ordinary_batch(batch, num_threads=1)
        tiktoken_s += timer() - mark
        tokens += sum(len(r) for r in rows)
        mark = timer()
        arrays = [np.frombuffer(text.encode("utf-8"), dtype=np.uint8) for text in batch]
        bytes_s += timer() - mark
        text_bytes += sum(len(a) for a in arrays)
        batches += 1

    contention = Contention()
    cpu_start = time.process_time()
    start = timer()
    with open(path, encoding="utf-8") as handle:
        mark = timer()
        for line in handle:
            text = json.loads(line)["text"]
            batch.append(text)
            chars += len(text)
            documents += 1
            if chars >= BATCH_CHARS:
                read_s += timer() - mark
                flush()
                batch, chars = [], 0
                mark = timer()
        read_s += timer() - mark
    if batch:
        flush()
    return {
        "kind": "tiktoken",
        "size_gb": size,
        "command": "in run.py: enc.encode_ordinary_batch(batch, num_threads=1) per batch of >= 1 Mi characters; "
        "np.frombuffer(text.encode('utf-8'), np.uint8) per document; json.loads(line)['text'] per line",
        "date": now(),
        "documents": documents,
        "text_bytes": text_bytes,
        "jsonl_bytes": path.stat().st_size,
        "batches": batches,
        "tokens": tokens,
        "bytes_per_token": round(text_bytes / max(tokens, 1), 3),
        "tiktoken_s": round(tiktoken_s, 2),
        "tiktoken_mb_s": round(text_bytes / MB / tiktoken_s, 3),
        "bytes_s": round(bytes_s, 3),
        "bytes_mb_s": round(text_bytes / MB / bytes_s, 1),
        "json_read_s": round(read_s, 2),
        "json_read_mb_s": round(text_bytes / MB / read_s, 2),
        "pass_s": round(timer() - start, 2),
        "pass_cpu_s": round(time.process_time() - cpu_start, 2),
        "other_cores": contention.cores(),
    }


def run_nanogpt(path: Path, work: Path, size: float) -> dict[str, Any]:
    scratch = work / f"nanogpt-{size_name(size)}"
    shutil.rmtree(scratch, ignore_errors=True)
    out, cache = scratch / "out", scratch / "hf-datasets-cache"
    command = [sys.executable, str(HERE / "nanogpt_prepare.py"), str(path), "--out", str(out)]
    command += ["--cache-dir", str(cache), "--num-proc", str(NANOGPT_PROCS)]
    env = child_env(
        HF_DATASETS_CACHE=str(cache),
        HF_HOME=str(scratch / "hf-home"),
        HF_DATASETS_OFFLINE="1",
        HF_HUB_OFFLINE="1",
    )
    warm(path)
    try:
        row = measure(command, env)
        report = json.loads(row["stdout"].splitlines()[-1])
        cache_bytes, out_bytes = disk_bytes(cache), disk_bytes(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text_bytes = _text_bytes(path)
    row.update(
        kind="nanogpt",
        size_gb=size,
        tokenizer="gpt2",
        workers=NANOGPT_PROCS,
        command="OMP_NUM_THREADS=1 HF_DATASETS_CACHE=... " + shown(command),
        date=now(),
        phases_s=report["seconds"],
        documents=sum(report["documents"].values()),
        tokens=sum(report["tokens"].values()),
        split_tokens=report["tokens"],
        jsonl_bytes=path.stat().st_size,
        text_bytes=text_bytes,
        cache_disk_bytes=cache_bytes,
        out_disk_bytes=out_bytes,
    )
    row["text_mb_s"] = round(text_bytes / MB / row["wall_s"], 3)
    row["text_mb_s_per_worker"] = round(text_bytes / MB / row["wall_s"] / NANOGPT_PROCS, 3)
    return row


def _text_bytes(path: Path) -> int:
    """The corpus's UTF-8 text bytes, as generate.py counted them (its sidecar JSON)."""
    return int(json.loads(path.with_name(path.name + ".json").read_text())["text_bytes"])


def run(args: argparse.Namespace) -> None:
    sizes = sorted({0.1} if args.quick else set(args.sizes))
    reference = 1.0 if 1.0 in sizes else sizes[0]
    only = args.only
    start = time.perf_counter()
    for size in sizes:
        path = corpus(args.work, size)
        rows = load().get("rows", {})
        todo: list[tuple[str, Any]] = []
        if size == reference and only in (None, "tiktoken"):
            todo.append((f"tiktoken/{size_name(size)}", lambda p=path, s=size: run_baselines(p, s)))
        if only in (None, "aot"):
            for tokenizer in TOKENIZERS:
                for workers in WORKERS:
                    todo.append(
                        (
                            f"aot/{size_name(size)}/{tokenizer}/w{workers}",
                            lambda p=path, s=size, t=tokenizer, w=workers: run_aot(p, args.work, s, t, w),
                        )
                    )
        if size == reference and only in (None, "nanogpt"):
            todo.append((f"nanogpt/{size_name(size)}", lambda p=path, s=size: run_nanogpt(p, args.work, s)))
        for key, job in todo:
            if key in rows and not args.force:
                print(f"skip {key} (recorded; --force measures it again)", flush=True)
                continue
            print(f"measuring {key} ...", flush=True)
            record(key, job())
    print(f"done in {time.perf_counter() - start:.0f} s", flush=True)


# -- rendering ----------------------------------------------------------------------------------------------------


def _reference_tiktoken(rows: dict[str, Any]) -> dict[str, Any] | None:
    found = [r for k, r in rows.items() if k.startswith("tiktoken/")]
    return max(found, key=lambda r: r["size_gb"]) if found else None


def render() -> str:
    results = load()
    rows: dict[str, Any] = results.get("rows", {})
    if not rows:
        raise SystemExit(f"{RESULTS} holds no rows yet; run benchmarks/data/run.py first")
    tik = _reference_tiktoken(rows)
    tik_rate = tik["tiktoken_mb_s"] if tik else None
    ours = sorted(
        (r for r in rows.values() if r.get("kind") == "aot"),
        key=lambda r: (r["size_gb"], TOKENIZERS.index(r["tokenizer"]), r["workers"]),
    )
    m, v = results.get("machine", {}), results.get("versions", {})
    lines = [
        f"## Results ({results.get('updated', '')})",
        "",
        f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('ram_gb', '?')} GiB RAM; aot "
        f"{v.get('aot', '?')} ({v.get('aot_commit', '?')}), tiktoken {v.get('tiktoken', '?')}, datasets "
        f"{v.get('datasets', '?')}, pyarrow {v.get('pyarrow', '?')}, numpy {v.get('numpy', '?')}. Synthetic web-like "
        "JSON lines (`generate.py`, seed 0); MB/s = UTF-8 text MB (10⁶ bytes) per second of wall time, start to "
        "exit; peak RSS = the largest sum over the process tree sampled every 0.1 s (PSS: shared pages split).",
        "",
        "| corpus | tokenizer | workers | wall s | MB/s | MB/s per worker | per worker ÷ tiktoken 1-proc "
        "| peak RSS MB (tree) | peak PSS MB | CPU s | others' cores |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in ours:
        ratio = f"{r['text_mb_s_per_worker'] / tik_rate:.2f}" if tik_rate else "–"
        lines.append(
            f"| {size_name(r['size_gb'])} GB | {r['tokenizer']} | {r['workers']} | {r['wall_s']:.1f} "
            f"| {r['text_mb_s']:.2f} | {r['text_mb_s_per_worker']:.2f} | {ratio} | {r['peak_rss_mb']:.0f} "
            f"| {r['peak_pss_mb']:.0f} | {r.get('cpu_s', nan):.1f} | {r.get('other_cores', nan):.2f} |"
        )
    busy = [r for r in rows.values() if r.get("other_cores", 0) > 0.2]
    lines += [
        "",
        "CPU s: user + system seconds of the whole tree. Others' cores: the cores other processes on the machine kept "
        "busy meanwhile (busy CPU time in /proc/stat less this benchmark's, over the wall time)"
        + (
            f"; {len(busy)} measurement(s) ran beside other work (> 0.2 cores): their times are pessimistic."
            if busy
            else "."
        ),
        "",
    ]
    if tik:
        lines.append(
            f"One process, one thread, {size_name(tik['size_gb'])} GB corpus ({tik['documents']:,} documents, "
            f"{tik['text_bytes'] / MB:,.0f} MB of text, {tik['bytes_per_token']:.2f} bytes per GPT-2 token), "
            "encode calls only: tiktoken `encode_ordinary_batch` in ~1 MB batches "
            f"**{tik['tiktoken_mb_s']:.2f} MB/s**; "
            f"`text.encode()` to numpy {tik['bytes_mb_s']:,.0f} MB/s; `json.loads` of the lines "
            f"{tik['json_read_mb_s']:.1f} MB/s (others' cores meanwhile: {tik.get('other_cores', float('nan')):.2f})."
        )
        lines.append("")

    nano = max((r for r in rows.values() if r.get("kind") == "nanogpt"), key=lambda r: r["size_gb"], default=None)
    if nano:
        size = nano["size_gb"]
        mine = next((r for r in ours if r["size_gb"] == size and r["tokenizer"] == "gpt2" and r["workers"] == 2), None)
        lines += [
            f"nanoGPT's OpenWebText method (`nanogpt_prepare.py`: HF datasets, `num_proc={nano['workers']}`) beside "
            f"`aot data prepare --tokenizer gpt2 --workers 2`, {size_name(size)} GB corpus:",
            "",
            "| method | wall s | MB/s | peak RSS MB (tree) | peak PSS MB | disk written GB | tokens |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, r, disk in (
            ("aot data prepare", mine, mine["out_disk_bytes"] if mine else 0),
            ("nanoGPT (datasets)", nano, nano["out_disk_bytes"] + nano["cache_disk_bytes"]),
        ):
            if r is None:
                continue
            mb_s = f"{r['text_mb_s']:.2f}" if r.get("text_mb_s") else "–"
            lines.append(
                f"| {name} | {r['wall_s']:.1f} | {mb_s} | {r['peak_rss_mb']:.0f} | {r['peak_pss_mb']:.0f} "
                f"| {disk / 1e9:.2f} | {r['tokens']:,} |"
            )
        p = nano["phases_s"]
        lines += [
            "",
            f"nanoGPT's phases: load into Arrow {p['load']:.1f} s, split {p['split']:.1f} s, map {p['map']:.1f} s, "
            f"write .bin {p['write']:.1f} s; its disk: {nano['cache_disk_bytes'] / 1e9:.2f} GB of datasets cache "
            f"(deleted after) + {nano['out_disk_bytes'] / 1e9:.2f} GB of .bin.",
            "",
        ]

    lines += ["Checks:", ""]
    lines += [f"- {line}" for line in checks(rows, ours, tik, nano)]
    return "\n".join(lines) + "\n"


def own_rate(row: dict[str, Any]) -> float:
    """MB/s of text per worker by ``aot data prepare``'s own timer (its summary line), 0 when it printed none."""
    return row["text_bytes"] / MB / row["reported_s"] / row["workers"] if row.get("reported_s") else 0.0


def checks(
    rows: dict[str, Any], ours: list[dict[str, Any]], tik: dict[str, Any] | None, nano: dict[str, Any] | None
) -> list[str]:
    out = []
    if ours:
        peak = max(r["peak_rss_mb"] for r in ours)
        sizes = sorted({r["size_gb"] for r in ours})
        growth = []
        for tokenizer in TOKENIZERS:
            for workers in WORKERS:
                same = [r for r in ours if r["tokenizer"] == tokenizer and r["workers"] == workers]
                by_size = {r["size_gb"]: r["peak_rss_mb"] for r in same}
                if len(by_size) > 1:
                    growth.append(by_size[max(by_size)] / by_size[min(by_size)])
        flat = all(g <= 1.2 for g in growth)
        how = f"largest ÷ smallest corpus at most {max(growth):.2f}×" if growth else "one size: flatness untested"
        ok = flat and peak <= 1000
        out.append(
            f"peak RSS flat in corpus size and <= 1 GB: {'yes' if ok else 'no'} (max {peak:.0f} MB; {how}; "
            f"sizes {', '.join(size_name(s) + ' GB' for s in sizes)})"
        )
    if tik:
        gpt2 = [r for r in ours if r["tokenizer"] == "gpt2"]
        if gpt2:
            rate = tik["tiktoken_mb_s"]
            ratios = {f"{size_name(r['size_gb'])} GB w{r['workers']}": r["text_mb_s_per_worker"] / rate for r in gpt2}
            ok = all(x >= 0.8 for x in ratios.values())
            detail = ", ".join(f"{k} {x:.2f}×" for k, x in ratios.items())
            inner = ", ".join(
                f"{size_name(r['size_gb'])} GB w{r['workers']} {own_rate(r) / rate:.2f}×" for r in gpt2 if own_rate(r)
            )
            out.append(
                f"MB/s per worker >= 0.8x tiktoken: {'yes' if ok else 'no'} (gpt2 rows: {detail}; tiktoken "
                f"{rate:.2f} MB/s on the {size_name(tik['size_gb'])} GB corpus; by aot's own timer, which leaves out "
                f"the interpreter's start and imports: {inner})"
            )
        same = [r for r in ours if r["tokenizer"] == "gpt2" and r["size_gb"] == tik["size_gb"]]
        expected = tik["tokens"] + tik["documents"]
        agree = [r["tokens"] == expected for r in same]
        if nano and nano["size_gb"] == tik["size_gb"]:
            agree.append(nano["tokens"] == expected)
        if agree:
            out.append(
                f"token counts agree (aot gpt2 rows{' and nanoGPT' if nano else ''} = tiktoken's + one end-of-text "
                f"per document = {expected:,}): {'yes' if all(agree) else 'no'}"
            )
    return out


README_TEMPLATE = """# `aot data prepare`: throughput and memory

What it measures: how fast `aot data prepare` turns JSON lines into llm.c token shards, and how much memory its
whole process tree holds, against tiktoken alone on one thread (the per-worker target: at least 0.8× tiktoken's
one-process rate) and against nanoGPT's OpenWebText method (HF `datasets`, `num_proc=2`).

- `generate.py --size-gb X --out FILE.jsonl [--seed S]` writes a synthetic web-like corpus: `{{"text": ...}}` lines,
  log-normal document lengths (median about 2.5 KB, up to 100 KB, 2 % one-liners), English-like prose from a
  Zipf-ranked word list (GPT-2's whole-word tokens after the commonest English words), glued rare words, names,
  numbers, punctuation, headings, lists, some non-ASCII; about 4.5 bytes per GPT-2 token. Deterministic for a seed.
- `run.py` measures, for 0.1, 1 and 4 GB corpora, `aot data prepare CORPUS --tokenizer {{bytes,gpt2}} --workers {{1,2}}
  --val-fraction 0.005 --test-fraction 0.005 --no-progress` as a subprocess: wall time from start to exit, MB/s of
  UTF-8 text (meta.json `source.bytes`; the JSON-lines bytes are in results.json too), MB/s per worker, and the peak
  of the summed RSS of the process and all its descendants, sampled every 0.1 s (also PSS, which counts pages shared
  by the forked workers once). On the 1 GB corpus it also times tiktoken's `encode_ordinary_batch(num_threads=1)` in
  ~1 MB batches (encode calls only), `text.encode()` to numpy and `json.loads` of the lines, and runs
  `nanogpt_prepare.py` (nanoGPT's method re-implemented: `load_dataset("json")`, `train_test_split(0.0005, seed
  2357)`, `map(encode_ordinary + eot, num_proc=2)`, uint16 memmap written in 1,024 batches) with its datasets cache in
  a scratch folder, whose disk use is recorded before it is deleted.

```
OMP_NUM_THREADS=1 .venv/bin/python benchmarks/data/run.py            # all sizes (resumable: recorded rows are skipped)
OMP_NUM_THREADS=1 .venv/bin/python benchmarks/data/run.py --quick    # 0.1 GB only
.venv/bin/python benchmarks/data/run.py --render                     # results.md and the table below
```

Options: `--sizes 0.1 1 4`, `--only aot|tiktoken|nanogpt`, `--force` (measure recorded rows again), `--work DIR`
(corpora, reused between runs, and outputs, deleted after each row; default /tmp/aot-data-bench: about 5.1 GB of
corpora plus at most 8 GB of shards at a time). Each row of results.json has its exact command, date, load average
and the machine.

How to read it: on a machine with C cores, `--workers N` runs N tokenizer processes plus the main process that reads
and parses the JSON, hashes and writes; with N = C they share the cores with it, so per-worker MB/s falls (CPU s and
"others' cores" say how busy the machine was). Wall times include the interpreter's start and `import aot` (about
2 s, a large share at 0.1 GB); the checks also give the rate by `aot data prepare`'s own timer, which leaves it out.
Corpora are read from the page cache (each row reads its file once first). RSS sums count pages shared with forked
workers once per process (an upper bound); PSS is the tree's real footprint. "Flat in corpus size" means the peak
RSS of each tokenizer / workers pair at the largest corpus is at most 1.2× its peak at the smallest. The corpus
repeats paragraphs from a pool of 100,000, which changes nothing for tiktoken (it keeps no cache between calls).

{start}
{table}
{end}
"""


def write_render() -> None:
    table = render()
    RESULTS_MD.write_text(table)
    if README.is_file():
        text = README.read_text()
        if TABLE_START in text and TABLE_END in text:
            head, rest = text.split(TABLE_START, 1)
            tail = rest.split(TABLE_END, 1)[1]
            README.write_text(f"{head}{TABLE_START}\n{table}{TABLE_END}{tail}")
            print(f"wrote {RESULTS_MD} and the table of {README}")
            return
    README.write_text(README_TEMPLATE.format(start=TABLE_START, table=table.rstrip("\n"), end=TABLE_END))
    print(f"wrote {RESULTS_MD} and {README}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=list(SIZES), help="corpus sizes in GB")
    parser.add_argument("--quick", action="store_true", help="the 0.1 GB corpus only (a smoke test)")
    parser.add_argument("--only", choices=("nanogpt", "aot", "tiktoken"), help="one kind of row")
    parser.add_argument("--force", action="store_true", help="measure rows that are already recorded again")
    parser.add_argument("--work", type=Path, default=Path("/tmp/aot-data-bench"), help="corpora and outputs")
    parser.add_argument("--render", action="store_true", help="write results.md and README.md, measure nothing")
    args = parser.parse_args(argv)
    if args.render:
        write_render()
        return
    run(args)


if __name__ == "__main__":
    main()
