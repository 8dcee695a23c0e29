"""Times on the command line: ``now``, ``now-1h``, unix seconds, ISO 8601; one ``now`` a run."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_NO_DATA, EXIT_USAGE, main
from inference_obs.cli.times import moment, started, window
from inference_obs.errors import InferenceObsError

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "datasets" / "r1-decode"
NOW = datetime(2026, 9, 1, 11, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("now-1h", NOW - timedelta(hours=1)),
        ("now-1h30m", NOW - timedelta(minutes=90)),
        ("now-7d", NOW - timedelta(days=7)),
        ("1788260400", NOW),
        ("1788260400.5", NOW + timedelta(seconds=0.5)),
        ("2026-09-01T11:00:00Z", NOW),
        ("2026-09-01T19:00:00+08:00", NOW),
    ],
)
def test_every_documented_form_is_read(text: str, expected: datetime) -> None:
    assert moment(text, "--end", NOW) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("now+1h", "after now holds no samples"),
        ("now-soon", "now-DURATION"),
        ("yesterday", "not a time"),
        ("2026-09-01T11:00:00", "has no timezone"),
        ("99999999999999999999", "outside the years"),
    ],
)
def test_a_bad_time_is_refused_naming_the_option(text: str, message: str) -> None:
    with pytest.raises(InferenceObsError, match=message) as caught:
        moment(text, "--end", NOW)
    assert str(caught.value).startswith("--end")


def test_now_is_one_moment_in_whole_seconds() -> None:
    now = started()
    assert now.microsecond == 0
    assert now.tzinfo is not None
    args = argparse.Namespace(start="now-2h", end="now", window=None)
    span = window(args, NOW)
    assert span is not None
    assert span.seconds == 7200.0
    assert span.end == NOW


def test_end_now_with_a_window_is_accepted_by_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The dataset was observed in 2026; the last hour before today holds none of it,
    # so the report is written and says so (3), naming the selector that found nothing.
    out = tmp_path / "out"
    argv = ["report", "--dataset", str(DATASET), "--end", "now", "--window", "1h"]
    code = main([*argv, "--out", str(out), "--format", "json", "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_NO_DATA, err
    data = json.loads((out / "report.json").read_text())
    end = datetime.fromisoformat(data["scope"]["windows"]["R1"]["end"])
    assert abs((datetime.now(UTC) - end).total_seconds()) < 120
    assert 'R1: selector {namespace="llm",pod=~"r1-.*"} matches no vllm series' in err


def test_the_window_options_say_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["report", "--dataset", str(DATASET), "--window", "1h"])
    assert code == EXIT_USAGE
    assert "need --end (e.g. --end now)" in capsys.readouterr().err


def test_compare_names_the_selectors_that_found_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dataset = ROOT / "datasets" / "pro5000-vs-h20"
    assert main(["compare", "--dataset", str(dataset), "--end", "now", "--window", "1h"]) == 0
    err = capsys.readouterr().err
    assert 'H20: selector {namespace="llm",pod=~"h20-model-.*"} matches no DCGM series' in err
    assert err.count("matches no") == 4  # engine and GPU series, for both deployments
