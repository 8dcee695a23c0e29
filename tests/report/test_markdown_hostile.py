"""report.md shows text from data as text: no HTML element, link or reference of its own.

GitHub, GitLab, Jupyter and wikis render report.md; a dataset's title,
methodology, deployment names and label values must not become markup there.
The page is rendered with a CommonMark renderer (tables on, raw HTML allowed
as GitHub allows it before sanitising) and its elements are read back.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

from inference_obs.cli import EXIT_OK, main
from tests.report.hostile_dataset import MARKUP, NAME, REFERENCE, hostile_dataset


class _Page(HTMLParser):
    """Start tags with their attributes, and the text a reader sees."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _outside_code(markdown: str) -> str:
    """``markdown`` without its code listings and spans (their text is shown verbatim)."""
    listings = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", markdown, flags=re.M | re.S)
    return re.sub(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", "", listings)


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font:UserWarning")
def test_text_from_data_is_shown_as_text_not_markup(tmp_path: Path) -> None:
    dataset = hostile_dataset(tmp_path / "dataset")
    out = tmp_path / "out"
    argv = ["report", "--dataset", str(dataset), "--out", str(out), "--format", "md"]
    assert main([*argv, "--quiet"]) == EXIT_OK
    markdown = (out / "report.md").read_text()
    prose = _outside_code(markdown)
    for raw in ("<script", "<iframe", "<img", "<svg", "<b>"):
        assert raw not in prose, raw
    # No link to a script, no link reference definition: an escaped ] closes nothing.
    assert not re.search(r"(?<!\\)\]\(\s*javascript:", prose)
    assert not re.search(r"^\s*(- )?\[[^\]]*(?<!\\)\]:", prose, flags=re.M)
    # Still readable: the escaped forms are there, from the title and a pod's name.
    assert "&lt;script>alert(1)&lt;/script>" in prose
    assert "pro-model-01&lt;img src=x onerror=alert(9)>" in prose

    page = _Page()
    page.feed(MarkdownIt("commonmark").enable("table").render(markdown))
    names = {tag for tag, _ in page.tags}
    assert not names & {"script", "iframe", "svg", "b"}, names
    assert not [a for _, attrs in page.tags for a in attrs if a.startswith("on")]
    targets = [
        attrs.get("href") or attrs.get("src") or ""
        for tag, attrs in page.tags
        if tag in ("a", "img")
    ]
    assert all(t.startswith(("#", "figures/")) for t in targets), targets
    # The only images are the figures the report wrote, each found where its link points.
    images = [attrs["src"] for tag, attrs in page.tags if tag == "img"]
    written = sorted((out / "figures").glob("*.png"))
    assert len(images) == len(written) == 6
    assert sorted(out / unquote(str(src)) for src in images) == written
    # A reader sees the text as it was written.
    shown = "".join(page.text)
    assert MARKUP in shown
    assert REFERENCE in shown
    assert NAME.partition(" \x1b")[0] in shown
