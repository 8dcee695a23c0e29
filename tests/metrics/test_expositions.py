"""The engine catalogues against exposition text the engines wrote.

vLLM: the samples its documentation publishes (tests/fixtures/exposition).
SGLang: verbatim excerpts of real ``/metrics`` output (tests/fixtures/real,
origins in the README there). Every series must be a catalogue family, with the
declared type and only labels the catalogue says the exporter sets.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inference_obs.metrics import sglang, vllm
from inference_obs.metrics.family import Family, MetricType

FIXTURES = Path(__file__).parents[1] / "fixtures"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
# (exporter, fixture files, the catalogue's families of that exporter)
EXPOSITIONS: dict[str, tuple[tuple[Path, ...], tuple[Family, ...]]] = {
    "vllm": (tuple(sorted((FIXTURES / "exposition").glob("vllm_*.prom"))), vllm.FAMILIES),
    "sglang": (tuple(sorted((FIXTURES / "real").glob("sglang_*.prom"))), sglang.FAMILIES),
}


def _fixture_lines(exporter: str) -> list[str]:
    files, _ = EXPOSITIONS[exporter]
    assert files, f"no {exporter} fixture"
    return [line for f in files for line in f.read_text().splitlines()]


def _series(exporter: str) -> list[tuple[str, str]]:
    """(series name, raw label block) of every sample line."""
    out = []
    for line in _fixture_lines(exporter):
        if line.startswith("#") or not line.strip():
            continue
        match = SAMPLE.match(line)
        assert match, line
        out.append((match.group(1), match.group(2) or ""))
    return out


def _types(exporter: str) -> dict[str, str]:
    return {
        parts[2]: parts[3]
        for parts in (line.split() for line in _fixture_lines(exporter))
        if len(parts) == 4 and parts[:2] == ["#", "TYPE"]
    }


def _family_of_series(name: str, exporter: str) -> Family | None:
    by_name = {n: f for f in EXPOSITIONS[exporter][1] for n in f.names}
    if name in by_name:
        return by_name[name]
    for suffix in ("_bucket", "_sum", "_count", "_created"):
        base = name.removesuffix(suffix)
        if base != name and base in by_name and by_name[base].type is MetricType.HISTOGRAM:
            return by_name[base]
    if name.endswith("_created") and f"{name.removesuffix('_created')}_total" in by_name:
        return by_name[f"{name.removesuffix('_created')}_total"]
    return None


@pytest.mark.parametrize(("exporter", "at_least"), [("vllm", 20), ("sglang", 15)])
def test_every_fixture_series_is_a_catalogue_family(exporter: str, at_least: int) -> None:
    series = _series(exporter)
    assert len(series) >= at_least
    assert {name for name, _ in series if _family_of_series(name, exporter) is None} == set()


@pytest.mark.parametrize(
    ("exporter", "declared"),
    [
        ("vllm", {"vllm:iteration_tokens_total": "histogram"}),
        ("sglang", {"sglang:num_paused_reqs": "gauge", "sglang:token_usage": "gauge"}),
    ],
)
def test_fixture_types_match_the_catalogue(exporter: str, declared: dict[str, str]) -> None:
    types = _types(exporter)
    assert declared.items() <= types.items()
    for name, written in types.items():
        family = _family_of_series(name, exporter)
        assert family is not None, name
        assert written == (family.declared_type or family.type.value), name


@pytest.mark.parametrize("exporter", ["vllm", "sglang"])
def test_fixture_labels_are_exporter_labels(exporter: str) -> None:
    for name, labels in _series(exporter):
        family = _family_of_series(name, exporter)
        assert family is not None
        for label in re.findall(r'(\w+)="', labels):
            assert label == "le" or label in family.labels, (name, label)


@pytest.mark.parametrize(
    ("series", "family"),
    [
        ("vllm:time_to_first_token_seconds_bucket", vllm.TIME_TO_FIRST_TOKEN),
        ("vllm:iteration_tokens_total_bucket", vllm.ITERATION_TOKENS),
    ],
)
def test_fixture_le_values_are_default_bounds(series: str, family: Family) -> None:
    le = [
        float(m.group(1))
        for name, labels in _series("vllm")
        if name == series
        for m in [re.search(r'le="([^"]+)"', labels)]
        if m
    ]
    assert le
    assert family.buckets is not None
    assert tuple(le) == family.buckets[: len(le)]


def test_sglang_gauges_without_a_multiprocess_mode_carry_pid() -> None:
    # A DP-attention server (vllm-project/aibrix#1614): one scheduler process per
    # DP rank, each gauge series with its process id.
    gauges = [
        labels
        for name, labels in _series("sglang")
        if name in ("sglang:num_retracted_reqs", "sglang:num_paused_reqs")
    ]
    assert len(gauges) == 9
    assert all(re.search(r'pid="\d+"', labels) for labels in gauges)
    assert "pid" in sglang.NUM_RETRACTED_REQS.labels
    assert "pid" in sglang.NUM_PAUSED_REQS.labels
    assert "pid" not in sglang.NUM_RUNNING_REQS.labels
