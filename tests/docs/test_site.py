"""The documentation site, as a reader's browser shows it.

Builds the site with `mkdocs build --strict` into a temporary folder, serves it
over HTTP on loopback, and opens the home page, every tutorial
(docs/tutorials/*.md) and every API reference page (docs/reference/api-*.md) in
headless Chromium. A page fails when it does not render (no article, no h1 in
it, an mkdocstrings directive left as text), when its scripts throw or a
picture, script or stylesheet it names is missing, or when one of its internal links leads to no
page, or to an #anchor that page does not have.

Needs Debian's `chromium` (`apt-get install chromium`): without it the tests
skip, unless NANNYTREE_REQUIRE_DOCS=1 (CI sets it), where they fail. Every
Chromium runs in a process group of its own, killed whole after each page.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from tests.support import living_descendants

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRED = os.environ.get("NANNYTREE_REQUIRE_DOCS") == "1"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # No name resolves but loopback: a page that needs the network shows it here.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--enable-logging=stderr",
    "--v=0",
)
# Chromium's log lines for the page's console: an uncaught exception, above all.
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] \"(?P<text>.*)\", source: (?P<source>\S*)")
PAGE_ERRORS = ("Uncaught", "Failed to load resource")

if CHROMIUM is None and not REQUIRED:
    pytestmark = pytest.mark.skip(
        reason="no chromium (apt-get install chromium); "
        "NANNYTREE_REQUIRE_DOCS=1 makes this a failure"
    )


def _pages() -> list[str]:
    """The site paths of the pages to open, from the docs that exist."""
    pages = [""]
    pages += [f"tutorials/{p.stem}/" for p in sorted((DOCS / "tutorials").glob("*.md"))]
    pages += [f"reference/{p.stem}/" for p in sorted((DOCS / "reference").glob("api-*.md"))]
    if (DOCS / "explanation" / "design.md").is_file():  # one exit's path: a picture
        pages.append("explanation/design/")
    return pages


# -- reading a page -----------------------------------------------------------------


@dataclass
class Page(HTMLParser):
    """What the checks need of an HTML page: ids, links, and its article."""

    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)  # pictures, scripts, stylesheets
    articles: int = 0
    h1_in_article: bool = False
    article_text: list[str] = field(default_factory=list)
    _depth: int = 0  # inside the article: the depth of open tags

    def __post_init__(self) -> None:
        super().__init__(convert_charrefs=True)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for name in ("id", "name"):
            if values.get(name) and (name == "id" or tag == "a"):
                self.ids.add(str(values[name]))
        if tag == "a" and values.get("href") is not None:
            self.links.append(str(values["href"]))
        elif tag in ("img", "script") and values.get("src"):
            self.resources.append(str(values["src"]))
        elif tag == "link" and values.get("rel") == "stylesheet" and values.get("href"):
            self.resources.append(str(values["href"]))
        if self._depth:
            if tag not in _VOID:
                self._depth += 1
            if tag == "h1":
                self.h1_in_article = True
        elif tag == "article":
            self.articles += 1
            self._depth = 1

    def handle_endtag(self, tag: str) -> None:
        if self._depth and tag not in _VOID:
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._depth:
            self.article_text.append(data)


_VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


@functools.cache
def _ids_of(path: Path) -> frozenset[str]:
    return frozenset(parse(path.read_text(encoding="utf-8")).ids)


def _target(site: Path, path: str) -> Path | None:
    """The file a site path is served from, or None."""
    file = site / unquote(path).lstrip("/")
    if file.is_dir():
        file = file / "index.html"
    return file if file.is_file() else None


def problems(url: str, dom: str, console: list[str], site: Path) -> list[str]:
    """What is wrong with a page as the browser showed it (its DOM and console)."""
    page = parse(dom)
    found: list[str] = []
    if page.articles == 0:
        found.append("no <article>: the page did not render")
    elif not page.h1_in_article:
        found.append("no <h1> in the article")
    text = "".join(page.article_text)
    if re.search(r"^\s*::: ", text, re.MULTILINE):
        found.append("an mkdocstrings directive left as text (::: ...)")
    found += [f"in the browser: {line}" for line in console]
    base = urlsplit(url)
    for src in page.resources:
        link = urlsplit(urljoin(url, src))
        if link.netloc == base.netloc and _target(site, link.path) is None:
            found.append(f"missing resource {src!r}: nothing at {link.path}")
    for href in page.links:
        link = urlsplit(urljoin(url, href))
        if link.scheme not in ("http", "https") or link.netloc != base.netloc:
            continue  # another site, mailto:, javascript:
        file = _target(site, link.path)
        if file is None:
            found.append(f"broken link {href!r}: no page at {link.path}")
        elif link.fragment and file.suffix == ".html":
            ids = page.ids if link.path == base.path else _ids_of(file)
            if unquote(link.fragment) not in ids:
                found.append(f"broken link {href!r}: {link.path} has no #{link.fragment}")
    return found


# -- the browser ----------------------------------------------------------------------


def load(url: str) -> tuple[str, list[str]]:
    """Open a URL in headless Chromium: its DOM once loaded, and its console's errors."""
    if CHROMIUM is None:
        pytest.fail("chromium is not installed (apt-get install chromium); it is required here")
    with tempfile.TemporaryDirectory(prefix="nt-chromium-") as profile:
        proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):  # its helpers too, whatever happened
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        pytest.fail(f"chromium exited {proc.returncode} on {url}:\n{err.decode()[-2000:]}")
    console = []
    for line in err.decode("utf-8", "replace").splitlines():
        m = CONSOLE.search(line)
        if m and m["text"].startswith(PAGE_ERRORS):
            console.append(f"{m['text']} ({m['source']})")
    return out.decode("utf-8", "replace"), console


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve a folder over HTTP on loopback; yields its base URL."""
    handler = functools.partial(_Quiet, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()
            thread.join()


# -- the tests -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(built_site: Path) -> Iterator[tuple[Path, str]]:
    with serve(built_site) as url:
        yield built_site, url
    assert not living_descendants(), "the site's build or a browser left a process behind"


@pytest.mark.timeout(900)  # the first build makes the pictures (docs/_hooks/pictures.py)
@pytest.mark.parametrize("path", _pages(), ids=lambda p: p or "home")
def test_page_renders_and_its_links_resolve(site: tuple[Path, str], path: str) -> None:
    folder, base = site
    assert _target(folder, path) is not None, f"the build made no page at {path}"
    url = urljoin(base, path)
    dom, console = load(url)
    found = problems(url, dom, console, folder)
    assert not found, f"{url}:\n  " + "\n  ".join(found)


def test_the_checks_catch_a_broken_page(tmp_path: Path) -> None:
    """A page with a script error, a missing picture, a link to no page, a link to a
    missing anchor, and no h1 is reported for each; a good link is not."""
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "index.html").write_text('<h2 id="there">there</h2>')
    (tmp_path / "index.html").write_text(
        "<html><body><article><p id='here'>text</p>\n::: supervision\n"
        '<a href="other/#there">good</a> <a href="#here">good</a>'
        '<a href="https://example.org/">elsewhere</a>'
        '<a href="missing/">no page</a> <a href="other/#nowhere">no anchor</a>'
        '<img src="gone.png"></article><script>undefinedFunction();</script></body></html>'
    )
    with serve(tmp_path) as url:
        dom, console = load(url)
    found = problems(url, dom, console, tmp_path)
    assert found[0] == "no <h1> in the article"
    assert found[1].startswith("an mkdocstrings directive")
    assert any("Uncaught ReferenceError: undefinedFunction" in f for f in found)
    assert any("missing resource 'gone.png'" in f for f in found)
    assert any("'missing/': no page at /missing/" in f for f in found)
    assert any("'other/#nowhere': /other/ has no #nowhere" in f for f in found)
    assert len(found) == 6, found
    assert not living_descendants()
