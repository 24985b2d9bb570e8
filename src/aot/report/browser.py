"""Render the report's ``index.html`` in a real headless browser (Debian's ``chromium``) and check it: a PNG
screenshot, no console message, every ``<img>`` decoded with a non-zero size, and no external resource.

No DevTools protocol: the page is copied with a small script appended that, on ``load``, writes the number of
images and of broken ones onto ``<body>``; ``chromium --dump-dom`` prints the DOM after that ran, and
``--enable-logging=stderr`` prints every console message as a ``CONSOLE`` line. The report itself has no script.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from aot.errors import AotError

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
PROBE = """<script>
window.addEventListener("load", () => {
  const broken = [...document.images].filter((img) => !(img.complete && img.naturalWidth > 0 && img.width > 0));
  document.body.setAttribute("data-images", document.images.length);
  document.body.setAttribute("data-broken", broken.length);
});
</script>"""


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class _Sources(HTMLParser):
    """Every ``src`` / ``href`` of the page, and the tag it sits on."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value is not None:
                self.refs.append((tag, value))


def external_references(html_text: str) -> list[str]:
    """References the page would fetch: anything but ``data:`` URIs and in-page ``#anchors``."""
    parser = _Sources()
    parser.feed(html_text)
    return [f"<{tag}> {ref[:80]}" for tag, ref in parser.refs if not ref.startswith(("data:", "#"))]


@dataclass
class PageCheck:
    screenshot: Path
    images: int
    console: list[str]


def _chromium(browser: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    base = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    try:
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise AotError(f"{browser} did not finish within {timeout:.0f} s") from exc


def check_page(
    html_path: Path, screenshot: Path, width: int = 1280, height: int = 2200, timeout: float = 120
) -> PageCheck:
    """Screenshot ``html_path`` to ``screenshot`` and check it; raises :class:`AotError` naming the problem."""
    html_path = Path(html_path).resolve()
    text = html_path.read_text()
    external = external_references(text)
    if external:
        raise AotError(f"{html_path} is not self-contained: {', '.join(external[:3])}")
    browser = find_browser()
    if browser is None:
        raise AotError("no chromium found; install it (Debian: apt-get install -y chromium) to check the page")
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.html"
        probe.write_text(text.replace("</body>", PROBE + "\n</body>"))
        dom = _chromium(
            browser,
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            f"--user-data-dir={tmp}/profile-dom",
            "--dump-dom",
            probe.as_uri(),
            timeout=timeout,
        )
        shot = _chromium(
            browser,
            f"--user-data-dir={tmp}/profile-shot",
            f"--window-size={width},{height}",
            f"--screenshot={Path(screenshot).resolve()}",
            html_path.as_uri(),
            timeout=timeout,
        )
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    body = re.search(r"<body[^>]*>", dom.stdout)
    counts = dict(re.findall(r'data-(images|broken)="(\d+)"', body.group(0))) if body else {}
    if dom.returncode != 0 or "images" not in counts:
        raise AotError(f"{browser} could not load {html_path} (exit {dom.returncode}): {dom.stderr.strip()[-300:]}")
    if console:
        raise AotError(f"{html_path}: console messages in {browser}: {console[0][:300]}")
    if int(counts["broken"]):
        raise AotError(f"{html_path}: {counts['broken']} of {counts['images']} images did not load in {browser}")
    if shot.returncode != 0 or not Path(screenshot).is_file() or Path(screenshot).stat().st_size == 0:
        raise AotError(f"{browser} wrote no screenshot {screenshot}: {shot.stderr.strip()[-300:]}")
    return PageCheck(Path(screenshot), int(counts["images"]), console)
