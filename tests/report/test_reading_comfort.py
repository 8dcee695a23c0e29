"""The report's body reads as people read numbers: no exponents, no microseconds, terms spelt out.

Checked on the report the CLI writes for the bundled PRO 5000 vs H20 dataset, with its defaults.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from inference_obs.cli import main

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
APPENDIX = "## Appendix"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("comfort") / "report"
    assert main(["report", "--dataset", str(DATASET), "--out", str(out)]) == 0
    return (out / "report.md").read_text()


@pytest.fixture(scope="module")
def body(written: str) -> str:
    return written[: written.index(APPENDIX)]


def test_the_summary_comes_early_and_the_body_is_short(written: str, body: str) -> None:
    lines = written.splitlines()
    assert lines.index("## Summary") < 40
    # 350 before the time line (about a dozen lines) and the Replicas section (a row per
    # per-replica statistic, about twenty-five lines).
    assert len(body.splitlines()) <= 400


def test_each_figure_shows_its_caption_under_it_in_commonmark(body: str) -> None:
    page = MarkdownIt("commonmark").render(body)
    figures = re.findall(r'<img src="(figures/[^"]+)" alt="([^"]*)" />(.{0,12})', page)
    assert figures
    for src, alt, after in figures:
        assert after.startswith("<br />"), src
        assert f"<br />\n<em>{alt}</em>" in page, src


def test_the_body_has_no_scientific_notation(body: str) -> None:
    numbers = re.findall(r"(?<![\w.])\d+(?:\.\d+)?e[+-]\d+\b", body)
    assert numbers == []


def test_large_counts_carry_thousands_separators(body: str) -> None:
    # H20's finished requests over the hour: 11,674 (an extrapolated increase).
    assert "| 11,674 |" in body


def test_timestamps_are_to_the_second(body: str) -> None:
    assert not re.search(r"\d{2}:\d{2}:\d{2}\.\d+", body)
    assert re.search(r"2026-10-19 1\d:\d{2}:\d{2}\+08:00", body)


@pytest.mark.parametrize(
    ("term", "spelt"),
    [
        ("TTFT", "time to first token"),
        ("TPOT", "time per output token"),
        ("ITL", "inter-token latency"),
        ("DCGM", "Data Center GPU Manager"),
        ("FB", "framebuffer"),
        ("KV", "keys and values"),
    ],
)
def test_every_abbreviation_used_is_spelt_out(body: str, term: str, spelt: str) -> None:
    # Each of these is used in the body's tables (and so must be spelt out somewhere).
    assert re.search(rf"\b{term}\b", body, flags=re.IGNORECASE), term
    assert spelt in body, term
