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
  come out normalised float32, as the model gets them. N = 0 decodes in the calling process;
- ``pil``: the limit, one process: ``Image.open(path).convert("RGB").resize((224, 224), Image.BILINEAR)`` over the
  very images ``get(1..STEPS)`` decodes (for ``tar``, ``Image.open`` of the bytes one ``pread`` returns), after the
  images of step 0 as a warm-up.

Each measurement is a fresh subprocess (``run.py --measure``), repeated ``--repeats`` times (round-robin over the
rows), and the medians are reported. A thread samples every 50 ms the process tree (the subprocess and its DataLoader
workers): the peak of the summed RSS (``VmRSS``: a page shared by the main process and its forked workers counts once
per process, an upper bound) and of the summed PSS (``smaps_rollup``: shared pages split among their sharers, the
tree's real footprint). Before the timed part the subprocess reads the measured images' bytes once, so they come from
the page cache: the rates are CPU rates (decode and resize), not disk rates.

Resumable: each run is saved to results.json as it ends; a row already holding ``--repeats`` runs with the same
settings (folder, steps, batch size, shard size) is skipped, unless ``--force``.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

os.environ["OMP_NUM_THREADS"] = "1"

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
RESULTS_MD = HERE / "results.md"
README = HERE / "README.md"
TABLE_START, TABLE_END = "<!-- images:table -->", "<!-- /images:table -->"
IMAGE_SIZE = 224
BATCH_SIZE = 256
STEPS = 12  # timed batches: a multiple of every worker count measured (see measure_stream)
WORKERS = (0, 1, 2)
REPEATS = 3
SHARD_MB = 1024.0  # aot data pack-images' default
SAMPLE_S = 0.05
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
        self.split, self.handles = split, {}

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
    return batch_source(data, cfg, batch_size, seed, recipe)


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
    mark, cpu = time.perf_counter(), time.process_time()
    for step in range(1, steps + 1):
        images, labels = stream.get(step)
    seconds, main_cpu_s = time.perf_counter() - mark, time.process_time() - cpu
    if tuple(images.shape) != (batch_size, 3, IMAGE_SIZE, IMAGE_SIZE) or len(labels) != batch_size:
        raise SystemExit(f"unexpected batch {tuple(images.shape)} of {len(labels)} labels")
    stream.close()
    timed = steps * batch_size
    return {
        "train_images": len(stream.split),
        "timed_images": timed,
        "decoded_images": timed + batch_size,
        "seconds": round(seconds, 3),
        "images_s": round(timed / seconds, 1),
        "main_cpu_s": round(main_cpu_s, 2),  # the training process's own CPU time in the window (collate, normalise)
        "first_batch_s": round(first_s, 2),
        "setup_s": round(setup_s, 2),
        "read_s": round(read_s, 2),
        "unreadable": sum(stream.unreadable.values()),
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
    mark = time.perf_counter()
    decode(timed)
    seconds = time.perf_counter() - mark
    return {
        "train_images": len(split),
        "timed_images": len(timed),
        "decoded_images": len(timed) + len(warm_up),
        "seconds": round(seconds, 3),
        "images_s": round(len(timed) / seconds, 1),
        "setup_s": round(setup_s, 2),
        "read_s": round(read_s, 2),
    }


# -- the parent: subprocesses, sampled ----------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def run_sampled(command: list[str]) -> dict[str, Any]:
    """Run ``command`` as a subprocess, timing it and sampling its process tree's RSS and PSS every 50 ms (the text
    benchmark's sampler); its CPU time and the cores other processes kept busy meanwhile. The last line of its
    stdout, when JSON, is merged into the result."""
    load_before = [round(x, 2) for x in os.getloadavg()]
    contention = text_bench.Contention()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    sampler = text_bench.TreeSampler(proc.pid, interval=SAMPLE_S)
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    sampler.stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{stderr[-4000:]}")
    lines = stdout.strip().splitlines()
    reported = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {"stdout": stdout.strip()[-1000:]}
    return {
        **reported,
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(sampler.peak_rss_kb * 1024 / MB, 1),
        "peak_pss_mb": round(sampler.peak_pss_kb * 1024 / MB, 1),
        "max_process_hwm_mb": round(sampler.max_hwm_kb * 1024 / MB, 1),  # the peak RSS of the largest process
        "processes": sampler.max_processes,
        "samples": sampler.samples,
        "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
        "other_cores": contention.cores(),
        "load_average_before": load_before,
        "date": text_bench.now(),
    }


def aot_executable() -> str:
    beside = Path(sys.executable).with_name("aot")
    return str(beside) if beside.is_file() else (shutil.which("aot") or "aot")


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*/*/*") if p.is_file())


class Bench:
    """The rows of one folder and its shards, each measured until it holds ``repeats`` runs of its settings."""

    def __init__(self, folder: Path, shards: Path, steps: int, repeats: int, workers: list[int], force: bool):
        self.folder, self.shards, self.steps, self.repeats = folder.resolve(), shards.resolve(), steps, repeats
        self.workers, self.force, self.name = workers, force, folder.resolve().name
        self.source_bytes = folder_bytes(self.folder)

    def settings(self, method: str, source: str) -> dict[str, Any]:
        out = {"folder": str(self.folder), "source": source, "method": method, "shard_mb": SHARD_MB}
        if method != "pack":
            out.update(steps=self.steps, batch_size=BATCH_SIZE, image_size=IMAGE_SIZE)
        return out

    def rows(self) -> list[tuple[str, str]]:
        """(source, method) of every row, the packing first (the tar rows read its shards)."""
        methods = ["pil", *(f"stream-w{n}" for n in self.workers)]
        return [("folder", "pack"), *((source, m) for source in ("folder", "tar") for m in methods)]

    def command(self, source: str, method: str, out: Path | None = None) -> list[str]:
        if method == "pack":
            return [aot_executable(), "data", "pack-images", str(self.folder), "--out", str(out)]
        data = self.folder if source == "folder" else self.shards
        command = [sys.executable, str(Path(__file__).resolve()), "--measure", method.split("-")[0], "--data"]
        command += [str(data), "--steps", str(self.steps), "--batch-size", str(BATCH_SIZE)]
        return command + (["--workers", method[len("stream-w") :]] if method.startswith("stream") else [])

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
                row["runs"].append(self.measure(source, method))
                row["median"] = medians(row["runs"])
                record(key, row)
        if not (self.shards / "meta.json").is_file():  # packing recorded earlier, shards deleted since
            subprocess.run(self.command("folder", "pack", self.shards), check=True, env=child_env())


MEDIAN_FIELDS = ("images_s", "seconds", "wall_s", "peak_rss_mb", "peak_pss_mb", "max_process_hwm_mb", "cpu_s")
MEDIAN_FIELDS += ("main_cpu_s", "mb_s", "other_cores")


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


def render() -> str:
    results = load()
    rows, sets = results["rows"], results.get("sets", {})
    m, v = results["machine"], results["versions"]
    lines = [
        f"## Results ({results['updated']})",
        "",
        f"{m['cpu']}, {m['usable_cores']} cores, {m['ram_gb']} GiB RAM; aot {v['aot']} ({v.get('aot_commit', '?')}), "
        f"torch {v['torch']}, Pillow {v['pillow']} (libjpeg-turbo {v['libjpeg_turbo']}), numpy {v['numpy']}. "
        f"Medians of {REPEATS} runs, each a fresh process. images/s: the timed images over the timed seconds "
        "(batches 1.. after the warm-up batch 0, read from the page cache); peak RSS / PSS: the largest sum over the "
        "process tree (main + DataLoader workers) sampled every 50 ms, over the whole run.",
        "",
        "| set | source | method | images/s | per worker | ÷ PIL loop | timed images | timed s | wall s "
        "| peak RSS MB (tree) | peak PSS MB | processes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in set_order(results):
        for source in ("folder", "tar"):
            pil = rows.get(f"{name}/{source}/pil", {}).get("median", {}).get("images_s")
            for key, row in sorted(rows.items()):
                if not key.startswith(f"{name}/{source}/") or key.endswith("/pack"):
                    continue
                med, last, method = row["median"], row["runs"][-1], key.rsplit("/", 1)[1]
                workers = int(method[len("stream-w") :]) if method.startswith("stream") else 0
                per = med["images_s"] / max(workers, 1)
                lines.append(
                    f"| {name} | {source} | {method} | {med['images_s']:.0f} | {per:.0f} "
                    f"| {per / pil if pil else float('nan'):.2f} | {last['timed_images']:,} | {med['seconds']:.1f} "
                    f"| {med['wall_s']:.1f} | {med['peak_rss_mb']:.0f} | {med['peak_pss_mb']:.0f} "
                    f"| {last['processes']} |"
                )
    lines += [
        "",
        "Per worker: images/s ÷ workers (w0: the training process decodes, counted as one). ÷ PIL loop: per worker ÷ "
        "the same set and source's one-process PIL loop (open, convert RGB, resize to 224², no crop, no flip, no "
        "normalising, no batching).",
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
            pil = med(f"{name}/{source}/pil", "images_s")
            parts = []
            for m in methods:
                rate = med(f"{name}/{m}", "images_s") if m.startswith(source + "/") else None
                if pil and rate:
                    workers = max(int(m.rsplit("-w", 1)[1]), 1)
                    parts.append(f"{m.split('/')[1]} {rate / workers / pil:.2f}×")
            if parts:
                out.append(f"{name} {source}: images/s per worker ÷ PIL loop ({pil:.0f}/s): {', '.join(parts)}")
            one, two = med(f"{name}/{source}/stream-w1", "images_s"), med(f"{name}/{source}/stream-w2", "images_s")
            if one and two:
                cpu = med(f"{name}/{source}/stream-w2", "main_cpu_s")
                seconds = med(f"{name}/{source}/stream-w2", "seconds")
                out.append(
                    f"{name} {source}: 2 workers ÷ 1 worker {two / one:.2f}× (the training process itself was busy "
                    f"{cpu / seconds:.0%} of the w2 window: collating and normalising)"
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
    if README.is_file():
        text = README.read_text()
        if TABLE_START in text and TABLE_END in text:
            head, rest = text.split(TABLE_START, 1)
            README.write_text(f"{head}{TABLE_START}\n{table}{TABLE_END}{rest.split(TABLE_END, 1)[1]}")
    print(f"wrote {RESULTS_MD}" + (" and the table of README.md" if README.is_file() else ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, help="an ImageNet-layout folder (generate.py writes one)")
    parser.add_argument("--shards", type=Path, help="where its tar shards go (default: FOLDER-shards)")
    parser.add_argument("--steps", type=int, default=STEPS, help=f"timed batches of {BATCH_SIZE} (default {STEPS})")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs per row, the median reported")
    parser.add_argument("--workers", type=int, nargs="+", default=list(WORKERS), help="ImageStream workers to try")
    parser.add_argument("--force", action="store_true", help="measure recorded rows again")
    parser.add_argument("--render", action="store_true", help="write results.md and README.md's table, measure nothing")
    parser.add_argument("--measure", choices=("stream", "pil"), help=argparse.SUPPRESS)  # one run, in a subprocess
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure == "stream":
        print(json.dumps(measure_stream(args.data, args.workers[0], args.steps, args.batch_size, args.seed)))
    elif args.measure == "pil":
        print(json.dumps(measure_pil(args.data, args.steps, args.batch_size, args.seed)))
    elif args.render:
        write_render()
    elif args.folder is None:
        parser.error("give --folder (or --render)")
    else:
        if any(args.steps % max(n, 1) for n in args.workers):
            parser.error(f"--steps {args.steps} must be a multiple of every --workers count (see measure_stream)")
        record_set(args.folder)
        shards = args.shards or args.folder.with_name(args.folder.name + "-shards")
        Bench(args.folder, shards, args.steps, args.repeats, args.workers, args.force).run()
        write_render()


if __name__ == "__main__":
    main()
