"""Real exposition text (tests/fixtures/real) read by the dataset reader as Prometheus reads it.

A dataset's ``samples.om`` may come from elsewhere than our writer (a script
that stamped real scrapes): the reader must take the real text's empty label
values and ``untyped`` as Prometheus does, instead of refusing the whole file.
"""

from __future__ import annotations

from pathlib import Path

from inference_obs.source.openmetrics.reader import read_openmetrics

REAL = Path(__file__).parents[1] / "fixtures" / "real"


def _stamped(name: str, seconds: int = 1_777_000_000) -> bytes:
    """The fixture's lines, each sample stamped (OpenMetrics needs a timestamp), then # EOF."""
    lines = []
    for line in (REAL / name).read_text().splitlines():
        if line.startswith("# HELP") or not line:
            continue
        lines.append(line if line.startswith("#") else f"{line} {seconds}")
    return ("\n".join(lines) + "\n# EOF\n").encode()


def test_dcgm_2x_empty_pod_labels_load() -> None:
    samples = read_openmetrics(_stamped("dcgm_2x_empty_pod_labels.prom"), source="2x")
    assert len(samples) == 5
    assert all(not {"pod", "namespace", "container"} & set(labels) for labels in samples.labels)


def test_dcgm_4x_pod_uid_empty_loads() -> None:
    samples = read_openmetrics(_stamped("dcgm_4x_pod_uid_empty.prom"), source="4x")
    assert len(samples) == 9
    pods = [labels for labels in samples.labels if "pod" in labels]
    assert len(pods) == 3
    assert all("pod_uid" not in labels for labels in samples.labels)


def test_dcgm_1x_old_namespace_loads() -> None:
    samples = read_openmetrics(_stamped("dcgm_1x_names_old_namespace.prom"), source="1x")
    assert set(samples.names) == {"dcgm_fi_prof_gr_engine_active"}
    assert all("pod_name" not in labels for labels in samples.labels)


def test_untyped_loads() -> None:
    text = (REAL / "federate_untyped_ms_timestamps.prom").read_text().splitlines()
    # The federate answer's timestamps are milliseconds; OpenMetrics wants seconds.
    body = [text[0]] + [
        f"{line.rsplit(' ', 1)[0]} {int(line.rsplit(' ', 1)[1]) / 1000:.3f}" for line in text[1:]
    ]
    samples = read_openmetrics(("\n".join(body) + "\n# EOF\n").encode(), source="federate")
    assert samples.t_ms.tolist() == [1601919222492, 1601919216595, 1601919222037]


def test_vllm_v0_paste_loads_with_its_itl_family() -> None:
    samples = read_openmetrics(_stamped("vllm_v0_metrics_paste.prom"), source="v0")
    assert "vllm:time_per_output_token_seconds_bucket" in samples.names
    assert "vllm:time_per_output_token_seconds_count" in samples.names
