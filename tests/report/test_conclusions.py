"""The Summary and "What not to conclude" sections, the grouped appendix, and report.json's
summary, on the report the command line writes for the bundled PRO 5000 vs H20 dataset."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inference_obs.analyses import gpu, latency, queueing, throughput
from inference_obs.analyses.conclusions import lower
from inference_obs.analyses.registry import ANALYSES
from inference_obs.cli import main
from inference_obs.reading.measurement import Bounds, Measurement, Provenance, Status
from inference_obs.reading.wording import duration_cell
from inference_obs.report import build_report
from inference_obs.report.document import Notes, anchor
from inference_obs.report.sections import sections
from inference_obs.source.dataset.source import DatasetSource

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("summary")
    assert main(["report", "--dataset", str(DATASET), "--out", str(out), "--quiet"]) == 0
    return out


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_summary_comes_first_and_says_what_the_published_observation_opens_with(
    written: Path,
) -> None:
    text = (written / "report.md").read_text()
    lines = text.splitlines()
    assert lines.index("## Summary") < 40
    assert lines.index("## Summary") < lines.index("## Deployments compared")
    data = json.loads((written / "report.json").read_text())
    by = {m["key"]: m for m in data["measurements"]}
    summary = _section(text, "Summary")
    items = re.findall(r"^\d+\. (.+)$", summary, flags=re.MULTILINE)
    assert len(items) == len(data["summary"]) >= 4
    ttft = items[0]
    # H20's TTFT P95 bucket (0.5, 2.5] (its counted requests' (0.5, 1], widened by the
    # requests at the window's edges) lies wholly below PRO's (20, 40]: H20 is called lower.
    assert by["H20/latency/ttft_p95"]["bounds"] == {"lower": 0.5, "upper": 2.5}
    assert by["PRO/latency/ttft_p95"]["bounds"] == {"lower": 20.0, "upper": 40.0}
    # The values are the estimates inside those buckets (docs/quantile-estimate.md), checked
    # by hand against requests.csv: H20's true TTFT P95 is 900.6 ms (interpolation read
    # 956.8 ms), PRO's 22.09 s (interpolation 22.44 s).
    assert ttft.startswith("H20 had the lower time to first token: P95 912.3 ms [500, 2,500]")
    assert "PRO's 21.45 s [20, 40]" in ttft
    assert "the comparison is caveated" in ttft
    assert "*Not to conclude:*" in ttft
    assert "([Latency](#latency); `PRO/latency/ttft_p95`, `H20/latency/ttft_p95`" in ttft
    throughput_item = next(i for i in items if "output-throughput ratio" in i)
    assert "says nothing about the hardware; the comparison is invalid" in throughput_item
    queued = next(i for i in items if i.startswith("PRO had requests waiting"))
    assert "while its GPUs were mostly idle (15.61% mean utilisation)" in queued
    assert "peak 19 waiting at 2026-10-19 17:55:26+08:00" in queued
    # The queues section's contingency, one set of numbers: of PRO's 6 scrapes with requests
    # waiting, 3 had GPUs at 50% or more and 3 below (tests/report/test_queues_section.py
    # counts them from the raw samples).
    assert "the GPUs were busy in 3 and idle (under 50%) in 3" in queued
    assert not any(i.startswith("H20 had requests waiting") for i in items)  # 1 scrape in 240


def test_every_summary_entry_rests_on_keys_in_the_report_and_links_a_section(
    written: Path,
) -> None:
    data = json.loads((written / "report.json").read_text())
    keys = {m["key"] for m in data["measurements"]}
    text = (written / "report.md").read_text()
    page = (written / "report.html").read_text()
    headings = set(re.findall(r"^## (.+)$", text, flags=re.MULTILINE))
    assert [e["rank"] for e in data["summary"]] == list(range(1, len(data["summary"]) + 1))
    for entry in data["summary"]:
        assert entry["keys"], entry["kind"]
        assert set(entry["keys"]) <= keys, entry["kind"]
        assert entry["section"] in headings
        assert entry["anchor"] == anchor(entry["section"])
        assert f'id="{entry["anchor"]}"' in page
        assert f'href="#{entry["anchor"]}"' in page
    kinds = [e["kind"] for e in data["summary"]]
    # TTFT and TPOT: P95 and mean both lower for H20. End-to-end: H20's P95 bucket lies
    # below PRO's, but PRO's mean (3.274 s against 4.611 s, the latency table) is lower.
    assert kinds[:3] == ["latency_lower", "latency_lower", "latency_split"]
    assert {"throughput_ratio", "queued"} <= set(kinds)
    (ttft,) = [e for e in data["summary"] if e["comparison"] == "ttft_p95"]
    assert ttft["deployments"] == ["H20", "PRO"]
    assert ttft["verdict"] == "caveated"


def test_what_not_to_conclude_comes_before_the_appendix_with_the_caveats_that_apply(
    written: Path,
) -> None:
    text = (written / "report.md").read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings[-2:] == ["What not to conclude", "Appendix: recheck these numbers"]
    cautions = _section(text, "What not to conclude")
    for words in (
        "synthetic data from a simulator",
        "Throughput of different workloads is not a hardware ratio",
        "Quantiles inside one bucket cannot be ordered",
        "Utilisation is not saturation: GPU utilisation (PRO 15.61%, H20 94.77%)",
        "No series is not no problem",
        "vllm:inter_token_latency_seconds_bucket",
        "Speculative acceptance is not a speed-up",
        "Measured board power, not a rated figure",
    ):
        assert words in cautions, words
    data = json.loads((written / "report.json").read_text())
    assert [c["text"] for c in data["cautions"]] == re.findall(
        r"^- (.+)$", cautions, flags=re.MULTILINE
    )


def test_the_appendix_is_grouped_by_analysis(written: Path) -> None:
    text = (written / "report.md").read_text()
    appendix = text.split("## Appendix: recheck these numbers", 1)[1]
    data = json.loads((written / "report.json").read_text())
    analyses = list(dict.fromkeys(m["analysis"] for m in data["measurements"]))
    groups = re.findall(r"^### (.+) \((\d+) numbers\)$", appendix, flags=re.MULTILINE)
    assert len(groups) == len(analyses)
    assert [int(n) for _, n in groups] == [
        sum(m["analysis"] == a for m in data["measurements"]) for a in analyses
    ]
    titles = {one.name: one.title for one in ANALYSES}
    # Comparisons' matched-concurrency numbers come from no registered analysis.
    titles["matched_concurrency"] = "Matched concurrency"
    assert [title for title, _ in groups] == [titles[a] for a in analyses]
    assert "Latency" in titles.values()
    page = (written / "report.html").read_text()
    assert page.count("<details") == len(analyses)
    assert "<details open" not in page  # folded until clicked
    nav = re.search(r'<nav class="contents">(.*?)</nav>', page)
    assert nav is not None
    listed = re.findall(r'<a href="#([^"]+)">(.*?)</a>', nav.group(1))
    assert [t for _, t in listed] == re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    for target, _ in listed:
        assert f'<h2 id="{target}">' in page


def _m(value: float, lower_: float | None = None, upper: float | None = None) -> Measurement:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return Measurement(
        key="X/latency/ttft_p95", deployment="X", analysis="latency", statistic="ttft_p95",
        value=value, unit="seconds", window_start=moment, window_end=moment, status=Status.OK,
        bounds=None if lower_ is None or upper is None else Bounds(lower=lower_, upper=upper),
        provenance=Provenance(promql=(), engine="dataset", rules="prometheus-2"),
    )  # fmt: skip


def test_a_quantile_is_lower_only_when_its_bucket_lies_wholly_below() -> None:
    # Buckets are (lower, upper]: x <= 1 = y's lower bound < y.
    assert lower(_m(0.9, 0.5, 1.0), _m(1.2, 1.0, 2.5)) == 0
    assert lower(_m(1.2, 1.0, 2.5), _m(0.9, 0.5, 1.0)) == 1
    # The same bucket, however far apart the interpolated values.
    assert lower(_m(1.01, 1.0, 2.5), _m(2.4, 1.0, 2.5)) is None
    # Exact numbers: 10% apart or more.
    assert lower(_m(1.0), _m(1.09)) is None
    assert lower(_m(1.0), _m(1.2)) == 0


def test_with_prices_the_summary_states_cost_with_its_verdict() -> None:
    source = DatasetSource(DATASET)
    manifest = source.dataset.manifest
    prices = {"PRO": 1.2, "H20": 2.5}
    priced = [d.with_facts(gpu_hour_price=prices[d.name]) for d in manifest.deployments]
    report = build_report(
        source, priced, manifest.window.window(), title=manifest.title,
        source_name="datasets/pro5000-vs-h20",
    )  # fmt: skip
    (cost,) = [c for c in report.conclusions.entries if c.kind == "cost"]
    assert report.validity is not None
    assert cost.verdict == report.validity.pairs[0].verdicts["cost_per_token"].verdict.value
    assert cost.keys == (
        "PRO/cost/cost_per_million_useful_output_tokens",
        "H20/cost/cost_per_million_useful_output_tokens",
    )
    assert "Cost per million useful output tokens" in cost.text
    # The report's Summary section lists the same conclusions, in the same order.
    blocks = sections(report)
    (notes,) = [b for b in blocks if isinstance(b, Notes)]
    assert [n.text for n in notes.items] == [c.text for c in report.conclusions.entries]
    # And each latency conclusion quotes the cells the Latency section shows.
    runs = {d.deployment.name: d for d in report.deployments}
    for c in report.conclusions.entries:
        if c.kind == "latency_lower":
            metric = (c.comparison or "").removesuffix("_p95")
            for name in c.deployments:
                assert duration_cell(getattr(runs[name].of(latency), metric).p95) in c.text
    assert {gpu.name, queueing.name, throughput.name} <= set(runs["PRO"].results)
