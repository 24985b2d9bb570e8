"""Readers for the zero-shot data sets in their own published formats, and the GPT-2 paper's detokenisation.

- LAMBADA: ``.jsonl`` with one ``{"text": ...}`` per line (the OpenAI / lm-evaluation-harness release) or ``.txt``
  with one passage per line (the original release); the target is the passage's last whitespace-separated word.
- CBT (Children's Book Test, ``cbtest_CN_*.txt`` / ``cbtest_NE_*.txt``): examples of 21 numbered lines and a blank
  line; lines 1-20 are context sentences, line 21 is ``21 query with XXXXX<TAB>answer<TAB><TAB>c1|c2|...|c10``.
- PTB (``ptb.test.txt``, Mikolov's release): one tokenised sentence per line, numbers as ``N``, rare words
  ``<unk>``.
- WikiText-103 raw (``wiki.test.raw``): tokenised text (`` @-@ ``, `` , ``...), article headings `` = Title = ``.

Detokenisation. The GPT-2 paper scored PTB and WikiText after "invertible de-tokenizers" that undo the data
sets' tokenisation artifacts, but did not publish them. :func:`detokenize_wikitext` and :func:`detokenize_ptb`
are the rules Megatron-LM (PTB) and lm-evaluation-harness (WikiText) use for those two sets (the usual
stand-in). Per-word
perplexity divides by the number of words of the *original* tokenised text (whitespace-separated tokens; for
PTB plus one ``<eos>`` per sentence, as the word-level PTB figures count it), so it is comparable across
tokenizers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from aot.errors import AotError
from aot.validation import read_text_file


@dataclass(frozen=True)
class LambadaExample:
    context: str  # the passage up to (not including) the space before the target word
    target: str  # the last word


@dataclass(frozen=True)
class ClozeExample:
    """One CBT question: 20 context sentences, a query with ``XXXXX`` in place of the answer, 10 candidates."""

    context: tuple[str, ...]
    query: str
    answer: str
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class PerplexityDoc:
    text: str  # what the model scores (detokenised)
    words: int  # the word count per-word perplexity divides by


CBT_BLANK = "XXXXX"


def _read_lines(path: Path) -> list[str]:
    """The lines of a data set's file: UTF-8 text (anything else — missing, a directory, /dev/null, an empty file,
    Latin-1 bytes — is one line naming the file: :func:`aot.validation.read_text_file`)."""
    return read_text_file(path, "data file", "give the path of the data set's file with --data").splitlines()


def lambada_example(passage: str, where: str) -> LambadaExample:
    passage = passage.strip()
    context, space, target = passage.rpartition(" ")
    if not space or not context or not target:
        raise AotError(f"{where}: a LAMBADA passage needs a context and a last word; got {passage[:60]!r}")
    return LambadaExample(context, target)


def read_lambada(path: str | Path) -> list[LambadaExample]:
    """A LAMBADA file: ``.jsonl`` (``{"text": ...}`` per line) or plain text (one passage per line)."""
    path = Path(path)
    examples = []
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if path.suffix in (".jsonl", ".json"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise AotError(
                    f'{where}: not a JSON line ({exc.msg}); LAMBADA .jsonl has one {{"text": ...}} per line'
                ) from None
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise AotError(f"{where}: a LAMBADA JSON line needs a string field 'text'")
            line = record["text"]
        elif _CBT_LINE.match(line) and "\t" in line:  # a CBT question line: "21 query\tanswer\t\tcandidates"
            raise AotError(f"{where}: looks like a CBT file (numbered lines with tabs), not LAMBADA passages")
        examples.append(lambada_example(line, where))
    if not examples:
        raise AotError(f"{path}: no LAMBADA passages found")
    return examples


_CBT_LINE = re.compile(r"^(\d+) (.*)$")


def read_cbt(path: str | Path) -> list[ClozeExample]:
    """A CBT file (``_CN_`` / ``_NE_`` / any of its types): blocks of 21 numbered lines separated by blank lines."""
    path = Path(path)
    examples: list[ClozeExample] = []
    context: list[str] = []
    for number, raw in enumerate(_read_lines(path), start=1):
        line = raw.rstrip("\n")
        if not line.strip():
            if context:
                raise AotError(f"{path}:{number}: blank line inside a CBT example (after {len(context)} sentences)")
            continue
        match = _CBT_LINE.match(line)
        if match is None:
            raise AotError(f"{path}:{number}: a CBT line starts with its number 1-21 and a space; got {line[:40]!r}")
        index, body = int(match.group(1)), match.group(2)
        if index != len(context) + 1:
            raise AotError(f"{path}:{number}: expected sentence {len(context) + 1} of the example, got {index}")
        if index < 21:
            context.append(body)
            continue
        fields = body.split("\t")
        if len(fields) != 4 or CBT_BLANK not in fields[0]:
            raise AotError(f"{path}:{number}: line 21 must be 'query with {CBT_BLANK}<TAB>answer<TAB><TAB>c1|...|c10'")
        query, answer, _, candidates = fields
        options = tuple(c for c in candidates.split("|") if c)
        if answer not in options:
            raise AotError(f"{path}:{number}: the answer {answer!r} is not among the candidates")
        examples.append(ClozeExample(tuple(context), query, answer, options))
        context = []
    if context:
        raise AotError(f"{path}: the last example stops after {len(context)} of its 21 lines")
    if not examples:
        raise AotError(f"{path}: no CBT examples found")
    return examples


def write_cbt(examples: list[ClozeExample], path: Path) -> None:
    """Write examples in CBT's format (what :func:`read_cbt` reads)."""
    blocks = []
    for ex in examples:
        lines = [f"{i} {sentence}" for i, sentence in enumerate(ex.context, start=1)]
        lines.append(f"21 {ex.query}\t{ex.answer}\t\t{'|'.join(ex.candidates)}")
        blocks.append("\n".join(lines) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")


def detokenize_ptb(text: str) -> str:
    """PTB's tokenisation undone with Megatron-LM's ``ptb_detokenizer`` rules (`` 's`` → ``'s``, `` n't`` →
    ``n't``, spaces at line ends dropped, ``$ N`` → ``$1``), except that ``N`` becomes ``1`` keeping its spaces
    (Megatron's rule glues it to the word before)."""
    text = text.replace(" '", "'").replace(" \n", "\n").replace("\n ", "\n").replace(" n't", "n't")
    text = text.replace(" N ", " 1 ").replace("$ 1", "$1").replace("# 1", "#1")
    return text


def detokenize_wikitext(text: str) -> str:
    """WikiText's tokenisation undone (the rules of lm-evaluation-harness's ``wikitext_detokenizer``)."""
    s = text.replace("s '", "s'")
    s = re.sub(r"/' [0-9]/", r"/'[0-9]/", s)
    s = s.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    s = s.replace(" : ", ": ").replace(" ; ", "; ").replace(" . ", ". ").replace(" ! ", "! ").replace(" ? ", "? ")
    s = s.replace(" , ", ", ")
    s = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", s)
    s = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", s)
    s = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", s)
    s = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', s)
    s = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", s)
    s = s.replace("= = = =", "====").replace("= = =", "===").replace("= =", "==")
    s = s.replace(" " + chr(176) + " ", chr(176)).replace(" \n", "\n").replace("\n ", "\n")
    s = s.replace(" N ", " 1 ").replace(" 's", "'s")
    return s


def read_ptb(path: str | Path) -> PerplexityDoc:
    """PTB's ``ptb.*.txt``: one sentence per line; words = tokens + one ``<eos>`` per sentence."""
    path = Path(path)
    numbered = [(number, line.strip()) for number, line in enumerate(_read_lines(path), start=1)]
    for number, line in numbered:  # numbers count every line of the file, blank ones too
        if "\t" in line or line.startswith("{"):
            raise AotError(f"{path}:{number}: does not look like PTB text (one tokenised sentence per line)")
    lines = [line for _, line in numbered if line]
    if not lines:
        raise AotError(f"{path}: no PTB sentences found")
    words = sum(len(line.split()) + 1 for line in lines)
    return PerplexityDoc(detokenize_ptb("\n".join(lines) + "\n"), words)


def read_wikitext(path: str | Path) -> PerplexityDoc:
    """WikiText raw tokens (``wiki.test.raw``): the whole file, detokenised; words = whitespace tokens."""
    path = Path(path)
    text = "\n".join(_read_lines(path))
    if not text.strip():
        raise AotError(f"{path}: empty WikiText file")
    if text.lstrip().startswith("{"):
        raise AotError(f"{path}:1: looks like JSON, not WikiText raw tokens (wiki.test.raw)")
    return PerplexityDoc(detokenize_wikitext(text), len(text.split()))


def read_plain_text(path: str | Path) -> PerplexityDoc:
    """Untokenised text (the Austen held-out set): scored as it is; words = whitespace-separated words."""
    path = Path(path)
    text = "\n".join(_read_lines(path))
    if not text.strip():
        raise AotError(f"{path}: empty text file")
    return PerplexityDoc(text, len(text.split()))
