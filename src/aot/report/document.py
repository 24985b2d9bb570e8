"""The report as data — sections of paragraphs, tables, figures, lists and code — and its two renderings:
Markdown (``report.md``, figures linked by relative path) and one self-contained HTML page (``index.html``,
figures embedded as base64 ``data:`` URIs, no script, no network).

Inline text understands two marks in both renderings: ```code``` and ``**bold**``. Everything else is
escaped in HTML, so a number or an error message shows exactly as written.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from string import Template


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Code:
    text: str


@dataclass
class Table:
    """A table whose cells are already formatted strings; ``caption`` says what the numbers mean."""

    caption: str
    header: list[str]
    rows: list[list[str]]

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(f"table {self.caption!r}: row {row} has {len(row)} cells, header {len(self.header)}")


@dataclass
class Figure:
    """A PNG the part wrote; ``path`` is absolute (or relative to the working directory)."""

    path: Path
    caption: str


Block = Paragraph | Bullets | Code | Table | Figure


@dataclass
class Section:
    key: str  # the anchor, e.g. the part's name
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    intro: list[Block]
    sections: list[Section]


# -- Markdown ---------------------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_block(block: Block, base: Path) -> str:
    if isinstance(block, Paragraph):
        return block.text
    if isinstance(block, Bullets):
        return "\n".join(f"- {item}" for item in block.items)
    if isinstance(block, Code):
        return f"```\n{block.text}\n```"
    if isinstance(block, Table):
        lines = [f"*{block.caption}*", "", "| " + " | ".join(_md_cell(h) for h in block.header) + " |"]
        lines.append("|" + "---|" * len(block.header))
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
        return "\n".join(lines)
    if isinstance(block, Figure):
        return f"![{block.caption}]({_relative(block.path, base)})\n\n*{block.caption}*"
    raise TypeError(f"unknown block {block!r}")


def _relative(path: Path, base: Path) -> str:
    try:
        return Path(path).resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return Path(path).resolve().as_posix()


def to_markdown(doc: Document, base: Path) -> str:
    """``report.md``: figures are linked relative to ``base`` (the report's folder)."""
    parts = [f"# {doc.title}", *(_md_block(b, base) for b in doc.intro)]
    for section in doc.sections:
        parts.append(f'## {section.title} <a id="{section.key}"></a>')
        parts += [_md_block(b, base) for b in section.blocks]
    return "\n\n".join(parts) + "\n"


# -- HTML -------------------------------------------------------------------------------------------------

_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*")


def inline_html(text: str) -> str:
    """Escape ``text`` and turn ```code``` and ``**bold**`` into tags."""
    out, pos = [], 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[pos : match.start()]))
        code, bold = match.groups()
        out.append(f"<code>{html.escape(code)}</code>" if code is not None else f"<b>{html.escape(bold)}</b>")
        pos = match.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def data_uri(path: Path) -> str:
    """A PNG as a ``data:image/png;base64,...`` URI, so the page needs no other file."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _html_block(block: Block) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{inline_html(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{inline_html(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Code):
        return f"<pre><code>{html.escape(block.text)}</code></pre>"
    if isinstance(block, Table):
        head = "".join(f"<th>{inline_html(h)}</th>" for h in block.header)
        body = "".join("<tr>" + "".join(f"<td>{inline_html(c)}</td>" for c in row) + "</tr>" for row in block.rows)
        return (
            f"<table><caption>{inline_html(block.caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>"
        )
    if isinstance(block, Figure):
        caption = inline_html(block.caption)
        return (
            f'<figure><img src="{data_uri(block.path)}" alt="{html.escape(block.caption, quote=True)}">'
            f"<figcaption>{caption}</figcaption></figure>"
        )
    raise TypeError(f"unknown block {block!r}")


PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.7em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
caption { text-align: left; font-style: italic; padding-bottom: .3em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } tr:nth-child(even) td { background: #fafafa; }
figure { margin: 1em 0; } img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-style: italic; font-size: 13px; color: #555; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: 12.5px; }
code { font-family: ui-monospace, monospace; font-size: 92%; }
</style>
</head>
<body>
<h1>$title</h1>
<nav>$nav</nav>
$intro
$sections
</body>
</html>
""")


def to_html(doc: Document) -> str:
    """``index.html``: one page, every figure embedded, no external resource of any kind."""
    nav = "".join(f'<a href="#{s.key}">{html.escape(s.title)}</a>' for s in doc.sections)
    sections = "\n".join(
        f'<section id="{s.key}"><h2>{html.escape(s.title)}</h2>\n'
        + "\n".join(_html_block(b) for b in s.blocks)
        + "</section>"
        for s in doc.sections
    )
    return PAGE.substitute(
        title=html.escape(doc.title),
        nav=nav,
        intro="\n".join(_html_block(b) for b in doc.intro),
        sections=sections,
    )
