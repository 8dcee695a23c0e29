"""The offline reader estimates the memory a dataset needs, and refuses past the machine's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from inference_obs.errors import DatasetError
from inference_obs.source.dataset.memory import ENV, MARGIN, available_bytes, estimate
from inference_obs.source.dataset.reader import read_dataset, read_manifest

DATASETS = sorted(
    p for p in (Path(__file__).resolve().parents[2] / "datasets").iterdir() if p.is_dir()
)
BUNDLED = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"


def _counted(path: Path) -> tuple[int, int]:
    """Sample lines and distinct series of samples.om, counted from the text itself."""
    lines = [line for line in (path / "samples.om").read_bytes().split(b"\n") if line]
    samples = [line for line in lines if not line.startswith(b"#")]
    # A sample line is "series value timestamp": the series is what precedes the last two spaces.
    return len(samples), len({line.rsplit(b" ", 2)[0] for line in samples})


@pytest.mark.parametrize("path", DATASETS, ids=lambda p: p.name)
def test_the_estimated_counts_are_within_five_percent_of_the_text(path: Path) -> None:
    manifest = read_manifest(path)
    found = estimate(
        path / "samples.om", manifest.window.window().seconds, manifest.scrape_interval_seconds
    )
    samples, series = _counted(path)
    assert found.samples == pytest.approx(samples, rel=0.05)
    assert found.series == pytest.approx(series, rel=0.05)


def test_a_dataset_past_the_memory_available_is_refused_naming_the_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, "100M")  # the bundled dataset's report peaks at about 257 MiB
    with pytest.raises(DatasetError) as caught:
        read_dataset(BUNDLED, cache=None)
    message = str(caught.value)
    assert f"inference-obs dataset load {BUNDLED} --into URL" in message
    assert (
        f"inference-obs report --prometheus URL --deployments {BUNDLED / 'manifest.json'}"
        in message
    )
    assert f"more than the 0.1 GiB {ENV} plans for" in message
    assert ENV in message


@pytest.mark.parametrize("setting", ["unlimited", "4G", "1.5 GiB", str(2**40)])
def test_the_setting_overrides_the_refusal(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv(ENV, setting)
    assert int(read_dataset(BUNDLED, cache=None).samples.offsets[-1]) == _counted(BUNDLED)[0]


def test_a_setting_that_is_not_a_size_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "lots")
    with pytest.raises(DatasetError, match=f"{ENV}='lots': expected a size"):
        read_dataset(BUNDLED, cache=None)


def test_without_a_setting_the_machine_says_what_is_available(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    room = available_bytes()
    # MemAvailable plus this process's own: at least what the process holds, and finite.
    assert room is not None
    assert room > 0


def test_a_report_stays_under_the_estimate(tmp_path: Path) -> None:
    """The estimate against the real peak (VmHWM) of an offline report in a fresh process."""
    manifest = read_manifest(BUNDLED)
    found = estimate(
        BUNDLED / "samples.om", manifest.window.window().seconds, manifest.scrape_interval_seconds
    )
    code = (
        "from inference_obs.cli import main\n"
        f"assert main(['report', '--dataset', {str(BUNDLED)!r}, '--out', {str(tmp_path / 'r')!r},"
        " '--quiet']) == 0\n"
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child forked
        # from a large test process would report its parent's size.
        "print(max(int(line.split()[1]) * 1024 for line in open('/proc/self/status')"
        " if line.startswith('VmHWM:')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    peak = int(done.stdout.split()[-1])
    assert peak < found.peak_bytes < peak * MARGIN * 1.25, (peak, found.peak_bytes)
