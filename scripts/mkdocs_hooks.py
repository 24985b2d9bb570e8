"""mkdocs hooks (mkdocs.yml `hooks:`): the site is docs/, README.md as its home page, and the repository files the
pages link to.

The pages are written for GitHub, so their links are relative to where each file lives in the repository
(``../benchmarks/lm/README.md`` from docs/, ``docs/math.md`` from README.md). mkdocs serves only docs/; these hooks
bring the rest in without copying anything into the repository:

- ``on_files``: README.md becomes ``index.md``; every file outside docs/ that a page links to, followed from page to
  page (the benchmark READMEs link to their tables and figures), is added under ``repo/`` at its repository path: a
  Markdown file as a page, anything else (PNG figures, JSON records, scripts, configs) as a file copied into the
  site. A linked folder is its README.md, or a generated page listing its files.
- ``on_page_markdown``: every relative link of a page is rewritten from its repository path to its place in the
  site; links inside docs/ do not change. A list that starts right after a line of text (GitHub renders it,
  Python-Markdown does not) gets the blank line it needs.

A link to a file that does not exist is left as it is, so that ``mkdocs build --strict`` names it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PREFIX = "repo"  # where the files outside docs/ land in the site
LINK = re.compile(r"(\]\()(<[^>]+>|[^)\s]+)((?:\s+\"[^\"]*\")?\))")
LIST_ITEM = re.compile(r"^(?:[-*+]|\d+\.) ")
SKIP_DIRS = {".git", ".venv", "__pycache__", "runs", "site"}


def _fences(lines: list[str]) -> list[bool]:
    """For each line: whether it is inside (or opens / closes) a fenced code block."""
    inside, flags = False, []
    for line in lines:
        fence = line.lstrip().startswith(("```", "~~~"))
        flags.append(inside or fence)
        if fence:
            inside = not inside
    return flags


def _relative_targets(text: str) -> list[str]:
    """The relative link targets of a Markdown text, outside code blocks, without their anchors."""
    lines = text.split("\n")
    found = []
    for line, fenced in zip(lines, _fences(lines)):
        if fenced:
            continue
        for match in LINK.finditer(line):
            target = match.group(2).strip("<>").split("#", 1)[0]
            if target and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) and not target.startswith("/"):
                found.append(target)
    return found


def _site_uri(real: Path) -> str | None:
    """Where a repository file is in the site (a docs_dir-relative URI), or None outside the repository."""
    if real == README:
        return "index.md"
    if real.is_relative_to(DOCS):
        return real.relative_to(DOCS).as_posix()
    if real.is_relative_to(ROOT) and not SKIP_DIRS & set(real.relative_to(ROOT).parts):
        return f"{PREFIX}/{real.relative_to(ROOT).as_posix()}"
    return None


def _resolve(source: Path, target: str) -> Path:
    """The repository file a relative link of ``source`` points to; a folder is its README.md when it has one."""
    real = Path(posixpath.normpath((source.parent / target).as_posix()))
    if real.is_dir():
        for name in ("README.md", "index.md"):
            if (real / name).is_file():
                return real / name
    return real


def _folder_page(folder: Path) -> str:
    """A page listing a linked folder that has no README.md."""
    name = folder.relative_to(ROOT).as_posix()
    entries = sorted(p for p in folder.iterdir() if p.name not in SKIP_DIRS and not p.name.startswith("."))
    lines = [f"# {name}/", ""]
    lines += [f"- [{p.name}{'/' if p.is_dir() else ''}]({p.name}{'/' if p.is_dir() else ''})" for p in entries]
    return "\n".join(lines) + "\n"


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "index.md", abs_src_path=str(README)))
    queue = [README, *sorted(DOCS.rglob("*.md"))]
    added: set[str] = set()
    while queue:
        source = queue.pop()
        for target in _relative_targets(source.read_text(encoding="utf-8")):
            real = _resolve(source, target)
            uri = _site_uri(real)
            if uri is None or real == README or real.is_relative_to(DOCS) or uri in added:
                continue
            if real.is_dir():
                uri = f"{uri.rstrip('/')}/index.md"
                if uri not in added:
                    added.add(uri)
                    files.append(File.generated(config, uri, content=_folder_page(real)))
                    queue += [p for p in real.iterdir() if p.suffix == ".md"]
                    for child in real.iterdir():
                        child_uri = _site_uri(child)
                        if child.is_file() and child_uri and child_uri not in added:
                            added.add(child_uri)
                            files.append(File.generated(config, child_uri, abs_src_path=str(child)))
                continue
            if not real.is_file():
                continue  # a broken link: left for mkdocs to report
            added.add(uri)
            files.append(File.generated(config, uri, abs_src_path=str(real)))
            if real.suffix == ".md":
                queue.append(real)
    return files


def _rewrite_link(source: Path, page_uri: str, target: str) -> str:
    bare = target.strip("<>")
    if not bare or bare.startswith(("#", "/")) or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", bare):
        return target
    path, hashmark, anchor = bare.partition("#")
    real = _resolve(source, path)
    uri = _site_uri(real)
    if uri is None or not real.exists():
        return target
    if real.is_dir():
        uri = f"{uri.rstrip('/')}/index.md"
    return posixpath.relpath(uri, posixpath.dirname(page_uri) or ".") + hashmark + anchor


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.abs_src_path is None:  # a generated folder page: its links are already site-relative
        return markdown
    source = Path(page.file.abs_src_path)
    lines = markdown.split("\n")
    out: list[str] = []
    for i, (line, fenced) in enumerate(zip(lines, _fences(lines))):
        if not fenced:
            line = LINK.sub(
                lambda m: m.group(1) + _rewrite_link(source, page.file.src_uri, m.group(2)) + m.group(3), line
            )
            previous = lines[i - 1] if i else ""
            starts_list = LIST_ITEM.match(line) and not LIST_ITEM.match(previous)
            if starts_list and previous.strip() and not previous.startswith((" ", "\t", "|")):
                out.append("")
        out.append(line)
    return "\n".join(out)
