"""report.html in headless Chromium (Debian's): no console errors, every figure rendered,
a table of contents whose links land on their sections, the appendix folded by analysis.

The page is opened from disk, as a user would open it. Every ``<img>`` must
decode to the size of the PNG it embeds (read from the PNG header, not from
the page). A full-page screenshot is kept in ``test-artifacts/``.
"""

from __future__ import annotations

import base64
import shutil
import struct
from pathlib import Path

from playwright.sync_api import ConsoleMessage, sync_playwright

from inference_obs.report import build_report, draw_figures, write_report
from inference_obs.source.dataset.source import DatasetSource

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "pro5000-vs-h20"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: As the machine's notes advise: no sandbox as root, no background network use.
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_html_renders_every_figure_without_console_errors(tmp_path: Path) -> None:
    source = DatasetSource(DATASET)
    manifest = source.dataset.manifest
    report = build_report(
        source, manifest.deployments, manifest.window.window(), title=manifest.title,
        source_name="datasets/pro5000-vs-h20",
    )  # fmt: skip
    page_path = write_report(report, tmp_path, ["html"])["html"]
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})

        def console(message: ConsoleMessage) -> None:
            if message.type == "error":
                errors.append(message.text)

        page.on("console", console)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(page_path.as_uri(), wait_until="load")
        images = page.eval_on_selector_all(
            "img",
            "els => els.map(e => [e.dataset.figure, e.complete, e.naturalWidth,"
            " e.naturalHeight, e.src.split(',')[1]])",
        )
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report-html.png"), full_page=True)
        toc = page.eval_on_selector_all(
            "nav.contents a", "els => els.map(e => e.getAttribute('href'))"
        )
        sections = page.eval_on_selector_all("h2", "els => els.map(e => '#' + e.id)")
        folds = page.eval_on_selector_all(
            "details", "els => els.map(e => [e.open, e.querySelector('summary').textContent])"
        )
        # A click on a link of the contents brings its section to the top of the window.
        page.click("nav.contents a[href='#what-not-to-conclude']")
        landed = page.eval_on_selector(
            "#what-not-to-conclude", "e => Math.round(e.getBoundingClientRect().top)"
        )
        # A fold opens on a click and shows its queries.
        page.click("details summary")
        opened = page.eval_on_selector(
            "details", "e => [e.open, e.querySelector('pre').offsetHeight]"
        )
        browser.close()
    assert toc == sections
    assert toc[:2] == ["#scope", "#summary"]
    analyses = list(dict.fromkeys(m.analysis for m in report.measurements()))
    assert [open_ for open_, _ in folds] == [False] * len(analyses)
    assert any(title.startswith("Latency (") for _, title in folds)
    assert abs(landed) <= 1
    assert opened[0] is True
    assert opened[1] > 100
    assert errors == []
    assert sorted(name for name, *_ in images) == sorted(draw_figures(report))
    for name, complete, width, height, data in images:
        assert complete, name
        expected = _png_size(base64.b64decode(data))
        assert (width, height) == expected, name
        assert width > 300, name
        assert height > 200, name
    assert (ARTIFACTS / "report-html.png").stat().st_size > 10_000
