"""Families and label schemes resolve against what a real server actually holds.

The server is loaded with an older deployment's names: vLLM before 0.9.2
(``gpu_cache_usage_perc``), before 0.15 (``time_per_output_token_seconds``),
and a dcgm-exporter built after the ``Hostname`` -> ``hostname`` rename. The
catalogue resolves each against the server's own name and label lists, and
the resolved queries then return data where the newest names return none.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np
import pytest

from inference_obs.errors import NoDataError
from inference_obs.metrics import builders as b, dcgm, resolve_label, vllm
from inference_obs.query import to_promql
from inference_obs.samples import Series
from inference_obs.source.openmetrics.writer import write_openmetrics
from tests.integration.servers import PrometheusFactory, PrometheusServer

pytestmark = pytest.mark.integration

T0 = 1.7e9
TIMES = np.arange(T0, T0 + 601, 60.0)
END = float(TIMES[-1])
OLD = {"model_name": "m", "pod": "legacy-0"}


def _legacy_series() -> list[Series]:
    count = TIMES - T0
    series = [
        Series("vllm:gpu_cache_usage_perc", OLD, TIMES, np.full_like(TIMES, 0.5)),
        Series("vllm:time_per_output_token_seconds_count", OLD, TIMES, count),
        Series("vllm:time_per_output_token_seconds_sum", OLD, TIMES, count * 0.02),
        Series(
            "DCGM_FI_DEV_GPU_UTIL",
            {"gpu": "0", "hostname": "node-1"},
            TIMES,
            np.full_like(TIMES, 40.0),
        ),
    ]
    for le, share in (("0.01", 0.0), ("0.025", 1.0), ("+Inf", 1.0)):
        series.append(
            Series(
                "vllm:time_per_output_token_seconds_bucket", OLD | {"le": le}, TIMES, count * share
            )
        )
    return series


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
    text = io.StringIO()
    write_openmetrics(_legacy_series(), text)
    server = prometheus_factory(text.getvalue())
    yield server
    server.stop()


def test_families_resolve_to_the_names_the_server_has(prometheus: PrometheusServer) -> None:
    names = set(prometheus.label_values("__name__", T0, END))
    kv = vllm.KV_CACHE_USAGE.resolve(names)
    itl = vllm.INTER_TOKEN_LATENCY.resolve(names)
    assert kv.name == "vllm:gpu_cache_usage_perc"
    assert itl.name == "vllm:time_per_output_token_seconds"

    newest = to_promql(b.maximum(vllm.KV_CACHE_USAGE, [], 600))
    assert prometheus.query(newest, END)["result"] == []  # the newest name finds nothing
    resolved = prometheus.query(to_promql(b.maximum(kv, [], 600)), END)["result"]
    assert float(resolved[0]["value"][1]) == 0.5
    mean = prometheus.query(to_promql(b.histogram_mean(itl, [], 600)), END)["result"]
    assert float(mean[0]["value"][1]) == pytest.approx(0.02)

    with pytest.raises(NoDataError, match="vllm:gpu_prefix_cache_hits_total"):
        vllm.PREFIX_CACHE_HITS.resolve(names)


def test_label_scheme_resolves_to_the_labels_the_server_has(prometheus: PrometheusServer) -> None:
    labels = set(prometheus.label_names(T0, END))
    host = resolve_label(dcgm.HOSTNAME_LABELS, labels)
    assert host == "hostname"
    per_host = prometheus.query(to_promql(b.sample_mean(dcgm.GPU_UTIL, [], 600, (host,))), END)
    assert [r["metric"] for r in per_host["result"]] == [{"hostname": "node-1"}]
