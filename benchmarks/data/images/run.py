"""Throughput and memory of the image pipeline (``ImageStream``: decode + RandomResizedCrop(224) + flip in DataLoader
workers) on an ImageNet-layout folder and on its tar shards, against a plain PIL loop in one process.

    OMP_NUM_THREADS=1 python benchmarks/data/images/run.py --folder /tmp/aot-images/10k    # measure, then --render
    python benchmarks/data/images/run.py --render                # results.md and README.md's table from results.json

Rows of results.json, keyed ``SET/SOURCE/METHOD`` (SET: the folder's name; SOURCE: ``folder``, or ``tar`` for the
shards ``aot data pack-images`` wrote from it into ``--shards``, default ``FOLDER-shards``):

- ``pack``: ``aot data pack-images FOLDER --out SCRATCH --shard-mb 1024`` as a subprocess, into a fresh folder each
  time (the last one becomes the shards the ``tar`` rows read); MB/s = the folder's JPEG bytes / wall time;
- ``stream-wN``: the trainer's batch source, built as ``aot train vision`` builds it (``VisionDataConfig(dataset,
  workers=N, ImageNet's mean / std)``, ``open_images`` with the default 10 % held out, ``recipe_of(..., 224, 3)``:
  RandomResizedCrop(224, scale 0.08-1) + flip, ``batch_source(..., batch_size=256, seed=0)``); ``get(0)`` is the
  warm-up (worker start, first batch), then ``get(1..STEPS)`` is timed: images/s = STEPS × 256 / that time. Batches
  come out as uint8 pixels, as they travel to the training device (``ModelInputs`` normalises them there). N = 0
  decodes in the calling process;
- ``pil``: the limit, one process: ``Image.open(path).convert("RGB").resize((224, 224), Image.BILINEAR)`` over the
  very images ``get(1..STEPS)`` decodes (for ``tar``, ``Image.open`` of the bytes one ``pread`` returns), after the
  images of step 0 as a warm-up;
- ``pil-xN`` (for each N > 1 of ``--workers``): N such loops at once, each in its own process over the same images
  (images/s summed): the limit of N decoding processes on this machine, which ``stream-wN`` can be held against.

Each measurement is a fresh subprocess (``run.py --measure``), repeated ``--repeats`` times (round-robin over the
rows), and the medians are reported. A thread samples the process tree (the subprocess and its DataLoader workers):
the peak of the summed RSS every 50 ms (``VmRSS``: a page shared by the main process and its forked workers counts
once per process, an upper bound) and of the summed PSS every 0.5 s (``smaps_rollup``: shared pages split among their
sharers, the tree's real footprint; reading it is too costly to do more often: benchmarks/data/run.py's
``TreeSampler``). Before the timed part the subprocess reads the measured images' bytes once, so they come from the
page cache: the rates are CPU rates (decode and resize), not disk rates.

Resumable: each run is saved to results.json as it ends; a row already holding ``--repeats`` runs with the same
settings (folder, steps, batch size, shard size) is skipped, unless ``--force``.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

from aot.runinfo import replace_marked_block

os.environ["OMP_NUM_THREADS"] = "1"

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
RESULTS_MD = HERE / "results.md"
README = HERE / "README.md"
TABLE_MARKER = "images:table"  # README.md's generated table: <!-- images:table --> ... <!-- /images:table -->
TABLE_START = f"<!-- {TABLE_MARKER} -->"
IMAGE_SIZE = 224
BATCH_SIZE = 256
STEPS = 12  # timed batches: a multiple of every worker count measured (see measure_stream)
WORKERS = (1, 2)
REPEATS = 3
SHARD_MB = 1024.0  # aot data pack-images' default
SAMPLE_S = 0.05
PSS_EVERY = 10  # samples: PSS every 0.5 s (the text benchmark's TreeSampler says why)
QUIET_CORES = 0.3  # a run during which other processes kept more cores busy than this is done again
ATTEMPTS = 3
QUIET_WAIT_S = 90.0
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
MB = 1e6


def _text_benchmark() -> Any:
    """``benchmarks/data/run.py`` (the text-data benchmark), for its process-tree sampler and machine description."""
    spec = importlib.util.spec_from_file_location("aot_text_data_benchmark", HERE.parent / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


text_bench = _text_benchmark()


# -- one measurement, in a subprocess -----------------------------------------------------------------------------


class RawBytes:
    """The encoded bytes of image ``i`` of a split as the pipeline reads them: a file's content, or one ``pread`` at
    the image's offset in its tar shard."""

    def __init__(self, split: Any) -> None:
        self.split = split
        self.handles: dict[int, int] = {}  # shard number -> file descriptor

    def __call__(self, i: int) -> bytes:
        if hasattr(self.split, "path"):
            return self.split.path(i).read_bytes()
        row = self.split.index[i]
        shard = int(row["shard"])
        if shard not in self.handles:
            self.handles[shard] = os.open(self.split.shards[shard], os.O_RDONLY)
        return os.pread(self.handles[shard], int(row["size"]), int(row["offset"]))


def trainer_stream(data_path: str, workers: int, batch_size: int, seed: int) -> Any:
    """The ``ImageStream`` ``aot train vision --data DATA`` trains from (``VisionTask.load_data`` and ``setup``), with
    ImageNet's mean / std given (as the paper's configs do) so no statistics are computed first."""
    from aot.data.images import open_images
    from aot.tasks.vision import VisionDataConfig
    from aot.tasks.vision_inputs import batch_source, recipe_of

    cfg = VisionDataConfig(dataset=data_path, workers=workers, mean=IMAGENET_MEAN, std=IMAGENET_STD)
    data = open_images(cfg.dataset, cfg.val_size)
    recipe = recipe_of(data, cfg, IMAGE_SIZE, 3)
    return batch_source(data, cfg, batch_size, seed, recipe)[0]  # (the stream, what normalises on the device)


def children_cpu_s() -> float:
    """User + system CPU seconds the live descendants of this process (the DataLoader workers) have used so far."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def read_once(split: Any, indices: list[int]) -> float:
    """Read the images' bytes once (into the page cache); returns the seconds it took."""
    start, raw = time.perf_counter(), RawBytes(split)
    for i in indices:
        raw(i)
    return time.perf_counter() - start


def measure_stream(data_path: str, workers: int, steps: int, batch_size: int, seed: int) -> dict[str, Any]:
    """images/s of ``get(step)`` for steps 1..``steps`` of the trainer's stream, after ``get(0)``.

    Why this times the rate: the workers decode whole batches (worker k takes batches k, k + N, ...), and the
    training process consumes them faster than they come, so when ``get(0)`` returns every worker is about done with
    its first batch and when ``get(steps)`` returns (``steps`` a multiple of N) every worker has just done
    ``steps / N`` more: the window holds ``steps`` batches of work per N workers."""
    start = time.perf_counter()
    stream = trainer_stream(data_path, workers, batch_size, seed)
    setup_s = time.perf_counter() - start
    indices = [int(i) for step in range(steps + 1) for i in stream.order(step)]
    read_s = read_once(stream.split, indices)
    mark = time.perf_counter()
    stream.get(0)
    first_s = time.perf_counter() - mark
    mark, cpu, workers_cpu = time.perf_counter(), time.process_time(), children_cpu_s()
    for step in range(1, steps + 1):
        images, labels = stream.get(step)
    seconds, main_cpu_s = time.perf_counter() - mark, time.process_time() - cpu
    workers_cpu_s = children_cpu_s() - workers_cpu
    if tuple(images.shape) != (batch_size, 3, IMAGE_SIZE, IMAGE_SIZE) or len(labels) != batch_size:
        raise SystemExit(f"unexpected batch {tuple(images.shape)} of {len(labels)} labels")
    stream.close()
    timed = steps * batch_size
    decode_cpu_s = workers_cpu_s if workers else main_cpu_s
    return {
        "train_images": len(stream.split),
        "timed_images": timed,
        "decoded_images": timed + batch_size,
        "seconds": round(seconds, 3),
        "images_s": round(timed / seconds, 1),
        "main_cpu_s": round(main_cpu_s, 2),  # the training process's own CPU time in the window (collate, normalise)
        "workers_cpu_s": round(workers_cpu_s, 2),  # the workers' CPU time in the window
        "images_per_cpu_s": round(timed / decode_cpu_s, 1),  # per CPU second of the decoding processes
        "first_batch_s": round(first_s, 2),
        "setup_s": round(setup_s, 2),
        "read_s": round(read_s, 2),
        "unreadable": sum(stream.unreadable.values()),
    }


def measure_pil_copies(data_path: str, steps: int, batch_size: int, seed: int, copies: int) -> dict[str, Any]:
    """:func:`measure_pil` in ``copies`` forked processes at once (their timed windows overlap: the same work, started
    together): images/s summed, the mean images per CPU second, each copy's numbers under ``copies_runs``."""
    if copies == 1:
        return measure_pil(data_path, steps, batch_size, seed)
    with multiprocessing.get_context("fork").Pool(copies) as pool:
        runs = pool.starmap(measure_pil, [(data_path, steps, batch_size, seed)] * copies)
    return {
        **runs[0],
        "copies": copies,
        "timed_images": sum(r["timed_images"] for r in runs),
        "decoded_images": sum(r["decoded_images"] for r in runs),
        "seconds": max(r["seconds"] for r in runs),
        "images_s": round(sum(r["images_s"] for r in runs), 1),
        "images_per_cpu_s": round(statistics.mean(r["images_per_cpu_s"] for r in runs), 1),
        "copies_runs": runs,
    }


def measure_pil(data_path: str, steps: int, batch_size: int, seed: int) -> dict[str, Any]:
    """images/s of a plain PIL loop in this process over the images ``get(1..steps)`` decodes (step 0's images
    first, untimed): ``Image.open(path or bytes).convert("RGB").resize((224, 224), Image.BILINEAR)``."""
    from PIL import Image

    start = time.perf_counter()
    stream = trainer_stream(data_path, 0, batch_size, seed)  # for its split and order only: nothing is decoded
    split, order = stream.split, stream.order
    warm_up = [int(i) for i in order(0)]
    timed = [int(i) for step in range(1, steps + 1) for i in order(step)]
    setup_s = time.perf_counter() - start
    read_s = read_once(split, warm_up + timed)
    raw = RawBytes(split)

    def source(i: int) -> Any:
        return split.path(i) if hasattr(split, "path") else io.BytesIO(raw(i))

    def decode(indices: list[int]) -> None:
        for i in indices:
            Image.open(source(i)).convert("RGB").resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)

    decode(warm_up)
    mark, cpu = time.perf_counter(), time.process_time()
    decode(timed)
    seconds, cpu_s = time.perf_counter() - mark, time.process_time() - cpu
    return {
        "train_images": len(split),
        "timed_images": len(timed),
        "decoded_images": len(timed) + len(warm_up),
        "seconds": round(seconds, 3),
        "images_s": round(len(timed) / seconds, 1),
        "images_per_cpu_s": round(len(timed) / cpu_s, 1),
        "setup_s": round(setup_s, 2),
        "read_s": round(read_s, 2),
    }


# -- the parent: subprocesses, sampled ----------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def run_sampled(command: list[str]) -> dict[str, Any]:
    """Run ``command`` as a subprocess through the text benchmark's ``measure``: timing it, sampling its process
    tree's RSS every 50 ms and PSS every 0.5 s, its CPU time and the cores other processes kept busy meanwhile. The
    last line of its stdout, when JSON, is merged into the result."""
    row = text_bench.measure(command, child_env(), SAMPLE_S, PSS_EVERY)
    lines = row.pop("stdout").splitlines()
    reported = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {"stdout": "\n".join(lines)[-1000:]}
    return {**reported, **row, "date": text_bench.now()}


def wait_for_quiet(limit_s: float) -> dict[str, float]:
    """Wait (probing 2 s at a time, at most ``limit_s``) until other processes keep fewer than ``QUIET_CORES``
    cores busy; returns the seconds waited and the last probe."""
    start = time.perf_counter()
    while True:
        probe = text_bench.Contention()
        time.sleep(2.0)
        busy = probe.cores()
        waited = time.perf_counter() - start
        if busy < QUIET_CORES or waited >= limit_s:
            return {"waited_s": round(waited, 1), "other_cores_before": busy}


def quiet_run(run: Callable[[], dict[str, Any]], quiet_wait_s: float) -> dict[str, Any]:
    """``run()`` once the machine is quiet, again (up to ``ATTEMPTS`` in all) while other processes kept more than
    ``QUIET_CORES`` cores busy during it; the least disturbed attempt, with every attempt's ``other_cores``."""
    attempts: list[dict[str, Any]] = []
    while len(attempts) < ATTEMPTS:
        gate = wait_for_quiet(quiet_wait_s)
        attempts.append({**run(), **gate})
        if attempts[-1]["other_cores"] < QUIET_CORES:
            break
        print(f"  others kept {attempts[-1]['other_cores']:.2f} cores busy meanwhile: again", flush=True)
    best = min(attempts, key=lambda a: a["other_cores"])
    return {**best, "attempts_other_cores": [a["other_cores"] for a in attempts]}


def aot_executable() -> str:
    beside = Path(sys.executable).with_name("aot")
    return str(beside) if beside.is_file() else (shutil.which("aot") or "aot")


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*/*/*") if p.is_file())


class Bench:
    """The rows of one folder and its shards, each measured until it holds ``repeats`` runs of its settings."""

    def __init__(self, folder: Path, shards: Path, args: argparse.Namespace) -> None:
        self.folder, self.shards, self.name = folder.resolve(), shards.resolve(), folder.resolve().name
        self.steps, self.repeats, self.workers, self.force = args.steps, args.repeats, args.workers, args.force
        self.quiet_wait_s = args.quiet_wait
        self.source_bytes = folder_bytes(self.folder)

    def settings(self, method: str, source: str) -> dict[str, Any]:
        out = {"folder": str(self.folder), "source": source, "method": method, "shard_mb": SHARD_MB}
        out["pipeline"] = PIPELINE.get(method.split("-")[0], "")  # a change of the measured code measures again
        if method != "pack":
            out.update(steps=self.steps, batch_size=BATCH_SIZE, image_size=IMAGE_SIZE)
        return out

    def rows(self) -> list[tuple[str, str]]:
        """(source, method) of every row, the packing first (the tar rows read its shards)."""
        methods = ["pil", *(f"pil-x{n}" for n in self.workers if n > 1), *(f"stream-w{n}" for n in self.workers)]
        return [("folder", "pack"), *((source, m) for source in ("folder", "tar") for m in methods)]

    def command(self, source: str, method: str, out: Path | None = None) -> list[str]:
        if method == "pack":
            return [aot_executable(), "data", "pack-images", str(self.folder), "--out", str(out)]
        data = self.folder if source == "folder" else self.shards
        command = [sys.executable, str(Path(__file__).resolve()), "--measure", method.split("-")[0], "--data"]
        command += [str(data), "--steps", str(self.steps), "--batch-size", str(BATCH_SIZE)]
        count = method.partition("-")[2][1:]  # stream-wN, pil-xN: N
        return command + (["--workers" if method.startswith("stream") else "--copies", count] if count else [])

    def measure(self, source: str, method: str) -> dict[str, Any]:
        """One run of a row; for ``pack``, into a scratch folder that becomes ``shards`` unless they exist."""
        if method != "pack":
            return {**run_sampled(self.command(source, method)), "command": shown(self.command(source, method))}
        scratch = self.shards.with_name(self.shards.name + ".partial")
        shutil.rmtree(scratch, ignore_errors=True)
        command = self.command(source, method, scratch)
        row = run_sampled(command)
        meta = json.loads((scratch / "meta.json").read_text())
        os.sync()  # write the shards back now, not during the next measurement
        row.update(
            command=shown(command),
            source_bytes=self.source_bytes,
            images=sum(s["images"] for s in meta["splits"].values()),
            shards=sum(len(s["shards"]) for s in meta["splits"].values()),
            mb_s=round(self.source_bytes / MB / row["wall_s"], 1),
        )
        row["images_s"] = round(row["images"] / row["wall_s"], 1)
        if (self.shards / "meta.json").is_file():
            shutil.rmtree(scratch)
        else:
            shutil.rmtree(self.shards, ignore_errors=True)
            scratch.rename(self.shards)
        return row

    def run(self) -> None:
        for repeat in range(self.repeats):
            for source, method in self.rows():
                key = f"{self.name}/{source}/{method}"
                row = load()["rows"].get(key, {})
                if (self.force and repeat == 0) or row.get("settings") != self.settings(method, source):
                    row = {"settings": self.settings(method, source), "runs": []}
                if len(row["runs"]) > repeat:
                    continue
                print(f"{key} run {repeat + 1}/{self.repeats} ...", flush=True)
                row["runs"].append(quiet_run(partial(self.measure, source, method), self.quiet_wait_s))
                row["median"] = medians(row["runs"])
                record(key, row)
        if not (self.shards / "meta.json").is_file():  # packing recorded earlier, shards deleted since
            subprocess.run(self.command("folder", "pack", self.shards), check=True, env=child_env())


#: what changed in the measured code since a row was recorded: uint8 batches (normalised on the training device);
#: shards written image by image
PIPELINE = {"stream": "uint8 batches", "pack": "streamed shards"}

MEDIAN_FIELDS = (
    *("images_s", "seconds", "wall_s", "peak_rss_mb", "peak_pss_mb", "max_process_hwm_mb", "cpu_s"),
    *("main_cpu_s", "workers_cpu_s", "images_per_cpu_s", "mb_s", "other_cores"),
)


def medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {f: round(statistics.median(r[f] for r in runs), 2) for f in MEDIAN_FIELDS if all(f in r for r in runs)}


def shown(command: list[str]) -> str:
    """``command`` as recorded: OMP_NUM_THREADS=1, the interpreter as python, paths in the checkout relative to it."""
    root = str(HERE.parents[2])
    return "OMP_NUM_THREADS=1 " + " ".join(command).replace(sys.executable, "python").replace(root + "/", "")


# -- the record ---------------------------------------------------------------------------------------------------


def load() -> dict[str, Any]:
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"rows": {}, "sets": {}}


def save(results: dict[str, Any]) -> None:
    scratch = RESULTS.with_name(f".{RESULTS.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps(results, indent=1) + "\n")
    os.replace(scratch, RESULTS)


def versions() -> dict[str, str]:
    out = {k: v for k, v in text_bench.versions().items() if k in ("aot", "numpy", "psutil", "aot_commit")}
    for name in ("torch", "pillow"):
        out[name] = metadata.version(name)
    from PIL import features

    out["libjpeg_turbo"] = str(features.version("libjpeg_turbo"))
    return out


def record(key: str, row: dict[str, Any]) -> None:
    """Save one row to results.json (read again first: the file is the only state), atomically."""
    results = load()
    results["rows"][key] = row
    results["machine"], results["versions"], results["updated"] = text_bench.machine(), versions(), text_bench.now()
    save(results)
    run = row["runs"][-1]
    print(
        f"recorded {key}: {run.get('images_s', 0):.0f} images/s, peak RSS {run['peak_rss_mb']:.0f} MB "
        f"(PSS {run['peak_pss_mb']:.0f} MB), wall {run['wall_s']:.1f} s",
        flush=True,
    )


def record_set(folder: Path) -> None:
    """The folder's generate.json (how it was made) into results.json's ``sets``."""
    marker = folder / "generate.json"
    results = load()
    results.setdefault("sets", {})[folder.resolve().name] = {
        "folder": str(folder.resolve()),
        **(json.loads(marker.read_text()) if marker.is_file() else {}),
        "bytes_on_disk": folder_bytes(folder),
    }
    save(results)


# -- the tables ---------------------------------------------------------------------------------------------------


def set_order(results: dict[str, Any]) -> list[str]:
    """The measured sets, smallest first."""
    names = {key.split("/")[0] for key in results["rows"]}
    return sorted(names, key=lambda n: results.get("sets", {}).get(n, {}).get("images", 0))


def decoders(method: str) -> int:
    """The decoding processes of a row's method: N for ``stream-wN`` (w0: the calling process, 1) and ``pil-xN``, 1
    for ``pil``."""
    return max(int(method.partition("-")[2][1:] or 1), 1)


def ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}" if b else "–"


def render() -> str:
    results = load()
    rows, sets = results["rows"], results.get("sets", {})
    m, v = results["machine"], results["versions"]
    lines = [
        f"## Results ({results['updated']})",
        "",
        f"{m['cpu']}, {m['usable_cores']} cores, {m['ram_gb']} GiB RAM; aot {v['aot']} ({v.get('aot_commit', '?')}), "
        f"torch {v['torch']}, Pillow {v['pillow']} (libjpeg-turbo {v['libjpeg_turbo']}), numpy {v['numpy']}. "
        "Medians over runs, each a fresh process. images/s: the timed images over the timed seconds (batches 1.. "
        "after the warm-up batch 0, read from the page cache); per CPU s: the timed images over the CPU seconds the "
        "decoding processes (the workers; the process itself for w0 and the PIL loop) used in that window; peak RSS / "
        "PSS: the largest sum over the process tree (main + DataLoader workers) sampled every 50 ms (PSS: every "
        "0.5 s, so it can miss a short peak), over the whole run; others: the cores other processes kept busy "
        "meanwhile.",
        "",
        "| set | source | method | runs | images/s | per worker | ÷ PIL loop | per CPU s | ÷ PIL loop | timed images "
        "| timed s | wall s | peak RSS MB (tree) | peak PSS MB | processes | others |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in set_order(results):
        for source in ("folder", "tar"):
            pil = rows.get(f"{name}/{source}/pil", {}).get("median", {})
            for key, row in sorted(rows.items()):
                if not key.startswith(f"{name}/{source}/") or key.endswith("/pack"):
                    continue
                med, last, method = row["median"], row["runs"][-1], key.rsplit("/", 1)[1]
                per, cpu = med["images_s"] / decoders(method), med["images_per_cpu_s"]
                lines.append(
                    f"| {name} | {source} | {method} | {len(row['runs'])} | {med['images_s']:.0f} | {per:.0f} "
                    f"| {ratio(per, pil.get('images_s'))} | {cpu:.0f} | {ratio(cpu, pil.get('images_per_cpu_s'))} "
                    f"| {last['timed_images']:,} | {med['seconds']:.1f} | {med['wall_s']:.1f} "
                    f"| {med['peak_rss_mb']:.0f} | {med['peak_pss_mb']:.0f} | {last['processes']} "
                    f"| {med['other_cores']:.2f} |"
                )
    lines += [
        "",
        "Per worker: images/s ÷ decoding processes (workers; PIL loops at once for pil-xN). ÷ PIL loop: per worker "
        "÷ the same set and source's one-process PIL loop (open, convert RGB, resize to 224², no crop, no flip, no "
        "normalising, no batching), by wall time and by CPU time.",
        "",
        "Packing into tar shards (`aot data pack-images`, 1 GB shards, wall time from start to exit):",
        "",
        "| set | images | MB of JPEG | shards | wall s | MB/s | images/s | peak RSS MB | peak PSS MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in set_order(results):
        row = rows.get(f"{name}/folder/pack")
        if row:
            med, last = row["median"], row["runs"][-1]
            lines.append(
                f"| {name} | {last['images']:,} | {last['source_bytes'] / MB:,.0f} | {last['shards']} "
                f"| {med['wall_s']:.1f} | {med['mb_s']:.0f} | {last['images'] / med['wall_s']:,.0f} "
                f"| {med['peak_rss_mb']:.0f} | {med['peak_pss_mb']:.0f} |"
            )
    lines += ["", "Sets (`generate.py`):", ""]
    for name in set_order(results):
        s = sets.get(name, {})
        if s:
            lines.append(
                f"- {name}: {s['images']:,} JPEGs ({s['train']:,} train, {s['val']:,} val, 100 classes), "
                f"{s['bytes'] / MB:,.0f} MB, {s['mean_kb']} KB on average; generated at {s['images_s']:,.0f} "
                f"images/s with {s['processes']} processes"
            )
    lines += ["", "Checks:", ""]
    lines += [f"- {line}" for line in checks(results)]
    return "\n".join(lines) + "\n"


def checks(results: dict[str, Any]) -> list[str]:
    """The claims the rows support or not: memory flat in the set's size, per-worker rate against the PIL loop, two
    workers against one, tar shards against the folder."""
    rows, names = results["rows"], set_order(results)

    def med(key: str, field: str) -> float | None:
        return rows.get(key, {}).get("median", {}).get(field)

    out = []
    methods = sorted({k.split("/", 1)[1] for k in rows if "/stream-" in k})
    if len(names) > 1:
        small, large = names[0], names[-1]
        ratios = {}
        for m in methods:
            big, little = rows.get(f"{large}/{m}"), rows.get(f"{small}/{m}")
            if big and little:
                ratios[m] = tuple(big["median"][f] / little["median"][f] for f in ("peak_rss_mb", "peak_pss_mb"))
        if ratios:
            worst = max(max(r) for r in ratios.values())
            detail = ", ".join(f"{m} RSS {r:.3f}× PSS {p:.3f}×" for m, (r, p) in ratios.items())
            out.append(
                f"peak memory flat from {small} to {large} images (at most 1.10×): {'yes' if worst <= 1.1 else 'no'} "
                f"({large} ÷ {small}: {detail})"
            )
    for name in names:
        for source in ("folder", "tar"):
            pil, pil_cpu = med(f"{name}/{source}/pil", "images_s"), med(f"{name}/{source}/pil", "images_per_cpu_s")
            parts = []
            for m in methods:
                rate = med(f"{name}/{m}", "images_s") if m.startswith(source + "/") else None
                if pil and pil_cpu and rate:
                    cpu = med(f"{name}/{m}", "images_per_cpu_s") or 0.0
                    by_wall, by_cpu = rate / decoders(m) / pil, cpu / pil_cpu
                    parts.append(f"{m.split('/')[1]} {by_wall:.2f}× by wall time, {by_cpu:.2f}× by CPU")
            if parts:
                out.append(
                    f"{name} {source}: per worker ÷ PIL loop ({pil:.0f}/s, {pil_cpu:.0f} per CPU s): {', '.join(parts)}"
                )
            one, two = med(f"{name}/{source}/stream-w1", "images_s"), med(f"{name}/{source}/stream-w2", "images_s")
            limit = med(f"{name}/{source}/pil-x2", "images_s")
            if one and two:
                w2 = rows[f"{name}/{source}/stream-w2"]["median"]
                busy = w2["main_cpu_s"] / w2["seconds"]
                beside = ""
                if limit and pil:
                    beside = f"; 2 PIL loops at once: {limit / pil:.2f}× one, w2 ÷ them {two / limit:.2f}×"
                out.append(
                    f"{name} {source}: 2 workers ÷ 1 worker {two / one:.2f}× (the training process itself was busy "
                    f"{busy:.0%} of the w2 window: collating and normalising{beside})"
                )
        parts = []
        for m in ("pil", *(m.split("/")[1] for m in methods if m.startswith("folder/"))):
            folder, tar = med(f"{name}/folder/{m}", "images_s"), med(f"{name}/tar/{m}", "images_s")
            rss_f, rss_t = med(f"{name}/folder/{m}", "peak_rss_mb"), med(f"{name}/tar/{m}", "peak_rss_mb")
            if folder and tar and rss_f and rss_t:
                parts.append(f"{m} images/s {tar / folder:.2f}×, peak RSS {rss_t / rss_f:.2f}×")
        if parts:
            out.append(f"{name}: tar shards ÷ folder: {'; '.join(parts)}")
    return out


def write_render() -> None:
    table = render()
    RESULTS_MD.write_text(table)
    if README.is_file() and TABLE_START in README.read_text():
        README.write_text(replace_marked_block(README.read_text(), TABLE_MARKER, table.rstrip("\n"), README))
    print(f"wrote {RESULTS_MD}" + (" and the table of README.md" if README.is_file() else ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, help="an ImageNet-layout folder (generate.py writes one)")
    parser.add_argument("--shards", type=Path, help="where its tar shards go (default: FOLDER-shards)")
    parser.add_argument("--steps", type=int, default=STEPS, help=f"timed batches of {BATCH_SIZE} (default {STEPS})")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs per row, the median reported")
    parser.add_argument("--workers", type=int, nargs="+", default=list(WORKERS), help="ImageStream workers to try")
    parser.add_argument("--force", action="store_true", help="measure recorded rows again")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=QUIET_WAIT_S,
        help=f"seconds to wait, before each run, for other processes to use under {QUIET_CORES} cores",
    )
    parser.add_argument("--render", action="store_true", help="write results.md and README.md's table, measure nothing")
    parser.add_argument("--measure", choices=("stream", "pil"), help=argparse.SUPPRESS)  # one run, in a subprocess
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--copies", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure == "stream":
        print(json.dumps(measure_stream(args.data, args.workers[0], args.steps, args.batch_size, args.seed)))
    elif args.measure == "pil":
        print(json.dumps(measure_pil_copies(args.data, args.steps, args.batch_size, args.seed, args.copies)))
    elif args.render:
        write_render()
    elif args.folder is None:
        parser.error("give --folder (or --render)")
    else:
        if any(args.steps % max(n, 1) for n in args.workers):
            parser.error(f"--steps {args.steps} must be a multiple of every --workers count (see measure_stream)")
        record_set(args.folder)
        shards = args.shards or args.folder.with_name(args.folder.name + "-shards")
        Bench(args.folder, shards, args).run()
        write_render()


if __name__ == "__main__":
    main()
