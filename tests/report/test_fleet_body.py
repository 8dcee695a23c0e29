"""The report's body does not grow with the fleet: 5, 64 and 1,000 replicas.

Each fleet is simulated (:mod:`tests.analyses.fleets`) as two deployments
of half the replicas each, compared as a report compares them; the 64 and
the 1,000 lean (the histograms, counters and GPU field the report needs of
a fleet, over a few minutes) so that they simulate and report in under a
minute; the full 64-replica fleet of :mod:`tests.analyses.test_outliers`
checks its body too. The body (report.md before the appendix) stays under
400 lines, no line of it passes 1,500 characters, each Summary item stays
under 900, and Collection health counts the instances rather than listing
them. What a notebook shows of the report stays as small: its HTML view
under 60 kB with no figure embedded, its repr under 1,000 characters.
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest

import inference_obs as obs
from inference_obs.report import Report
from inference_obs.report.markdown import to_markdown
from inference_obs.report.sections import sections
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.fleets import fleet_scenario, simulated

#: replicas -> the fleet simulated for it (minutes, requests per second in all, lean)
FLEETS = {5: (10, 2.0, False), 64: (5, 20.0, True), 1000: (2, 100.0, True)}


@pytest.fixture(scope="module", params=sorted(FLEETS), ids=lambda n: f"{n}-replicas")
def fleet(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Report:
    replicas: int = request.param
    minutes, rate, lean = FLEETS[replicas]
    scenario = fleet_scenario(
        replicas, minutes=minutes, rate_per_second=rate, lean=lean, halves=True
    )
    data: Path = simulated(scenario, tmp_path_factory.mktemp("fleet") / "d")
    return obs.report(DatasetSource(data))


def _body(report: Report) -> list[str]:
    text = to_markdown(sections(report))
    return text[: text.index("## Appendix")].splitlines()


def test_the_body_is_short_whatever_the_fleet(fleet: Report) -> None:
    body = _body(fleet)
    assert len(body) < 400
    longest = max(body, key=len)
    assert len(longest) <= 1500, longest[:200]


def test_each_summary_item_is_short(fleet: Report) -> None:
    found = fleet.conclusions.entries
    assert found
    for c in found:
        assert len(c.text) < 900, c.text[:200]


def test_collection_health_counts_a_fleets_instances(fleet: Report) -> None:
    health = "\n".join(_body(fleet))
    health = health[health.index("## Collection health") :]
    health = health[: health.index("\n## ", 1)]
    sizes = [len(one.replicas) for one in fleet.fleet.values()]
    for replicas in sizes:
        if replicas > 8:
            # Every instance was scraped from start to end: the count is said, none listed.
            assert f"{replicas} of {replicas} instances: " in health
    if max(sizes) <= 8:
        # A handful: every instance with its count.
        assert health.count(":8000: ") == sum(sizes)
    else:
        assert ":8000: " not in health


def test_what_a_notebook_shows_stays_small_whatever_the_fleet(fleet: Report) -> None:
    shown = fleet._repr_html_()
    assert len(shown.encode("utf-8")) < 60_000  # 2.3 MB for 64 replicas with the figures
    assert "data:image" not in shown
    for c in fleet.conclusions.entries:  # the Summary's every finding
        assert html.escape(c.text) in shown
    for name in fleet.figures:
        assert f"<code>report.figure({name!r})</code>" in shown
    assert len(repr(fleet)) < 1_000  # 3.9 million characters for 64 replicas
    assert "deployments: FLEET, OTHER\n" in repr(fleet)  # the scenario's two halves
