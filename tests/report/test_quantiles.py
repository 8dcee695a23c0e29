"""How the report shows quantiles: the lowest bucket as "≤ upper", the bucket beside every
quantile, two quantiles in one bucket said to be indistinguishable, and times in ms or s.

The reports are those the command line writes for the bundled datasets; expected numbers
come from the datasets' ``requests.csv`` (the simulator's ground truth) or are read back
from ``report.json``, never formatted by the code under test.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_obs.analyses import latency
from inference_obs.cli import main
from inference_obs.metrics import vllm
from inference_obs.report import Report, build_report
from inference_obs.report.document import Table
from inference_obs.report.markdown import to_markdown
from inference_obs.report.sections import sections
from inference_obs.report.summary import summary
from inference_obs.simulate import simulate
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.ground_truth import true_quantile, truth

ROOT = Path(__file__).resolve().parents[2]
TWIN = ROOT / "tests" / "fixtures" / "scenarios" / "twin.yaml"
#: "7.948 ms [5, 10]", "2.046 s [1, 2.5]", "≤ 1 s": value or upper bound, unit, bucket.
TIME = re.compile(r"^(≤ )?([\d,.]+) (ms|s)(?: \[([\d,.]+), ([\d,.]+|∞)\])?$")
#: 4 significant digits shown: the relative error of a shown value.
SHOWN = 5e-4


def make_pair(source: DatasetSource) -> Report:
    manifest = source.dataset.manifest
    return build_report(
        source,
        manifest.deployments,
        manifest.window.window(),
        title=manifest.title,
        source_name="dataset",
    )


def _report(dataset: str, out: Path) -> tuple[str, dict[str, Any]]:
    argv = ["report", "--dataset", str(ROOT / "datasets" / dataset), "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    return text, json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pro_h20(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    return _report("pro5000-vs-h20", tmp_path_factory.mktemp("pro"))


@pytest.fixture(scope="module")
def h100_h200(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    return _report("h100-vs-h200", tmp_path_factory.mktemp("h100"))


def _rows(text: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table(s) whose header row starts with ``header``."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith(f"| {header} |"):
            inside = True
        elif inside and line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif not line.startswith("|"):
            inside = False
    return rows


def _latency_row(text: str, deployment: str, metric: str) -> dict[str, str]:
    header = ("deployment", "metric", "mean", "P50", "P90", "P95", "P99")
    (row,) = [r for r in _rows(text, "deployment | metric") if r[:2] == [deployment, metric]]
    return dict(zip(header, row, strict=True))


def _verdict_row(text: str, comparison: str) -> list[str]:
    (row,) = [r for r in _rows(text, "comparison | verdict") if r[0] == comparison]
    return row


def _seconds(shown: str) -> tuple[bool, float, tuple[float, float] | None]:
    """A shown time read back: (at most?, value or upper bound, bucket), in seconds."""
    found = TIME.match(shown)
    assert found, shown
    at_most, value, unit, lower, upper = found.groups()
    scale = 1e-3 if unit == "ms" else 1.0

    def read(x: str) -> float:
        return float("inf") if x == "∞" else float(x.replace(",", "")) * scale

    bucket = None if lower is None else (read(lower), read(upper))
    return at_most is not None, read(value), bucket


def _measurement(data: dict[str, Any], key: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [m for m in data["measurements"] if m["key"] == key]
    (m,) = found
    return m


def test_h20_queue_time_in_the_lowest_bucket_reads_at_most_its_bound(
    pro_h20: tuple[str, dict[str, Any]],
) -> None:
    text, data = pro_h20
    queue = truth(DatasetSource(ROOT / "datasets" / "pro5000-vs-h20"), "H20", "queue_time")
    queue_row = _latency_row(text, "H20", "queue")
    for label, q in (("P50", 0.5), ("P95", 0.95), ("P99", 0.99)):
        at_most, upper, bucket = _seconds(queue_row[label])
        m = _measurement(data, f"H20/latency/queue_{label.lower()}")
        # Shown as "≤ upper" (no interpolated value, no bracket), the upper bound the
        # report.json bucket's, and the true quantile within it.
        assert at_most, queue_row[label]
        assert bucket is None, queue_row[label]
        assert upper == pytest.approx(m["bounds"]["upper"], rel=SHOWN)
        assert true_quantile(queue, q) <= upper
        # report.json keeps the estimate, Prometheus's interpolation and the bucket, and
        # says which it is.
        assert m["bounds"]["lower"] == 0
        assert "lowest_bucket" in [a["kind"] for a in m["annotations"]]
        assert 0 <= m["value"] <= m["bounds"]["upper"]
        assert m["provenance"]["promql_value"] > 0
    # The interpolated median is far from the truth (most requests never waited:
    # requests.csv's median queue time is 0); the estimate, led by the exact mean of
    # 19.6 ms, is within 10 ms of it.
    assert true_quantile(queue, 0.5) == 0
    p50 = _measurement(data, "H20/latency/queue_p50")
    assert p50["provenance"]["promql_value"] > 0.4
    assert p50["value"] < 0.01
    # The verdict table shows the same, on both sides.
    assert _verdict_row(text, "queue_p50")[2:4] == ["≤ 1 s", "≤ 1 s"]
    # A quantile above the lowest bucket is neither annotated nor shown so.
    ttft = _measurement(data, "H20/latency/ttft_p50")
    assert ttft["bounds"]["lower"] > 0
    assert "lowest_bucket" not in [a["kind"] for a in ttft["annotations"]]
    assert not _seconds(_latency_row(text, "H20", "ttft")["P50"])[0]


def test_the_verdict_table_shows_each_quantile_with_its_bucket(
    pro_h20: tuple[str, dict[str, Any]],
) -> None:
    text, data = pro_h20
    shown = 0
    for comparison in ("ttft_p95", "ttft_p99", "e2e_p95", "tpot_p95"):
        row = _verdict_row(text, comparison)
        for deployment, cell in zip(("PRO", "H20"), row[2:4], strict=True):
            m = _measurement(data, f"{deployment}/latency/{comparison}")
            at_most, value, bucket = _seconds(cell)
            assert not at_most, cell
            assert bucket is not None, cell
            assert value == pytest.approx(m["value"], rel=SHOWN)
            assert bucket == pytest.approx((m["bounds"]["lower"], m["bounds"]["upper"]))
            shown += 1
    assert shown == 8
    # The verdicts in report.json carry the buckets too.
    (pair,) = data["comparisons"]
    (p99,) = [v for v in pair["verdicts"] if v["comparison"] == "ttft_p99"]
    upper = _measurement(data, "PRO/latency/ttft_p99")["bounds"]["upper"]
    assert p99["bounds"]["PRO"]["upper"] == upper


def test_sub_second_latencies_read_in_milliseconds_without_exponents(
    pro_h20: tuple[str, dict[str, Any]],
) -> None:
    text, data = pro_h20
    row = _latency_row(text, "H20", "tpot")
    for label in ("mean", "P50", "P99"):
        m = _measurement(data, f"H20/latency/tpot_{label.lower()}")
        assert m["value"] < 0.1
        assert " ms" in row[label], row[label]
        _, value, bucket = _seconds(row[label])
        assert value == pytest.approx(m["value"], rel=SHOWN)
        if m["bounds"] is not None and label != "mean":
            assert bucket == pytest.approx((m["bounds"]["lower"], m["bounds"]["upper"]))
    # Over a second: seconds.
    e2e = _latency_row(text, "H20", "e2e")["P50"]
    assert e2e.split(" [")[0].endswith(" s")
    e2e_p50 = _measurement(data, "H20/latency/e2e_p50")["value"]
    assert _seconds(e2e)[1] == pytest.approx(e2e_p50, rel=SHOWN)
    latency = "\n".join(" | ".join(r) for r in _rows(text, "deployment | metric"))
    assert not re.search(r"\de-?\d", latency), latency


def test_the_jupyter_summary_shows_times_in_ms_or_s_with_buckets() -> None:
    source = DatasetSource(ROOT / "datasets" / "pro5000-vs-h20")
    report = make_pair(source)
    tables = [b for b in summary(report) if isinstance(b, Table)]
    (table,) = [t for t in tables if t.header[0] == "deployment"]
    (h20,) = [row for row in table.rows if row[0] == "H20"]
    header = table.header
    p95 = h20[header.index("TTFT P95")]
    at_most, value, bucket = _seconds(p95)
    assert p95.split(" [")[0].endswith(" ms")
    assert bucket is not None
    (deployment,) = [d for d in report.deployments if d.deployment.name == "H20"]
    ttft = deployment.of(latency).ttft.p95
    assert not at_most
    assert ttft.value is not None
    assert value == pytest.approx(ttft.value, rel=SHOWN)
    mean = h20[header.index("TTFT mean")]
    assert mean.endswith(" ms")
    (verdicts,) = [t for t in tables if t.header[0] == "comparison"]
    (p95_row,) = [r for r in verdicts.rows if r[0] == "time to first token P95"]
    assert _seconds(p95_row[3])[2] is not None, p95_row


def test_ttft_medians_in_one_bucket_are_noted_indistinguishable(
    h100_h200: tuple[str, dict[str, Any]],
) -> None:
    text, data = h100_h200
    source = DatasetSource(ROOT / "datasets" / "h100-vs-h200")
    (pair,) = data["comparisons"]
    verdicts = {v["comparison"]: v for v in pair["verdicts"]}
    p50 = verdicts["ttft_p50"]
    assert "same_bucket" in p50["notes"]
    assert p50["bounds"]["H100"] == p50["bounds"]["H200"]
    lower, upper = p50["bounds"]["H100"]["lower"], p50["bounds"]["H100"]["upper"]
    # Both true medians lie in that one bucket: the histograms cannot order them.
    for name in ("H100", "H200"):
        true = true_quantile(truth(source, name, "ttft", time="first_token"), 0.5)
        assert lower < true <= upper, (name, true)
    # Medians in different buckets carry no such note.
    tpot = verdicts["tpot_p50"]
    assert tpot["bounds"]["H100"] != tpot["bounds"]["H200"]
    assert "same_bucket" not in tpot["notes"]
    # The verdict table shows the note, and the findings table says what it means.
    assert "same_bucket" in _verdict_row(text, "ttft_p50")[-1]
    # So does the Jupyter summary, for the headline TTFT P95 (also in one bucket).
    assert "same_bucket" in verdicts["ttft_p95"]["notes"]
    tables = [b for b in summary(make_pair(source)) if isinstance(b, Table)]
    (headline,) = [r for t in tables for r in t.rows if r[0] == "time to first token P95"]
    assert headline[1].endswith("(same bucket)"), headline
    assert "same_bucket" not in _verdict_row(text, "tpot_p50")[-1]
    (finding,) = [r for r in _rows(text, "finding | severity") if r[0] == "same_bucket"]
    assert "indistinguishable" in finding[2]
    assert "ttft_p50" in finding[3]


def test_the_matched_concurrency_table_shows_buckets_and_shared_ones(tmp_path: Path) -> None:
    scenario = yaml.safe_load(TWIN.read_text())
    scenario["deployments"][1] = copy.deepcopy(scenario["deployments"][1])
    scenario["deployments"][1]["workload"][0]["rate_per_second"] = 2.2  # B 2.2x as busy
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    source = DatasetSource(simulate(tmp_path / "scenario.yaml", tmp_path / "data", seed=11))
    report = make_pair(source)
    assert report.validity is not None
    (pair,) = report.validity.pairs
    (itl,) = [m for m in pair.matched if m.family == vllm.INTER_TOKEN_LATENCY.name]
    text = to_markdown(tuple(sections(report)))
    rows = [r for r in _rows(text, "deployment | intervals") if r[0] in ("A", "B")]
    assert len(rows) == 2 * len(pair.matched)
    for name, _, p50, p95 in rows[:2]:
        for shown, label in ((p50, "p50"), (p95, "p95")):
            m = itl.quantiles[name][label]
            _at_most, value, bucket = _seconds(shown)
            assert m.bounds is not None
            assert bucket is not None, shown
            assert " ms" in shown, shown
            assert value == pytest.approx(m.value, rel=SHOWN)
            assert bucket == pytest.approx((m.bounds.lower, m.bounds.upper))
    # Where both sides' P50 share a bucket, the report says they are indistinguishable.
    a, b = (itl.quantiles[n]["p50"].bounds for n in ("A", "B"))
    assert a == b
    said = [line for line in text.splitlines() if line.startswith("P50: both lie in the bucket")]
    assert said
    assert "same_bucket" in said[0]
