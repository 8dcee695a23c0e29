"""The report on a bundled dataset: sections, JSON, the recheck appendix and determinism, in
threads and with questions joined as for a server."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inference_obs.analyses import boundaries, queueing, throughput
from inference_obs.analyses.validity.findings import FINDINGS, Severity
from inference_obs.query import Expr, Selector, to_promql
from inference_obs.reading import resolution
from inference_obs.report import Report, build_report, report_json, write_report
from inference_obs.report.html import html_parts, to_html
from inference_obs.report.markdown import markdown_parts, to_markdown
from inference_obs.report.report_json import to_json_bytes
from inference_obs.report.report_json_model import ReportDocument
from inference_obs.report.sections import sections
from inference_obs.report.write import FORMATS
from inference_obs.samples import Instant, Labels, Matrix, SampleSet, Window
from inference_obs.source.base import EngineInfo
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.fleets import fleet_scenario, simulated

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
SECTIONS = (
    "Scope", "Summary", "What happened", "Deployments compared", "Collection health",
    "Declared and verified configuration",
    "Collection and statistical definitions",
    "Request shapes", "Throughput", "Latency", "SLOs", "Replicas", "Queues and GPU activity",
    "Memory and errors",
    "Caches and speculative decoding",
    "GPU activity and bottleneck", "Stage boundaries: what the GPUs wait on", "Cost",
    "Comparison verdicts", "What not to conclude",
    "Appendix: recheck these numbers",
)  # fmt: skip


def make(
    source: DatasetSource, *, prices: dict[str, float] | None = None, **options: object
) -> Report:
    manifest = source.dataset.manifest
    given = prices or {}
    deployments = [d.with_facts(gpu_hour_price=given.get(d.name)) for d in manifest.deployments]
    return build_report(
        source, deployments, manifest.window.window(), title=manifest.title,
        source_name="datasets/pro5000-vs-h20",
        scrape_interval_seconds=manifest.scrape_interval_seconds,
        methodology=manifest.methodology, **options,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, dict[str, Path]]:
    report = make(DatasetSource(DATASET), prices={"PRO": 1.2, "H20": 2.5})
    return report, write_report(report, tmp_path_factory.mktemp("report"))


def test_markdown_follows_the_method_in_order(written: tuple[Report, dict[str, Path]]) -> None:
    text = written[1]["md"].read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings == list(SECTIONS)
    assert "no inference request was sent and nothing was changed" in text
    # Every figure the Markdown links to was written.
    for link in re.findall(r"\]\((figures/[^)]+\.png)\)", text):
        assert (written[1]["md"].parent / link).is_file(), link
    assert len(re.findall(r"\]\(figures/", text)) == 6


def test_json_holds_every_measurement_once_with_its_provenance(
    written: tuple[Report, dict[str, Path]],
) -> None:
    report, paths = written
    data = json.loads(paths["json"].read_text())
    assert data["format"] == "inference-obs-report/1"
    keys = [m["key"] for m in data["measurements"]]
    assert len(keys) == len(set(keys)) == len(report.measurements())
    for m in data["measurements"]:
        assert m["key"] == f"{m['deployment']}/{m['analysis']}/{m['statistic']}"
        assert m["status"] in ("ok", "no_data", "partial", "invalid")
        assert (m["value"] is None) == (m["status"] in ("no_data", "invalid"))
        assert m["provenance"]["promql"], m["key"]
    by_key = {m["key"]: m for m in data["measurements"]}
    # The PRO queue mean is exact, and says what PromQL's extrapolated ratio gives.
    queue = by_key["PRO/latency/queue_mean"]
    assert [a["kind"] for a in queue["annotations"]] == ["extrapolation_bias"]
    p99 = by_key["H20/latency/ttft_p99"]
    assert p99["bounds"]["lower"] <= p99["value"] <= p99["bounds"]["upper"]
    (pair,) = data["comparisons"]
    verdicts = {v["comparison"]: v["verdict"] for v in pair["verdicts"]}
    assert verdicts["output_throughput"] == "invalid"
    assert {f["code"] for f in pair["findings"]} <= set(FINDINGS)
    costs = [m for m in data["measurements"] if m["analysis"] == "cost"]
    assert {m["deployment"] for m in costs} == {"PRO", "H20"}


def test_the_deployments_as_given_with_their_prices_read_back_as_a_report_document(
    written: tuple[Report, dict[str, Path]],
) -> None:
    document = ReportDocument.model_validate_json(written[1]["json"].read_text())
    # The prices the fixture gave (PRO 1.2, H20 2.5) are part of each deployment as given.
    declared = {d.name: d.declared["hardware"] for d in document.deployments}
    assert {name: h["gpu_hour_price"] for name, h in declared.items()} == {"PRO": 1.2, "H20": 2.5}
    assert all("topology" not in d.declared for d in document.deployments)


def test_the_appendix_lists_every_query_behind_every_number(
    written: tuple[Report, dict[str, Path]],
) -> None:
    report, paths = written
    appendix = paths["md"].read_text().split("## Appendix: recheck these numbers")[1]
    for m in report.measurements():
        assert f"# {m.key} = " in appendix, m.key
        for query in m.provenance.promql:
            assert query in appendix, (m.key, query)


def test_verdicts_show_each_finding_with_its_evidence(
    written: tuple[Report, dict[str, Path]],
) -> None:
    report, paths = written
    text = paths["md"].read_text()
    assert report.validity is not None
    pair = report.validity.pairs[0]
    # Comparisons with no number on either side are named once, not given finding rows.
    empty = {c for c, v in pair.verdicts.items() if all(x is None for x in v.values.values())}
    assert empty == {"itl_p50", "itl_p95", "itl_p99"}  # the dataset drops ITL's buckets
    assert f"Not compared, no data on either side: {', '.join(sorted(empty))}." in text
    for finding in pair.findings:
        if finding.affects and set(finding.affects) <= empty:
            assert f"| {finding.code} |" not in text
            continue
        if not finding.evidence and finding.severity is Severity.INFO:
            # A standing note (true whatever the data) is named, and said in full below.
            standing = next(line for line in text.splitlines() if line.startswith("Standing"))
            assert finding.code in standing
            continue
        row = next(line for line in text.splitlines() if line.startswith(f"| {finding.code} |"))
        for evidence in finding.evidence:
            assert evidence.statistic in row, (finding.code, evidence.statistic)


def test_html_is_self_contained(written: tuple[Report, dict[str, Path]]) -> None:
    page = written[1]["html"].read_text()
    assert page.count('src="data:image/png;base64,') == 6
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_each_file_is_written_in_parts_that_make_the_whole_text(
    written: tuple[Report, dict[str, Path]],
) -> None:
    report, paths = written
    blocks = sections(report)
    pngs = {k.removeprefix("figure:"): p.read_bytes() for k, p in paths.items() if "figure:" in k}
    texts = {
        "md": (to_markdown(blocks), list(markdown_parts(blocks))),
        "html": (to_html(blocks, pngs, report.title), list(html_parts(blocks, pngs, report.title))),
    }
    for fmt, (whole, parts) in texts.items():
        assert paths[fmt].read_bytes() == whole.encode("utf-8"), fmt
        assert "".join(parts) == whole, fmt
        # A block's text at a time (a table, a figure), never the page in one part.
        assert len(parts) > len(blocks) > 50, fmt
    assert paths["json"].read_bytes() == to_json_bytes(report)


def test_the_same_report_gives_the_same_bytes(tmp_path: Path) -> None:
    source = DatasetSource(DATASET)
    first = write_report(make(source), tmp_path / "a")
    second = write_report(make(source), tmp_path / "b")
    for key, path in first.items():
        assert path.read_bytes() == second[key].read_bytes(), key


def test_formats_are_chosen_and_checked(tmp_path: Path) -> None:
    report = make(DatasetSource(DATASET))
    written = write_report(report, tmp_path, ["json"])
    assert set(written) == {"json", "replicas"}  # replicas.csv comes with report.json
    assert not (tmp_path / "figures").exists()
    assert report_json(report)["measurements"]
    with pytest.raises(ValueError, match="pdf"):
        write_report(report, tmp_path, ["pdf"])
    assert set(FORMATS) == {"md", "html", "json"}


def test_a_spent_time_budget_stops_the_report() -> None:
    from inference_obs.report import ReportTimeout

    with pytest.raises(ReportTimeout, match="time budget of 0 s"):
        make(DatasetSource(DATASET), budget_s=0.0)


def test_a_starved_fleet_reads_starved_with_each_cause_in_the_report(tmp_path: Path) -> None:
    from inference_obs.simulate import simulate

    source = DatasetSource(simulate("gpu-boundaries", tmp_path / "d", seed=5))
    manifest = source.dataset.manifest
    report = build_report(
        source, manifest.deployments, manifest.window.window(), title=manifest.title,
        source_name="gpu-boundaries",
    )  # fmt: skip
    text = write_report(report, tmp_path / "r", ["md"])["md"].read_text()
    section = text.split("## Stage boundaries: what the GPUs wait on")[1].split("\n## ")[0]
    # The scenario injects a CPU-throttled, a PCIe-bound and a CPU-saturated replica.
    assert "| starved |" in section
    causes = {i.cause.value for d in report.deployments for i in d.of(boundaries).intervals}
    assert {"host", "transfer"} <= causes
    for cause in ("host", "transfer"):
        assert f"| {cause} |" in section


def test_in_jupyter_a_report_is_a_frame() -> None:
    # Its HTML view, repr, figures and sections: test_notebook_view.py.
    report = make(DatasetSource(DATASET))
    frame = report.to_frame()
    assert list(frame["key"]) == [m.key for m in report.measurements()]
    assert {"value", "unit", "status", "lower", "upper", "promql"} <= set(frame.columns)


def test_a_deployment_without_a_window_is_named() -> None:
    from inference_obs.errors import ConfigurationError

    source = DatasetSource(DATASET)
    manifest = source.dataset.manifest
    with pytest.raises(ConfigurationError, match="H20"):
        build_report(
            source, manifest.deployments, {"PRO": manifest.window.window()},
            title="t", source_name="s",
        )  # fmt: skip


def test_past_its_row_budget_a_deployment_is_read_in_tiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With a budget of 100 rows: PRO's one replica x 60 scrapes fits, H20's 4 x 60 does
    # not. H20 then takes at most 25 tiles per series; 25 of 144 s divide the hour, but
    # 144 s is not a whole number of 60 s scrapes, while 20 tiles of 180 s are (and 20 is
    # at least half of 25).
    monkeypatch.setattr(resolution, "ROWS", 100)
    report = make(DatasetSource(DATASET))
    steps = {d.deployment.name: d.step_seconds for d in report.deployments}
    assert steps == {"PRO": None, "H20": 180.0}
    h20 = report.deployments[1]
    assert h20.of(queueing).step_seconds == h20.of(boundaries).step_seconds == 180.0
    assert "180 s tile" in h20.of(throughput).waiting_sample_share.caveats[0]
    assert report_json(report)["deployments"][1]["step_seconds"] == 180.0
    text = to_markdown(sections(report))
    assert "PRO: every app scrape; H20: 180 s tiles" in text


@pytest.mark.parametrize("rows", [resolution.ROWS, 100], ids=["per-scrape", "tiles"])
def test_a_report_built_in_threads_is_the_one_built_in_order_byte_for_byte(
    rows: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 100 rows: H20 is read in tiles (see the test above), PRO per scrape.
    monkeypatch.setattr(resolution, "ROWS", rows)
    source = DatasetSource(DATASET)
    for run, workers in enumerate((1, 8, 8)):
        write_report(make(source, workers=workers), tmp_path / str(run))
    files = sorted(p.relative_to(tmp_path / "0") for p in (tmp_path / "0").rglob("*.*"))
    # Markdown, HTML, JSON, replicas.csv, six figures and the manifest listing them.
    assert len(files) == 11
    for name in files:
        first = (tmp_path / "0" / name).read_bytes()
        assert (tmp_path / "1" / name).read_bytes() == first, name
        assert (tmp_path / "2" / name).read_bytes() == first, name


class AsServer(DatasetSource):
    """A dataset answering as a server would say it does (engine kind ``prometheus``): a
    report then joins its questions and runs in its default threads."""

    def info(self) -> EngineInfo:
        return replace(super().info(), kind="prometheus")


@pytest.mark.parametrize("rows", [resolution.ROWS, 100], ids=["per-scrape", "tiles"])
def test_a_report_asked_as_of_a_server_has_the_numbers_asked_as_of_a_dataset(
    rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolution, "ROWS", rows)
    local = json.dumps(report_json(make(DatasetSource(DATASET))))
    served = json.dumps(report_json(make(AsServer(DATASET))))
    assert '"engine": "dataset"' not in served
    assert served.replace('"engine": "prometheus"', '"engine": "dataset"') == local


def test_every_analysis_result_serialises_to_json(written: tuple[Report, dict[str, Path]]) -> None:
    # Array fields (the queue rows, rolling and activity series) included, NaN as null.
    for d in written[0].deployments:
        for name, result in d.results.items():
            data = json.loads(result.model_dump_json())
            assert data, name
    (rows,) = json.loads(written[0].deployments[0].of(queueing).model_dump_json())["rows"]
    assert len(rows["t"]) == len(rows["waiting"]) == 60  # PRO's app scrapes over the hour


class Counting:
    """A dataset answering as a server, counting each distinct question asked of it (its own
    evaluation reads the dataset directly, uncounted)."""

    def __init__(self, path: Path) -> None:
        self.source = AsServer(path)
        self.asked: Counter[tuple[object, ...]] = Counter()
        self._counting = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)

    def _count(self, *question: object) -> None:
        with self._counting:
            self.asked[question] += 1

    def instant(self, expr: Expr, at: float) -> Instant:
        self._count("instant", expr, at)
        return self.source.instant(expr, at)

    def range(self, expr: Expr, window: Window, step: float) -> Matrix:
        self._count("range", expr, window, step)
        return self.source.range(expr, window, step)

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        self._count("raw", selector, window)
        return self.source.raw(selector, window)

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        self._count("series", selector, window)
        return self.source.series(selector, window)


def _asked_twice(source: Counting) -> dict[object, int]:
    assert len(source.asked) > 100
    return {
        to_promql(q[1]) if isinstance(q[1], Expr) else q: n
        for q, n in source.asked.items()
        if n > 1
    }


@pytest.mark.parametrize("rows", [resolution.ROWS, 100], ids=["per-scrape", "tiles"])
def test_a_report_asks_its_source_each_question_once(
    rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In the report's threads, with questions joined as for a server: answers kept for
    # the analyses that ask them again, and those only one caller asks not kept, never
    # a question asked twice.
    monkeypatch.setattr(resolution, "ROWS", rows)
    source = Counting(DATASET)
    make(source)  # type: ignore[arg-type]
    assert _asked_twice(source) == {}


def test_a_fleet_with_a_restart_asks_its_source_each_question_once(tmp_path: Path) -> None:
    # A restart has its counter totals asked again without the series that reset, by
    # every analysis reading those counters: the same joined questions, kept.
    restart = {"kind": "restart", "replica": "F-02", "at": "2m", "downtime": 30}
    scenario = fleet_scenario(8, minutes=5, halves=True, faults=(restart,))
    source = Counting(simulated(scenario, tmp_path / "fleet"))
    report = make(source)  # type: ignore[arg-type]
    assert any(e.kind.value == "restart" for e in report.timeline.events)
    assert _asked_twice(source) == {}
