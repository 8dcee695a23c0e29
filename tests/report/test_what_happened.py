"""What happened: the bundled PRO stall in report.json's time line, the section and the Summary.

The stall is the scenario's injected fault (43m44.4s to 44m40s into the
window: 18:23:44 to 18:24:40 +08:00); the requests it held come from the
ground truth ``requests.csv``: 11 running and 4 waiting at the one scrape
inside it (18:24:25.667), and first tokens up to 56.6 s late after it.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from inference_obs.analyses.timeline import Event, EventKind, Severity, Timeline
from inference_obs.report.build import build_report
from inference_obs.report.document import Heading, Paragraph, Table
from inference_obs.report.model import Report
from inference_obs.report.report_json_model import ReportDocument
from inference_obs.report.sections.timeline import ROWS, what_happened
from inference_obs.report.write import write_report
from inference_obs.source.dataset.source import DatasetSource

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "pro5000-vs-h20"
ZONE = timezone(timedelta(hours=8))
#: pro5000-vs-h20.yaml: the stall of PRO-01 (pod pro-model-01, namespace llm).
STALL = (
    datetime(2026, 10, 19, 18, 23, 44, 400_000, tzinfo=ZONE),
    datetime(2026, 10, 19, 18, 24, 40, tzinfo=ZONE),
)
SCRAPE = timedelta(seconds=60)


@pytest.fixture(scope="module")
def report() -> Report:
    source = DatasetSource(DATASET)
    manifest = source.dataset.manifest
    return build_report(
        source,
        manifest.deployments,
        manifest.window.window(),
        title=manifest.title,
        source_name="datasets/pro5000-vs-h20",
        methodology=manifest.methodology,
    )


@pytest.fixture(scope="module")
def written(report: Report, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("what-happened")
    write_report(report, out, ("md", "json"))
    return out


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_report_json_has_the_stall_on_its_replica_within_a_scrape_of_its_times(
    written: Path,
) -> None:
    data = json.loads((written / "report.json").read_text())
    document = ReportDocument.model_validate(data)
    stalls = [e for e in document.timeline if e.kind == "stall"]
    assert len(stalls) == 1
    (stall,) = stalls
    assert stall.rank == 1
    assert stall.severity == "critical"
    assert (stall.deployment, stall.replicas) == ("PRO", ["llm/pro-model-01"])
    start, end = datetime.fromisoformat(stall.start), datetime.fromisoformat(stall.end)
    assert abs(start - STALL[0]) <= SCRAPE
    assert abs(end - STALL[1]) <= SCRAPE
    truth = pd.read_csv(DATASET / "requests.csv")
    pro = truth[truth["deployment"] == "PRO"]
    at = start.timestamp() - datetime(2026, 10, 19, 17, 40, tzinfo=ZONE).timestamp()
    running = int(((pro["scheduled"] < at) & (pro["finish"] > at)).sum())
    waiting = int(((pro["arrival"] < at) & (pro["scheduled"] > at)).sum())
    assert f"{running} requests running and {waiting} waiting" in stall.text
    assert (running, waiting) == (11, 4)
    keys = {m.key for m in document.measurements}
    assert stall.keys
    assert set(stall.keys) <= keys


def test_what_happened_follows_the_summary_with_the_stall_first(written: Path) -> None:
    text = (written / "report.md").read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings[headings.index("Summary") + 1] == "What happened"
    section = _section(text, "What happened")
    rows = [line for line in section.splitlines() if line.startswith("| 2026")]
    assert 1 <= len(rows) <= ROWS
    time, deployment, replicas, kind, what = rows[0].strip("| ").split(" | ")
    assert (deployment, replicas, kind) == ("PRO", "llm/pro-model-01", "stall")
    assert time == "2026-10-19 18:24:26+08:00"  # the scrape at 18:24:25.667, to the second
    assert "11 requests running and 4 waiting while the GPUs read 0%" in what
    assert "time to first token" in what


def test_the_summary_names_the_stall_with_its_time_replica_and_evidence(written: Path) -> None:
    data = json.loads((written / "report.json").read_text())
    stall, burst = [e for e in data["summary"] if e["kind"] == "incident"]
    entry = stall
    assert entry["section"] == "What happened"
    assert entry["deployments"] == ["PRO"]
    text = entry["text"]
    assert text.startswith("A stall of PRO on llm/pro-model-01 at 2026-10-19 18:24:26+08:00")
    assert "11 requests running and 4 waiting while the GPUs read 0%" in text
    # The first tokens after the stall were up to 56.6 s late (requests.csv), in TTFT
    # bucket (40, 80]; the rolling P95 is interpolated in that bucket.
    spike = re.search(r"first token \(5-minute windows\) rose to between (\d+) and (\d+) s", text)
    assert spike is not None
    assert int(spike.group(1)) < 56.6 <= int(spike.group(2))
    summary = _section((written / "report.md").read_text(), "Summary")
    assert "A stall of PRO on llm/pro-model-01 at 2026-10-19 18:24:26+08:00" in summary
    # The burst of 17:53-17:56 held requests too: the TTFT P95 after it reached 20-40 s
    # (requests.csv: the true P95 of the first tokens of 17:54-17:59 is 35.6 s).
    assert burst["text"].startswith("A queue burst of PRO on llm/pro-model-01 from ")
    assert "rose to between 20 and 40 s at 17:59:00" in burst["text"]


def _event(k: int) -> Event:
    at = datetime(2026, 1, 1, 12, k, tzinfo=UTC)
    return Event(
        deployment="D",
        replicas=tuple(f"r-{n}" for n in range(k + 1)),
        start=at,
        end=at + timedelta(seconds=30),
        kind=EventKind.QUEUE_BURST,
        severity=Severity.MINOR,
        pieces=(EventKind.QUEUE_BURST,),
        text=f"event {k}",
        keys=(),
    )


def test_the_table_stops_at_five_rows_and_says_how_many_more_are_in_report_json(
    report: Report,
) -> None:
    many = report.model_copy(update={"timeline": Timeline(events=tuple(map(_event, range(13))))})
    blocks = list(what_happened(many))
    (table,) = [b for b in blocks if isinstance(b, Table)]
    assert len(table.rows) == ROWS == 5
    assert table.rows[0][0] == "2026-01-01 12:00:00+00:00 to 12:00:30"
    assert table.rows[4][2] == "r-0, r-1, r-2, r-3, r-4"
    assert blocks[-1] == Paragraph("And 8 more events in report.json (`timeline`).")
    # Past five replicas an event names five and counts the rest.
    six = report.model_copy(update={"timeline": Timeline(events=(_event(5),))})
    (table,) = [b for b in what_happened(six) if isinstance(b, Table)]
    assert table.rows[0][2] == "r-0, r-1, r-2, r-3, r-4 and 1 more"
    quiet = report.model_copy(update={"timeline": Timeline(events=())})
    assert [type(b) for b in what_happened(quiet)] == [Heading, Paragraph]
