"""The documentation site (mkdocs.yml) builds with ``--strict`` and works in a real browser: every page renders its
content (no 404), every internal link lands on a built page and, with an anchor, on an element of that page, and
every image decodes in headless Chromium (Debian's ``chromium``).

One build into a temporary folder, one local HTTP server, one browser process: a checker page on the same origin
opens every page in an iframe, waits for its images and writes what it found into its own DOM, which
``chromium --dump-dom`` prints. Links are checked in Python against the built files. Skipped, in one line, where
mkdocs (``pip install -e '.[docs]'``) or chromium is not installed; CI installs both.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
BROWSERS = ("chromium", "chromium-browser", "google-chrome")

CHECKER = """<!doctype html><html><head><meta charset="utf-8"><title>site check</title></head><body>
%s
<script>
window.addEventListener("load", () => {
  const results = [...document.querySelectorAll("iframe")].map((frame) => {
    const doc = frame.contentDocument;
    const images = doc ? [...doc.images] : [];
    const article = doc && (doc.querySelector("article") || doc.body);  // a page mkdocs did not make: its body
    return {
      url: frame.getAttribute("src"),
      title: doc ? doc.title : "",
      text: article ? article.innerText.trim().length : 0,
      images: images.length,
      broken: images.filter((img) => !(img.complete && img.naturalWidth > 0)).map((img) => img.getAttribute("src")),
    };
  });
  const out = document.createElement("pre");
  out.id = "results";
  out.textContent = JSON.stringify(results);
  document.body.appendChild(out);
});
</script></body></html>
"""


def find_browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stderr[-3000:]}"
    return out


def pages(site: Path) -> list[str]:
    """Every built page, as a site path ending in '/' (its index.html) or '.html'."""
    found = []
    for path in sorted(site.rglob("*.html")):
        relative = path.relative_to(site).as_posix()
        if relative == "404.html":
            continue
        found.append(relative[: -len("index.html")] if path.name == "index.html" else relative)
    return found


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for name in ("id", "name"):
            if values.get(name):
                self.ids.add(values[name] or "")
        if tag in ("a", "link") and values.get("href"):  # link: the stylesheets, the previous and next page
            self.links.append(values["href"] or "")


@functools.cache
def parse(path: Path) -> _Page:
    parser = _Page()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def built_file(site: Path, url_path: str) -> Path | None:
    """The file a site path is served from, or None when there is none."""
    target = site / unquote(url_path).lstrip("/")
    if target.is_dir():
        target = target / "index.html"
    return target if target.is_file() else None


def test_the_site_builds_with_every_page_in_it(site):
    built = pages(site)
    for page in ["", "commands/", "presets/", "guide/language/", "guarantees/", "api/"]:
        assert page in built, f"{page or 'the home page'} was not built"
    assert "Use it from Python" in (site / "index.html").read_text(encoding="utf-8"), "README.md is not the home page"
    assert "MultiHeadSubspaceSelfAttention" in (site / "api" / "index.html").read_text(encoding="utf-8")


def test_every_internal_link_resolves_to_a_page_and_anchor(site):
    broken = []
    for page in pages(site):
        source = built_file(site, page)
        assert source is not None
        base = f"http://site/{page}"
        for href in parse(source).links:
            url = urlsplit(urljoin(base, href))
            if url.scheme != "http" or url.netloc != "site":
                continue  # external: not checked (no network in CI)
            target = built_file(site, url.path)
            if target is None:
                broken.append(f"{page}: {href} (no such file)")
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in parse(target).ids:
                broken.append(f"{page}: {href} (no element #{url.fragment})")
    assert not broken, f"{len(broken)} broken links:\n" + "\n".join(broken[:40])


def test_every_page_renders_and_every_image_loads_in_chromium(site, tmp_path):
    browser = find_browser()
    if browser is None:
        pytest.skip("no chromium: apt-get install -y chromium")
    built = pages(site)
    frames = "\n".join(f'<iframe src="/{page}" width="1280" height="900"></iframe>' for page in built)
    (site / "_site_check.html").write_text(CHECKER % frames)
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        run = subprocess.run(
            [
                browser,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={tmp_path / 'profile'}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                f"http://127.0.0.1:{server.server_address[1]}/_site_check.html",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.shutdown()
        server.server_close()
    found = re.search(r'<pre id="results">(.*?)</pre>', run.stdout, flags=re.S)
    assert found, f"{browser} printed no results (exit {run.returncode}): {run.stderr.strip()[-500:]}"
    results = json.loads(found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    assert len(results) == len(built)
    problems = []
    for result in results:
        if "error" in result:
            problems.append(f"{result['url']}: {result['error']}")
        elif result["text"] == 0 or "404" in result["title"] or "Error response" in result["title"]:
            problems.append(f"{result['url']}: no content (title {result['title']!r})")
        elif result["broken"]:
            problems.append(f"{result['url']}: images that did not load: {result['broken']}")
    assert not problems, "\n".join(problems)
    assert sum(result["images"] for result in results) >= 5, "the guides' figures are missing from the site"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass
