"""A report in Jupyter: a small summary, a repr of a few lines, figures and sections on demand.

On the bundled dataset the report's whole HTML is about a megabyte (six
figures embedded); a notebook keeps what it shows, so the view must stay
small and name the rest: each figure drawn by ``report.figure(name)``, the
same PNG ``write_report`` writes to ``figures/<name>.png``, and each section
by ``report.section(title)``. The fleet sizes are in test_fleet_body.py.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import inference_obs as obs
from inference_obs.analyses import gpu, latency
from inference_obs.errors import ConfigurationError
from inference_obs.report import Report, report_json, write_report
from inference_obs.source.dataset import read_manifest

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "pro5000-vs-h20"
#: The most bytes a report's HTML view may take in a notebook.
VIEW_BYTES = 60_000
#: The most characters of ``repr(report)``.
REPR_CHARS = 1_000


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, dict[str, Path]]:
    report = obs.report(obs.DatasetSource(DATASET))
    return report, report.write(tmp_path_factory.mktemp("report"), ["md"])


def _figures(paths: dict[str, Path]) -> dict[str, Path]:
    """The figures ``write_report`` wrote: name -> file."""
    return {k.removeprefix("figure:"): p for k, p in paths.items() if k.startswith("figure:")}


def test_the_html_view_is_the_summary_without_a_figure(
    written: tuple[Report, dict[str, Path]],
) -> None:
    report, paths = written
    fragment = report._repr_html_()
    assert len(fragment.encode("utf-8")) < VIEW_BYTES  # about 1.1 MB with the figures inline
    assert "data:image" not in fragment
    assert "<img" not in fragment
    assert not fragment.startswith("<!DOCTYPE")
    assert "<h2" not in fragment  # no section of the whole report
    assert re.match(rf'<h3 id="[^"]+">{re.escape(html.escape(report.title))}</h3>', fragment)
    # The Summary section's findings, ranked, every one of them (report.json lists them) ...
    conclusions = re.findall(r'<ol class="notes">(.*?)</ol>', fragment)
    assert len(conclusions) == 1
    assert conclusions[0].count("<li>") == len(report_json(report)["summary"]) > 0
    summary = paths["md"].read_text().split("## Summary\n")[1].split("\n## ")[0]
    for c in report.conclusions.entries:
        assert c.text in summary  # the written Summary says it ...
        assert html.escape(c.text) in fragment  # ... and so does the view, ...
        assert f"<code>report.section({c.section!r})</code>" in fragment  # ... where to read on
    assert 'href="#' not in fragment  # no link to a heading the notebook does not have
    # ... each deployment's headline numbers in a row ...
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", fragment)
    pro, h20 = (row.split("</td><td>") for row in rows[:2])
    assert pro[0] == "PRO"
    assert h20[:2] == ["H20", "11,674"]  # requests finished, in whole units, with separators
    ttft = report.deployments[1].of(latency).ttft.p95
    assert ttft.bounds is not None
    assert ttft.value is not None
    # The counted requests' bucket (0.5, 1], widened by the requests at the window's edges.
    assert (ttft.bounds.lower, ttft.bounds.upper) == (0.5, 2.5)
    assert h20[2] == f"{ttft.value * 1000:.4g} ms [500, 2,500]"  # under a second: ms
    assert h20[7] == f"{report.deployments[1].of(gpu).utilization_mean.value:.4g}"
    # ... the verdicts of the comparisons they enter ...
    assert (
        "<tr><td>output tokens per second per replica, wall clock (tokens/s)</td>"
        "<td>invalid</td>" in fragment
    )
    assert "PRO vs H20: 26 comparisons (14 caveated, 12 invalid)" in fragment
    # ... then every figure written and every section, by the call that shows it.
    figures = _figures(paths)
    assert len(figures) == 6  # three per deployment: no ITL buckets, no profiling counters
    for name in figures:
        assert f"<code>report.figure({name!r})</code>" in fragment
    headings = re.findall(r"^## (.+)$", paths["md"].read_text(), flags=re.MULTILINE)
    for title in headings:
        assert f"<code>{html.escape(repr(title), quote=False)}</code>" in fragment, title
    assert "report.write(&quot;my-report&quot;)" in fragment


def test_a_figure_on_demand_is_the_png_the_report_writes(
    written: tuple[Report, dict[str, Path]],
) -> None:
    report, paths = written
    figures = _figures(paths)
    assert sorted(report.figures) == sorted(figures)  # listed without drawing one
    assert len(report.figures) == len(figures)
    text = paths["md"].read_text()
    for name, path in figures.items():
        shown = report.figure(name)
        assert shown.name == name
        assert shown.png == path.read_bytes()
        assert shown._repr_png_() == shown.png  # what Jupyter shows
        assert f"![{shown.caption}](figures/{name}.png)" in text
    with pytest.raises(ConfigurationError, match="PRO-gpu-heatmap") as raised:
        report.figure("PRO-dram-vs-tensor")  # no profiling counters: not drawn
    assert "no figure 'PRO-dram-vs-tensor'" in str(raised.value)


def test_a_section_on_demand_is_the_written_section(
    written: tuple[Report, dict[str, Path]],
) -> None:
    report, paths = written
    text = paths["md"].read_text()
    assert list(report.sections) == re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    section = report.section("Throughput")
    written_section = "## Throughput\n" + text.split("\n## Throughput\n")[1].split("\n## ")[0]
    assert str(section).strip() == written_section.strip()
    assert section._repr_html_().startswith('<h2 id="throughput">Throughput</h2>')
    # A section with a figure names the call that draws it, without embedding it.
    queues = report.section("Queues and GPU activity")._repr_html_()
    assert "<img" not in queues
    assert html.escape("report.figure('H20-queue-vs-gpu') draws it") in queues
    assert 'href="#' not in report.section("Summary")._repr_html_()  # notes name the call
    with pytest.raises(ConfigurationError, match=r"no section 'Nope'.*Throughput"):
        report.section("Nope")


def test_the_repr_is_a_few_lines(written: tuple[Report, dict[str, Path]]) -> None:
    report, _ = written
    text = repr(report)
    assert len(text) < REPR_CHARS  # 861,000 characters as pydantic writes every field
    assert str(report) == text
    lines = text.splitlines()
    assert len(lines) <= 8
    assert "deployments: PRO, H20" in text
    observed = read_manifest(DATASET).window.window()  # the dataset's hour, at +08:00
    assert f"window: {observed.start.isoformat(' ')} to {observed.end.isoformat(' ')}" in text
    assert f"{len(report_json(report)['summary'])} in the Summary" in text
    assert ".figure(name)" in text
    assert ".section(title)" in text
    assert ".write(path)" in text


def test_report_write_writes_what_write_report_writes(
    written: tuple[Report, dict[str, Path]], tmp_path: Path
) -> None:
    report, _ = written
    mine = report.write(str(tmp_path / "mine"))  # a str is taken as a path too
    theirs = write_report(report, tmp_path / "theirs")
    assert sorted(mine) == sorted(theirs)
    assert {"md", "html", "json", "replicas"} <= set(mine)  # every format without formats=
    for key, path in mine.items():
        assert path.read_bytes() == theirs[key].read_bytes(), key
