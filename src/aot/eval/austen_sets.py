"""Zero-shot sets built from Jane Austen's six novels (the ``austen`` corpus, ``aot data fetch austen``), written in
the published formats of the real sets so the same readers and protocols run on them. The models of this project
train on Shakespeare, so every Austen sentence is held out from training.

How they are built (deterministic: the same corpus gives the same files):

- sentences: paragraphs (blank-line separated) joined into one line each, split after ``.``, ``!`` or ``?``
  (and a closing quote) before a capital or a quote, not after Mr./Mrs./Dr./St.; headings (CHAPTER ...) dropped.
- ``austen-lambada`` (LAMBADA's ``.jsonl``): passages of 3-6 consecutive sentences of one paragraph run whose last
  word has at least 4 letters, is not a stop word, and already occurs earlier in the passage; the passage ends
  at that word (its final punctuation removed), as LAMBADA's do. LAMBADA kept only passages that people could
  complete with the whole passage but not with the last sentence alone; no such filter exists here, so the set
  is easier where the word is repeated nearby (copying works) and harder where it is not guessable at all.
- ``austen-cbt-cn`` / ``austen-cbt-ne`` (CBT's 21-line format): 21 consecutive sentences; in the 21st one word of
  the class is replaced by ``XXXXX``; the 10 candidates are the answer and 9 other words of the same class from
  the 21 sentences (CBT draws them the same way). Classes come from heuristics, not a tagger: a named entity is
  a capitalised word, not sentence-initial, that the whole corpus writes capitalised at least 95 % of the time
  (titles such as Mr or Lady excluded); a common noun is a lower-case word after a determiner (the, a, his, ...)
  and before punctuation or a function word (of, and, was, ...), and it follows a determiner in at least 40 %
  of its occurrences in the corpus. Some "nouns" are adjectives: the CN set is noisier than CBT's.
- ``austen-ppl`` (plain text): the first ``ppl_chars`` characters of *Persuasion* (the last novel of the corpus)
  from its first chapter on, paragraphs joined, for per-token and per-word perplexity.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from aot.data.corpora import data_dir, load_text
from aot.errors import AotError
from aot.eval.zeroshot_data import CBT_BLANK, ClozeExample, write_cbt

DETERMINERS = {"the", "a", "an", "his", "her", "their", "my", "your", "our", "this", "that", "every", "no", "its"}
AFTER_NOUN = {"of", "and", "was", "to", "in", "with", "which", "for", "is", "had", "as", "at", "were", "but", "or"}
NOT_NOUNS = {"other", "same", "whole", "first", "last", "more", "most", "best", "least", "very", "only", "own"}
TITLES = {"Mr", "Mrs", "Miss", "Sir", "Lady", "Lord", "Colonel", "Captain", "Dr", "Admiral", "General", "Madam"}
STOP_WORDS = {
    "that", "this", "with", "have", "from", "they", "them", "were", "been", "would", "could", "should", "there",
    "their", "what", "when", "which", "will", "your", "than", "then", "very", "much", "such", "into", "more",
    "only", "some", "must", "said", "upon", "every", "being", "before", "after", "again", "myself", "herself",
    "himself", "itself", "yourself", "themselves", "indeed", "too", "else", "ever", "never", "though", "well",
}  # fmt: skip
ABBREVIATIONS = ("Mr.", "Mrs.", "Dr.", "St.", "Ms.")
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"'’”]?)\s+(?=[\"'‘“A-Z])")
_WORD = re.compile(r"[A-Za-z]+")
SET_NAMES = ("austen-lambada", "austen-cbt-cn", "austen-cbt-ne", "austen-ppl")


def paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs, each joined into one line; headings (all capitals) dropped."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        line = " ".join(block.split())
        if line and not (line.upper() == line and len(line) < 80):
            out.append(line)
    return out


def sentences(paragraph: str) -> list[str]:
    """Split a paragraph after . ! ? (and a closing quote), not after Mr. / Mrs. / Dr. / St."""
    pieces: list[str] = []
    parts = _SENTENCE_END.split(paragraph)
    # split() with one group returns [text, quote, text, quote, ...]: glue each quote back to its sentence
    for i in range(0, len(parts), 2):
        piece = parts[i] + (parts[i + 1] if i + 1 < len(parts) else "")
        if pieces and pieces[-1].endswith(ABBREVIATIONS):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    return [p.strip() for p in pieces if p.strip()]


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def lambada_passages(paras: list[str], max_examples: int) -> list[str]:
    """LAMBADA-style passages (see the module docstring), spread evenly over the corpus."""
    found: list[str] = []
    for para in paras:
        sents = sentences(para)
        for end in range(3, len(sents) + 1):
            last = sents[end - 1]
            match = re.search(r"([A-Za-z]+)[\"'’”)]*[.!?;,]*[\"'’”)]*$", last)
            if match is None:
                continue
            target = match.group(1)
            if len(target) < 4 or target.lower() in STOP_WORDS:
                continue
            for n_sent in range(3, min(6, end) + 1):
                passage = " ".join(sents[end - n_sent : end])
                body = passage[: len(passage) - len(last)] + last[: match.start(1)]
                if target in _words(body) and len(passage) <= 700:
                    found.append(body + target)
                    break
    return _spread(found, max_examples)


def _spread(items: list, n: int) -> list:
    if len(items) <= n:
        return items
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)] if n > 1 else items[:1]


def _named_entities(paras: list[str]) -> set[str]:
    capital: Counter[str] = Counter()
    lower: Counter[str] = Counter()
    for para in paras:
        for sent in sentences(para):
            for word in _words(sent)[1:]:
                if word[0].isupper() and word[1:].islower():
                    capital[word] += 1
                elif word.islower():
                    lower[word.capitalize()] += 1
    return {w for w, c in capital.items() if c >= 3 and c >= 0.95 * (c + lower[w]) and w not in TITLES}


def _common_nouns(paras: list[str]) -> set[str]:
    after_det: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for para in paras:
        words = [w for w in re.findall(r"[A-Za-z]+|[.,;:!?]", para)]
        for i, word in enumerate(words):
            if not word.islower():
                continue
            total[word] += 1
            if i and words[i - 1].lower() in DETERMINERS:
                after_det[word] += 1
    return {
        w
        for w, c in after_det.items()
        if len(w) >= 3 and c >= 3 and c >= 0.4 * total[w] and w not in NOT_NOUNS | DETERMINERS | STOP_WORDS
    }


def _class_words(sentence: str, kind: str, lexicon: set[str]) -> list[str]:
    tokens = re.findall(r"[A-Za-z]+|[.,;:!?]", sentence)
    out = []
    for i, word in enumerate(tokens):
        if word not in lexicon:
            continue
        if kind == "ne" and i > 0:
            out.append(word)
        elif kind == "cn" and i > 0 and tokens[i - 1].lower() in DETERMINERS:
            following = tokens[i + 1] if i + 1 < len(tokens) else "."
            if not following[0].isalpha() or following in AFTER_NOUN:
                out.append(word)
    return out


def cloze_examples(paras: list[str], kind: str, max_examples: int, seed: int = 0) -> list[ClozeExample]:
    """CBT-style questions of class ``kind`` ("cn" or "ne") from runs of 21 sentences (module docstring)."""
    lexicon = _named_entities(paras) if kind == "ne" else _common_nouns(paras)
    rng = random.Random(seed)
    all_sents = [s for para in paras for s in sentences(para)]
    found = []
    for start in range(0, len(all_sents) - 20, 21):
        block = all_sents[start : start + 21]
        query = block[20]
        options = _class_words(query, kind, lexicon)
        if not options:
            continue
        answer = rng.choice(options)
        pool = sorted({w for s in block for w in _class_words(s, kind, lexicon)} - {answer})
        if len(pool) < 9:
            continue
        candidates = sorted([answer, *rng.sample(pool, 9)])
        blanked = re.sub(rf"\b{answer}\b", CBT_BLANK, query, count=1)
        found.append(ClozeExample(tuple(block[:20]), blanked, answer, tuple(candidates)))
    return _spread(found, max_examples)


def persuasion_text(text: str, n_chars: int) -> str:
    start = text.find("\nPersuasion\n")
    if start < 0:
        raise AotError("the austen corpus has no 'Persuasion' title; refetch it with `aot data fetch austen --force`")
    chapter = text.find("Chapter 1\n", start)
    chapter = chapter if chapter >= 0 else start
    body = "\n".join(paragraphs(text[chapter:]))
    return body[:n_chars].rsplit(" ", 1)[0]


def _write_jsonl(texts: Iterable[str], path: Path) -> None:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")


def build_austen_sets(
    out_dir: Path | None = None, lambada_n: int = 500, cbt_n: int = 100, ppl_chars: int = 25_000
) -> dict[str, Path]:
    """Write the four sets (if not there yet) into ``out_dir`` (default: the data cache) and return their paths."""
    text = load_text("austen")
    key = hashlib.sha256(f"{lambada_n}-{cbt_n}-{ppl_chars}".encode() + text.encode()).hexdigest()[:10]
    folder = out_dir or data_dir() / "zeroshot" / f"austen-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "austen-lambada": folder / "austen_lambada.jsonl",
        "austen-cbt-cn": folder / "austen_cbtest_CN.txt",
        "austen-cbt-ne": folder / "austen_cbtest_NE.txt",
        "austen-ppl": folder / "austen_persuasion.txt",
    }
    if all(p.is_file() for p in paths.values()):
        return paths
    paras = paragraphs(text)
    _write_jsonl(lambada_passages(paras, lambada_n), paths["austen-lambada"])
    write_cbt(cloze_examples(paras, "cn", cbt_n), paths["austen-cbt-cn"])
    write_cbt(cloze_examples(paras, "ne", cbt_n), paths["austen-cbt-ne"])
    paths["austen-ppl"].write_text(persuasion_text(text, ppl_chars) + "\n", encoding="utf-8")
    return paths
