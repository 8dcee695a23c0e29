"""A fleet of a vLLM server and an SGLang server, both declared vLLM: each read as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.deployment import Deployment
from inference_obs.metrics.sglang_reading import STAND_INS
from inference_obs.reading.discovery import discover
from inference_obs.report.from_source import report
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.real_fleets import fixture, record, target

V0 = fixture("vllm_v0_metrics_paste.prom")
SGLANG_04 = fixture("sglang_0_4_queue_metrics.prom")
LLAMA = "/shared/public/models/Meta-Llama-3-8B-Instruct"  # as the SGLang answer names it
HARDWARE = {"gpu_model": "NVIDIA H100 80GB HBM3", "gpus_per_replica": 1}


def test_each_deployment_reads_its_own_engine(tmp_path: Path) -> None:
    served = [
        (target("vllm=http://10.0.0.1:8000/metrics"), V0, 0),
        (target("sglang=http://10.0.0.2:30000/metrics"), SGLANG_04, 0),
    ]
    deployments = [
        Deployment(
            name=name, selector={"model_name": model}, hardware=HARDWARE, engine={"name": "vllm"}
        )
        for name, model in (("V", "mymodelname"), ("S", LLAMA))
    ]
    dataset = record(tmp_path / "ds", served, deployments)
    source = DatasetSource(dataset)
    window = source.dataset.manifest.window.window()
    vllm_found, sglang_found = (discover(source, d, window) for d in deployments)
    assert dict(vllm_found.stand_ins) == {}
    assert dict(sglang_found.stand_ins) == dict(STAND_INS)

    # The report API: the SGLang excerpt has gauges only, no counter to see a replica by, so
    # the CLI would end with its no-data status.
    found = {m.key: m for m in report(source).measurements()}
    # The vLLM server is read as before, under its own (older) names.
    assert found["V/latency/itl_p50"].provenance.promql_value == pytest.approx(0.005)
    assert "engine_equivalent" not in {a.kind for a in found["V/latency/itl_p50"].annotations}
    # The SGLang server's KV usage is its sglang:token_usage (0.0 in the real answer).
    usage = found["S/memory/kv_cache_usage_max"]
    assert usage.status == "ok"
    assert usage.value == 0.0
    assert "sglang:token_usage" in usage.provenance.promql[0]
    assert "engine_equivalent" in {a.kind for a in usage.annotations}
    # SGLang 0.4 had no TTFT in this answer: no number, not the vLLM server's.
    assert found["S/latency/ttft_p50"].value is None
