"""Observation datasets: exact round trips, identical rewrites, refusals naming the file."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from inference_obs.errors import ConfigurationError, DatasetError, TimeBudgetExceeded
from inference_obs.samples import STALE_NAN, Series
from inference_obs.source.dataset.manifest import Manifest
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.dataset.writer import write_dataset

MANIFEST: dict[str, Any] = {
    "title": "Two replicas of a synthetic vLLM deployment",
    "synthetic": True,
    "window": {"start": "2026-10-19T17:40:00+08:00", "end": "2026-10-19T18:40:00+08:00"},
    "scrape_interval_seconds": 15,
    "deployments": [
        {
            "name": "PRO",
            "selector": {"pod": "~pro-model-.*"},
            "hardware": {"gpu_model": "NVIDIA H20", "gpus_per_replica": 8},
            "engine": {"name": "vllm", "version": "0.8.5"},
        }
    ],
    "methodology": ["Simulated; see generator."],
    "generator": {"scenario": "steady", "seed": 7, "version": "0.1.0"},
}
START = 1_792_403_200.0  # 2026-10-19T17:40:00+08:00


def _manifest() -> Manifest:
    return Manifest.model_validate(MANIFEST)


def _series() -> list[Series]:
    times = START + 15.0 * np.arange(5)
    return [
        Series("vllm:num_requests_running", {"pod": "pro-model-1"}, times, [0, 1, 2, 1, 0]),
        Series(
            "vllm:e2e_request_latency_seconds_bucket",
            {"pod": "pro-model-0", "le": "+Inf", "note": 'q"uo\\te\nnl é😀'},
            times + 0.001,
            [1.0, np.nan, np.inf, -np.inf, -0.0],
        ),
        Series("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0"}, [START - 0.123], [97.5]),
    ]


def _requests() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "request_id": [1, 2, 3],
            "pod": ["pro-model-0", "pro-model-1", 'pro-model-0, "quoted"\nline'],
            "arrival_s": [START + 0.1, START + 1 / 3, START + 2.0],
            "ttft_s": [0.25, np.nan, 1e-9],
            "cached": [True, False, True],
        }
    )


AGGREGATES = {"ttft_seconds": {"p50": 0.25, "p99": 1.5}, "requests": 3, "notes": ["a", None]}


def _write(path: Path, **extra: Any) -> Dataset:
    return write_dataset(path, _manifest(), _series(), **extra)


def _sorted(series: list[Series]) -> list[Series]:
    return sorted(series, key=lambda s: (s.name, tuple(s.labels.items())))


def test_round_trip_is_exact(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds", aggregates=AGGREGATES, requests=_requests())
    back = read_dataset(tmp_path / "ds")
    assert back.manifest == written.manifest
    assert back.manifest.model_copy(update={"files": {}}) == _manifest()
    assert sorted(back.manifest.files) == ["aggregates.json", "requests.csv", "samples.om"]
    for dataset in (written, back):
        assert len(dataset.samples) == 3
        for got, want in zip(dataset.samples, _sorted(_series()), strict=True):
            assert (got.name, got.labels) == (want.name, want.labels)
            assert np.array_equal(got.t_ms, want.t_ms)
            assert np.array_equal(got.values, want.values, equal_nan=True)
            assert np.signbit(got.values).tolist() == np.signbit(want.values).tolist()
        assert dataset.aggregates == AGGREGATES
        assert dataset.requests is not None
        pd.testing.assert_frame_equal(dataset.requests, _requests(), check_exact=True)


def test_without_extras(tmp_path: Path) -> None:
    back = read_dataset(_write(tmp_path / "ds").path)
    assert back.aggregates is None
    assert back.requests is None
    assert sorted(p.name for p in back.path.iterdir()) == ["manifest.json", "samples.om"]


def test_writing_twice_gives_identical_bytes(tmp_path: Path) -> None:
    _write(tmp_path / "a", aggregates=AGGREGATES, requests=_requests())
    # Same series in another order: the writer orders them itself.
    write_dataset(
        tmp_path / "b",
        _manifest(),
        reversed(_series()),
        aggregates=dict(reversed(AGGREGATES.items())),
        requests=_requests(),
    )
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    manifest = (tmp_path / "a" / "manifest.json").read_text(encoding="utf-8")
    assert manifest.endswith("}\n")
    assert (
        json.loads(manifest)["files"]["samples.om"]
        == hashlib.sha256((tmp_path / "a" / "samples.om").read_bytes()).hexdigest()
    )


def test_samples_file_is_plain_openmetrics(tmp_path: Path) -> None:
    _write(tmp_path / "ds")
    lines = (tmp_path / "ds" / "samples.om").read_text(encoding="utf-8").splitlines()
    assert lines[0] == 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 97.5 1792403199.8775'
    assert lines[-1] == "# EOF"
    assert not any(line.startswith("# TYPE") for line in lines)


def test_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "x").write_text("", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"ds: not an empty directory"):
        _write(tmp_path / "ds")
    (tmp_path / "empty").mkdir()
    _write(tmp_path / "empty")  # an empty one is fine


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"aggregates": {"x": float("nan")}}, r"aggregates\['x'\]: nan has no JSON form"),
        ({"aggregates": {1: 2}}, "key 1 is not a string"),
        ({"aggregates": {"x": [{1.5}]}}, r"aggregates\['x'\]\[0\]: set is not JSON data"),
        ({"aggregates": [1]}, "aggregates must be a mapping"),
        ({"requests": pd.DataFrame({"a": [1]}, index=[5])}, "reset_index"),
        ({"requests": pd.DataFrame({"a": ["007"]})}, "would not read them back unchanged"),
        ({"requests": pd.DataFrame({"a": [1]}, dtype="int32")}, "would not read them back"),
    ],
)
def test_refuses_extras_that_would_not_read_back(
    tmp_path: Path, extra: dict[str, Any], problem: str
) -> None:
    with pytest.raises(DatasetError, match=problem):
        _write(tmp_path / "ds", **extra)
    assert not (tmp_path / "ds").exists() or not any((tmp_path / "ds").iterdir())


def test_refuses_staleness_markers(tmp_path: Path) -> None:
    stale = Series("up", {"job": "x"}, [1.0, 2.0], [1.0, STALE_NAN])
    with pytest.raises(DatasetError, match=r"up\{job='x'\} holds staleness markers"):
        write_dataset(tmp_path / "ds", _manifest(), [stale])


def test_refuses_a_repeated_series(tmp_path: Path) -> None:
    one = Series("up", {"job": "x"}, [1.0], [1.0])
    with pytest.raises(DatasetError, match="given twice"):
        write_dataset(tmp_path / "ds", _manifest(), [one, one])


# --- reading damaged datasets -------------------------------------------------


def _edit_manifest(path: Path, **changes: Any) -> None:
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(changes)
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def _replace_samples(path: Path, text: str) -> None:
    """New samples.om, with its checksum updated so only the text is at fault."""
    data = text.encode("utf-8")
    (path / "samples.om").write_bytes(data)
    files = json.loads((path / "manifest.json").read_text(encoding="utf-8"))["files"]
    _edit_manifest(path, files={**files, "samples.om": hashlib.sha256(data).hexdigest()})


def test_unknown_manifest_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds").path
    _edit_manifest(path, colour="blue")
    with pytest.raises(DatasetError, match=r"ds/manifest\.json: colour: unknown field$"):
        read_dataset(path)


def test_naive_datetime_in_manifest(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds").path
    _edit_manifest(path, window={"start": "2026-10-19T17:40:00", "end": "2026-10-19T18:40:00Z"})
    with pytest.raises(DatasetError, match=r"manifest\.json: window\.start: .*timezone") as info:
        read_dataset(path)
    assert "Traceback" not in str(info.value)
    assert info.value.__cause__ is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", r"manifest\.json:1: not JSON"),
        ("[]", r"manifest\.json: must hold a JSON object, not list"),
        ('{"title": "a", "title": "b"}', r"manifest\.json: key 'title' appears twice"),
        ('{"scrape_interval_seconds": NaN}', r"manifest\.json: NaN is not JSON"),
    ],
)
def test_manifest_that_is_not_strict_json(tmp_path: Path, text: str, problem: str) -> None:
    path = _write(tmp_path / "ds").path
    (path / "manifest.json").write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=problem):
        read_dataset(path)


LATER, EARLIER = "2026-10-19T18:40:00+08:00", "2026-10-19T17:40:00+08:00"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"window": {"start": LATER, "end": EARLIER}}, f"end {EARLIER} is not after start {LATER}"),
        (
            {"deployments": [MANIFEST["deployments"][0]] * 2},
            "deployment names repeat: ['PRO', 'PRO']; give each its own",
        ),
        ({"generator": None}, "synthetic is true, generator is missing"),
    ],
)
def test_an_inconsistent_manifest_names_what_disagrees(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Manifest.model_validate({**MANIFEST, **change})
    (error,) = caught.value.errors()
    assert isinstance(error["ctx"]["error"], ConfigurationError)
    assert message in str(error["ctx"]["error"])
    # Read from a file, the same words name the manifest.
    path = _write(tmp_path / "ds").path
    _edit_manifest(path, **change)
    with pytest.raises(DatasetError, match=r"manifest\.json: .*" + re.escape(message)):
        read_dataset(path)


def test_manifest_field_paths_name_nested_problems(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds").path
    deployments = [{**MANIFEST["deployments"][0], "hardware": {"gpu_model": "H20"}}]
    _edit_manifest(path, deployments=deployments, scrape_interval_seconds=0)
    with pytest.raises(DatasetError) as info:
        read_dataset(path)
    message = str(info.value)
    assert "scrape_interval_seconds: Input should be greater than 0" in message
    assert "deployments[0].hardware.gpus_per_replica: Field required" in message


def test_checksum_mismatch(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds", aggregates=AGGREGATES).path
    (path / "aggregates.json").write_text('{"requests": 4}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"ds/aggregates\.json: SHA-256 is [0-9a-f]{64} but"):
        read_dataset(path)


def test_unlisted_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds").path
    (path / "extra.csv").write_text("a\n1\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"ds/extra\.csv: not listed in manifest\.json files"):
        read_dataset(path)


def test_hidden_entries_are_ignored_and_listed(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds").path
    (path / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (path / ".ipynb_checkpoints").mkdir()
    (path / ".ipynb_checkpoints" / "notes-checkpoint.ipynb").write_text("{}")
    read = read_dataset(path)
    assert read.ignored == (".DS_Store", ".ipynb_checkpoints")
    assert len(read.samples) == 3
    (path / "extra.csv").write_text("a\n1\n", encoding="utf-8")  # unhidden: still an error
    with pytest.raises(DatasetError, match=r"extra\.csv: not listed .*hidden files"):
        read_dataset(path)


def test_a_deadline_stops_reading_the_samples(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds").path
    with pytest.raises(TimeBudgetExceeded, match=r"ds/samples\.om: the time budget ran out"):
        read_dataset(path, deadline=time.monotonic() - 1, cache=None)
    assert read_dataset(path, deadline=time.monotonic() + 60).ignored == ()


def test_listed_file_missing_or_unknown(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds", requests=_requests()).path
    (path / "requests.csv").unlink()
    with pytest.raises(
        DatasetError, match=r"ds/requests\.csv: listed in manifest\.json but missing"
    ):
        read_dataset(path)
    _edit_manifest(path, files={"samples.om": "0" * 64, "notes.txt": "0" * 64})
    with pytest.raises(DatasetError, match=r"manifest\.json: files lists 'notes\.txt'"):
        read_dataset(path)


def test_missing_manifest(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds").path
    (path / "manifest.json").unlink()
    with pytest.raises(DatasetError, match=r"ds/manifest\.json: missing"):
        read_dataset(path)
    with pytest.raises(DatasetError, match="no dataset directory"):
        read_dataset(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ('up{job="a"} 1 1\nup{job="a"} 2 2\n', 2, "ends without a '# EOF' line"),
        ('up{job="a"} 1 1\nup{job="a\\x"} 2 2\n# EOF\n', 2, r"bad escape \\x"),
        ('up{job="a"} 1 2\nup{job="a"} 2 1\n# EOF\n', 2, "not after the previous sample's"),
        ('up{job="a"} 1 1\nup{job="a"} 2\n# EOF\n', 2, "no timestamp"),
        ('up{job="a"} 1 1\nup{job="a"} 2.5.1 2\n# EOF\n', 2, r"bad value '2\.5\.1'"),
        ("a 1 1\nb 1 1\na 2 2\n# EOF\n", 3, "lines of metric family a resume"),
    ],
)
def test_malformed_samples_name_file_and_line(
    tmp_path: Path, text: str, line: int, problem: str
) -> None:
    path = _write(tmp_path / "ds").path
    _replace_samples(path, text)
    with pytest.raises(DatasetError, match=rf"ds/samples\.om:{line}: .*{problem}"):
        read_dataset(path)


def test_malformed_extras_name_their_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds", aggregates=AGGREGATES).path
    data = b"[1, 2]\n"
    (path / "aggregates.json").write_bytes(data)
    files = json.loads((path / "manifest.json").read_text(encoding="utf-8"))["files"]
    _edit_manifest(path, files={**files, "aggregates.json": hashlib.sha256(data).hexdigest()})
    with pytest.raises(DatasetError, match=r"ds/aggregates\.json: must hold a JSON object"):
        read_dataset(path)
