"""``obs.report``: the four lines of a first report, defaults from the dataset, bad inputs named.

The live path against a real Prometheus is in tests/integration/test_obs_report_live.py.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import inference_obs as obs
from inference_obs.cli import main
from inference_obs.report import build_report, from_source, report_json, resolve_inputs
from inference_obs.report.figures import draw_figures
from inference_obs.source.dataset import read_manifest
from tests.source.test_prometheus_fakes import FakeServer, fake_server

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "pro5000-vs-h20"
MANIFEST = read_manifest(DATASET)
#: The observed hour, 17:40 to 18:40 at +08:00.
OBSERVED = MANIFEST.window.window()


@pytest.fixture(scope="module")
def dataset() -> obs.DatasetSource:
    return obs.DatasetSource(DATASET)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    yield from fake_server()


def test_the_four_lines_give_a_whole_report_from_the_dataset_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    report = obs.report(obs.DatasetSource("datasets/pro5000-vs-h20"))
    # The deployments, the window, the title and the notes are the dataset's.
    assert [d.deployment for d in report.deployments] == list(MANIFEST.deployments)
    assert report.scope.windows == {"PRO": OBSERVED, "H20": OBSERVED}
    assert report.title == MANIFEST.title
    assert report.methodology == tuple(MANIFEST.methodology)
    assert report.scope.scrape_interval_seconds == MANIFEST.scrape_interval_seconds
    assert report.scope.source == "datasets/pro5000-vs-h20"
    assert report.scope.engine == "dataset"
    assert len(draw_figures(report)) == 6  # three per deployment: no ITL buckets, no profiling
    html = report._repr_html_()
    assert "<img" not in html  # each figure is drawn when asked
    assert sum(f"report.figure({name!r})" in html for name in draw_figures(report)) == 6


def test_the_cli_report_is_the_library_report(tmp_path: Path, dataset: obs.DatasetSource) -> None:
    code = main(["report", "--dataset", str(DATASET), "--format", "json", "--out", str(tmp_path)])
    assert code == 0
    written = json.loads((tmp_path / "report.json").read_text())
    library = report_json(obs.report(dataset))
    assert written == json.loads(json.dumps(library))


def test_a_duration_reads_the_end_of_the_observed_window(dataset: obs.DatasetSource) -> None:
    last = resolve_inputs(window="30m", dataset=MANIFEST)
    assert last.window == obs.Window(OBSERVED.end - timedelta(minutes=30), OBSERVED.end)
    assert last.deployments == MANIFEST.deployments
    # With end=, the duration ends there (its timezone kept for display).
    end = datetime(2026, 10, 19, 10, 10, tzinfo=UTC)
    early = resolve_inputs(window="20m", end=end, dataset=MANIFEST)
    assert (early.window.start.isoformat(), early.window.end) == ("2026-10-19T09:50:00+00:00", end)
    report = obs.report(dataset, ["H20"], window="30m")
    assert [d.deployment.name for d in report.deployments] == ["H20"]
    assert report.scope.windows["H20"].seconds == 1800.0


def test_a_live_window_ends_now_by_default() -> None:
    deployments = list(MANIFEST.deployments)
    before = datetime.now(UTC).replace(microsecond=0)
    found = resolve_inputs(deployments, window="1h")
    after = datetime.now(UTC)
    assert before <= found.window.end <= after
    assert found.window.end.microsecond == 0
    assert found.window.seconds == 3600.0
    assert found.deployments == MANIFEST.deployments
    assert found.title == from_source.DEFAULT_TITLE


def test_a_deployments_file_or_list_replaces_the_dataset_s(
    dataset: obs.DatasetSource, tmp_path: Path
) -> None:
    path = tmp_path / "one.yaml"
    pro = MANIFEST.deployments[0].model_dump(mode="json", exclude_none=True)
    path.write_text(json.dumps({"deployments": [pro]}), encoding="utf-8")
    assert resolve_inputs(path, dataset=MANIFEST).deployments == MANIFEST.deployments[:1]
    assert resolve_inputs(str(path), dataset=MANIFEST).deployments == MANIFEST.deployments[:1]
    loaded = obs.load_deployments(DATASET / "manifest.json")
    assert resolve_inputs(loaded[::-1], window=OBSERVED).deployments == loaded[::-1]


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"deployments": ["NOPE"]}, ["deployments[0]", "'NOPE'", "PRO, H20"]),
        ({"deployments": ["PRO", "PRO"]}, ["deployments", "repeat: PRO"]),
        ({"deployments": []}, ["deployments: empty"]),
        ({"deployments": ""}, ["deployments: empty"]),
        ({"deployments": [1]}, ["deployments[0]", "int"]),
        ({"deployments": MANIFEST.deployments[0]}, ["deployments", "not Deployment"]),
        ({"window": "1x"}, ["window length '1x'", "not a duration"]),
        ({"window": ""}, ["window length ''"]),
        ({"window": 3600}, ["window", "not int"]),
        ({"window": "1h", "end": datetime(2026, 10, 19, 18, 40)}, ["window end", "no timezone"]),
        ({"window": "1h", "end": "now"}, ["window end 'now'", "not a datetime"]),
        ({"window": "3000y", "end": OBSERVED.end}, ["window length '3000y'", "year 1"]),
        ({"end": OBSERVED.end}, ["end", "no duration was given"]),
        ({"window": OBSERVED, "end": OBSERVED.end}, ["end", "a Window has its own end"]),
        ({"resolution": 7.0}, ["resolution 7", "7 s does not cut the 3600 s window"]),
        ({"resolution": "fine"}, ["resolution 'fine'", "'auto', 'scrape'"]),
    ],
)
def test_a_bad_input_is_named_before_any_work(
    dataset: obs.DatasetSource, given: dict[str, object], named: list[str]
) -> None:
    with pytest.raises(obs.ConfigurationError) as caught:
        obs.report(dataset, **given)  # type: ignore[arg-type]
    for text in named:
        assert text in str(caught.value), (text, str(caught.value))


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"gpu_hour_prices": {"NOPE": 2.0}}, ["gpu_hour_prices", "'NOPE'", "PRO, H20"]),
        ({"topologies": {"NOPE": "GPU0\tX"}}, ["topologies", "'NOPE'"]),
        *(
            ({"gpu_hour_prices": {"H20": bad}}, ["gpu_hour_prices: H20: hardware.gpu_hour_price"])
            for bad in (0.0, -1.0, float("nan"), 1e30)
        ),
        ({"topologies": {"PRO": "oops"}}, ["topologies: PRO: topology: line 1: no header"]),
    ],
)
def test_a_price_or_topology_is_set_on_a_deployment_that_exists_and_holds_it(
    given: dict[str, object], named: list[str]
) -> None:
    with pytest.raises(obs.ConfigurationError) as caught:
        resolve_inputs(dataset=MANIFEST, **given)  # type: ignore[arg-type]
    for text in named:
        assert text in str(caught.value), (text, str(caught.value))


def test_prices_and_topologies_given_by_name_are_the_deployments_own() -> None:
    pairs = "  GPU0 GPU1\nGPU0 X NV4\nGPU1 NV4 X\n"  # two GPUs joined by 4 NVLinks
    resolved = resolve_inputs(
        dataset=MANIFEST, gpu_hour_prices={"H20": 1.5}, topologies={"PRO": pairs}
    ).deployments
    pro, h20 = resolved
    assert (pro.hardware.gpu_hour_price, h20.hardware.gpu_hour_price) == (None, 1.5)
    assert pro.topology is not None
    assert pro.topology.gpus == ("GPU0", "GPU1")
    assert h20.topology is None
    # Nothing else of the dataset's deployments changed.
    assert pro.model_dump() == MANIFEST.deployments[0].model_dump()
    assert h20.config == MANIFEST.deployments[1].config


def test_a_missing_deployments_file_is_named(dataset: obs.DatasetSource, tmp_path: Path) -> None:
    with pytest.raises(obs.DatasetError, match="no deployments file there") as caught:
        obs.report(dataset, tmp_path / "deployments.yaml")
    assert str(tmp_path / "deployments.yaml") in str(caught.value)


@pytest.mark.parametrize(
    ("deployments", "window", "named"),
    [
        (None, "1h", ["a live source needs deployments", "inference-obs discover"]),
        ([MANIFEST.deployments[0]], None, ["a live source needs window", "'1h'"]),
        (["PRO"], "1h", ["deployments[0]", "'PRO' is a name", "only a dataset"]),
    ],
)
def test_a_live_source_needs_deployments_and_a_window_and_is_not_asked(
    server: FakeServer, deployments: list[object] | None, window: str | None, named: list[str]
) -> None:
    source = obs.PrometheusSource(server.url)
    with pytest.raises(obs.ConfigurationError) as caught:
        obs.report(source, deployments, window=window)  # type: ignore[arg-type]
    for text in named:
        assert text in str(caught.value), (text, str(caught.value))
    assert server.requests == []


def test_obs_report_is_the_function_after_every_report_module_is_imported() -> None:
    package = importlib.import_module("inference_obs.report")
    for module in pkgutil.iter_modules(package.__path__, "inference_obs.report."):
        importlib.import_module(module.name)
    assert obs.report is from_source.report
    assert vars(obs)["report"] is from_source.report
    # The subpackage is still reached by its name, as a module.
    assert sys.modules["inference_obs.report"].build_report is build_report


def test_obs_report_is_the_function_whatever_was_imported_first() -> None:
    # A fresh interpreter that loads report modules first, the way a notebook might.
    code = (
        "import inference_obs.report.html, inference_obs.report.summary\n"
        "from inference_obs.report import build_report\n"
        "import inference_obs as obs\n"
        "import inference_obs.report.write\n"
        "from inference_obs.report.from_source import report\n"
        "assert obs.report is report, obs.report\n"
        "print('function')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "function\n"
