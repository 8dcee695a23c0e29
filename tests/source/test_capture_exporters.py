"""Captures and readings of exporters other than vLLM's and a plain dcgm-exporter's.

Each case reads real ``/metrics`` text (tests/fixtures/real, origins in its
README): SGLang 0.3's ``name`` label, SGLang 0.4's documented sample with
``sglang:time_per_output_token_seconds``, the SGLang router's ``sglang_``
re-export, vllm-ascend's negative KV-cache usage, dcgm-exporter's MIG series
(1.x names, and an A30 MIG instance exporting only profiling fields), NVIDIA
NIM's names without ``vllm:`` (and its finish reasons in
``request_finish_total``), Ray Serve 2.48's ``ray_vllm_``. Ray Serve's
``ray_vllm:`` names are made from a real vLLM exposition by the renaming Ray's
dashboards show (no exposition with the colon was found). GPUs of other pods
are made from the real MIG lines by naming a pod in their empty pod labels, as
dcgm-exporter does when a pod holds the instance.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference_obs.analyses.collection import collection
from inference_obs.cli import main
from inference_obs.deployment import Deployment
from inference_obs.discover.check import unmatched_selectors
from inference_obs.discover.inventory import inventory
from inference_obs.metrics import builders as b, vllm
from inference_obs.metrics.renames import renames
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Status
from inference_obs.reading.wording import cell
from inference_obs.samples import Window
from inference_obs.source.capture import Recording, capture, propose_deployments
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.openmetrics.exposition import parse_exposition
from inference_obs.source.scrape import ScrapeClient, parse_target
from inference_obs.source.transport import PooledTransport
from tests.source.fake_exporters import FakeExporter, advancing, real_text

START_MS = 1_700_000_000_000
# The placeholder deployment's name and the out-of-range annotation's kind, as documented
# (source.capture.PLACEHOLDER, reading.measurement.OUT_OF_RANGE).
PLACEHOLDER, OUT_OF_RANGE = "unnamed", "out_of_range"
SGLANG_04 = real_text("sglang_0_4_docs_time_per_output_token.prom")
VLLM_V1 = real_text("vllm_v1_engine_label.prom")
NIM = real_text("nim_llm_unprefixed.prom")
MIG_1X = real_text("dcgm_1x_names_old_namespace.prom")
MIG_A30 = real_text("dcgm_mig_profiling_only.prom")
# The A30 MIG instance as dcgm-exporter labels it when a KServe pod holds it.
MIG_A30_KSERVE = MIG_A30.replace(
    'container="",namespace="",pod=""',
    'container="kserve-container",namespace="models",pod="granite-predictor-7d9f-x2k4q"',
)


def _recorded(tmp_path: Path, scrapes: dict[str, str], rounds: int = 3, **write: object) -> Dataset:
    """A dataset of ``rounds`` scrapes 15 s apart of each ``job=URL`` target's text."""
    recording = Recording()
    for n in range(rounds):
        for url, text in scrapes.items():
            target, _ = parse_target(url)
            body = advancing(text, n).encode()
            recording.add(target, START_MS + n * 15_000, parse_exposition(body, source=url))
    return recording.write(tmp_path / "ds", interval_s=15, title="t", method=["m"], **write)  # type: ignore[arg-type]


def _proposed(scrapes: dict[str, str]) -> tuple[tuple[Deployment, ...], list[str]]:
    recording = Recording()
    for url, text in scrapes.items():
        target, _ = parse_target(url)
        recording.add(target, START_MS, parse_exposition(text.encode(), source=url))
    return propose_deployments(recording.series())


# --- 1. GPUs of other pods, MIG instances as the unit ---------------------------------------


def test_mig_instances_of_other_pods_are_not_the_deployments() -> None:
    (deployment,), notes = _proposed(
        {
            "sglang=http://10.0.0.1:30000/metrics": SGLANG_04,
            "dcgm=http://10.0.0.1:9400/metrics": MIG_A30_KSERVE,
        }
    )
    # The only GPU series name a KServe pod, which no SGLang series names.
    assert deployment.gpu_selector is None
    assert deployment.hardware.gpu_model == "unknown"
    assert deployment.hardware.gpus_per_replica == 1
    assert any("granite-predictor-7d9f-x2k4q" in note for note in notes)


def test_each_mig_instance_is_a_gpu() -> None:
    # dcgm_1x: GPU 0 has instances 1 (3g.40gb) and 2 (4g.40gb), GPU 1 has instance 1: three
    # devices on two UUIDs, no pod named (pod_name="").
    (deployment,), _ = _proposed(
        {
            "vllm=http://10.0.0.1:8000/metrics": VLLM_V1,
            "dcgm=http://10.0.0.1:9400/metrics": MIG_1X,
        }
    )
    assert deployment.hardware.gpus_per_replica == 3
    assert deployment.hardware.gpu_model == "NVIDIA A100 80GB PCIe"


# --- 2. A capture is never thrown away --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "label", "model", "engine"),
    [
        # NVIDIA NIM: vLLM's names without the prefix.
        (NIM, "model_name", "meta/llama-3.1-8b-instruct", "vllm"),
        # Ray Serve: vLLM's names re-exported as ray_vllm:.
        (VLLM_V1.replace("vllm:", "ray_vllm:"), "model_name", "qwen3-8b", "vllm"),
        # SGLang 0.3: the model in "name".
        (
            real_text("sglang_0_3_name_label.prom"),
            "name",
            "/shared/public/elr-models/meta-llama/Llama-3.2-3B/"
            "5cc0ffe09ee49f7be6ca7c794ee6bd7245e84e60/",
            "sglang",
        ),
        # The SGLang router's re-export.
        (
            real_text("router_sglang_underscore.prom"),
            "model_name",
            "meta-llama/Llama-3.1-8B-Instruct",
            "sglang",
        ),
        # Ray Serve 2.48 as served: ray_vllm_, the colon replaced.
        (real_text("ray_serve_2_48_underscore.prom"), "model_name", "example-model", "vllm"),
    ],
    ids=["nim", "ray-serve", "sglang-0.3", "sglang-router", "ray-serve-2.48"],
)
def test_engines_under_other_names_get_a_deployment(
    text: str, label: str, model: str, engine: str
) -> None:
    (deployment,), _ = _proposed({"engine=http://10.0.0.1:8000/metrics": text})
    assert deployment.selector == {label: model}
    assert deployment.engine.name == engine


def test_a_capture_without_a_model_is_written_with_a_placeholder(tmp_path: Path) -> None:
    told: list[str] = []
    rounds: list[int] = []
    with FakeExporter(lambda n: real_text("dcgm_4x_pod_uid_empty.prom")) as gpus:
        target, _ = parse_target(f"dcgm={gpus.url}")
        client = ScrapeClient(target, PooledTransport(target.endpoint, size=1))
        try:
            dataset = capture(
                [client],
                tmp_path / "ds",
                interval_s=0.2,
                duration_s=0.6,
                progress=lambda p: rounds.append(p.rounds),
                proposal=lambda line: told.append(f"{line} (after {len(rounds)} rounds told)"),
            )
        finally:
            client.close()
    # Said once, when the first round was done and before its progress line.
    assert len(told) == 1
    assert told[0].endswith("(after 0 rounds told)")
    assert PLACEHOLDER in told[0]
    assert "--deployments" in told[0]
    (deployment,) = dataset.manifest.deployments
    assert deployment.name == PLACEHOLDER
    assert deployment.selector == {"instance": "~" + gpus.instance.replace(".", r"\.")}
    assert any("name the deployments" in line for line in dataset.manifest.methodology)
    assert len(dataset.samples) > 0


# --- 3. Families under other names ------------------------------------------------------------


def test_other_exporters_names_are_read_as_the_catalogues() -> None:
    nim = {s.name for s in parse_exposition(NIM.encode(), source="nim").samples}
    assert renames(nim) == {
        "vllm:num_requests_running": "num_requests_running",
        "vllm:num_requests_waiting": "num_requests_waiting",
        "vllm:kv_cache_usage_perc": "gpu_cache_usage_perc",
        "vllm:prompt_tokens_total": "prompt_tokens_total",
        "vllm:generation_tokens_total": "generation_tokens_total",
        "vllm:time_to_first_token_seconds": "time_to_first_token_seconds",
        "vllm:request_prompt_tokens": "request_prompt_tokens",
        # NIM's per-reason counter, not its request_success_total, which has no reason.
        "vllm:request_success_total": "request_finish_total",
    }
    router = {s.name for s in parse_exposition(SGLANG_04.encode(), source="s").samples}
    router_names = {n.replace("sglang:", "sglang_") for n in router}
    # SGLang <= 0.4's time_per_output_token is the ITL family's older name.
    assert renames(router)["sglang:inter_token_latency_seconds"] == (
        "sglang:time_per_output_token_seconds"
    )
    assert renames(router_names)["sglang:inter_token_latency_seconds"] == (
        "sglang_time_per_output_token_seconds"
    )
    assert renames(router_names)["sglang:num_running_reqs"] == "sglang_num_running_reqs"


@pytest.mark.parametrize("prefix", ["", "ray_vllm:"], ids=["nim", "ray-serve"])
def test_discover_finds_replicas_under_other_names(tmp_path: Path, prefix: str) -> None:
    text = real_text("vllm_v0_metrics_paste.prom").replace("vllm:", prefix)
    dataset = _recorded(tmp_path, {"engine=http://10.0.0.1:8000/metrics": text})
    window = Window(dataset.manifest.window.start, dataset.manifest.window.end)
    found = inventory(DatasetSource(dataset), window)
    assert {key.name for key in found.replicas} == {"10.0.0.1:8000"}
    assert {m for r in found.replicas.values() for m in r.models} == {"mymodelname"}
    (deployment,) = dataset.manifest.deployments
    # The selector check reads the same names: no "matches no vllm series" warning.
    assert not [
        line
        for line in unmatched_selectors(DatasetSource(dataset), [deployment], window)
        if "vllm series" in line
    ]


# --- 4. Values outside a family's range -------------------------------------------------------


def test_a_kv_usage_below_zero_is_not_ok(tmp_path: Path) -> None:
    dataset = _recorded(
        tmp_path,
        {"vllm=http://10.0.0.1:7103/metrics": real_text("vllm_ascend_negative_kv_usage.prom")},
    )
    (deployment,) = dataset.manifest.deployments
    window = Window(dataset.manifest.window.start, dataset.manifest.window.end)
    reading = Reading(DatasetSource(dataset), deployment, window, "bottleneck")
    expr = b.maximum(vllm.KV_CACHE_USAGE, reading.matchers, window.seconds)
    kv = reading.measure("kv_cache_usage_max", expr, "ratio")
    # vllm-ascend exported -0.3875395987328405; the family is a fraction of 0 to 1.
    assert kv.status is Status.INVALID
    assert kv.value is None
    (note,) = [a for a in kv.annotations if a.kind == OUT_OF_RANGE]
    assert "-0.38754" in note.message
    assert "0 to 1" in note.message
    # Tables say why there is no value, not "invalid" or "no series".
    assert cell(kv) == "out of range"


# --- 5. GPUs with profiling fields only (MIG) -------------------------------------------------


def test_a_mig_gpu_with_profiling_fields_only_is_discovered_and_reporting(tmp_path: Path) -> None:
    dataset = _recorded(
        tmp_path,
        {
            "sglang=http://10.0.0.1:30000/metrics": SGLANG_04,
            "dcgm=http://10.0.0.1:9400/metrics": MIG_A30,
        },
    )
    window = Window(dataset.manifest.window.start, dataset.manifest.window.end)
    found = inventory(DatasetSource(dataset), window)
    assert list(found.gpus) == ["GPU-603a8873-0edd-c157-ce48-2078e8b1a935/1"]
    (deployment,) = dataset.manifest.deployments
    health = collection(DatasetSource(dataset), deployment, window)
    # It sent GR_ENGINE_ACTIVE at every scrape: it reports, it is not silent.
    assert health.silent_gpus == ()
    # No utilisation sample at all: no count of silent GPUs, not one.
    assert health.gpus_silent.value is None


# --- End to end: an SGLang server beside MIG instances of other pods --------------------------


@pytest.fixture(scope="module")
def sglang_beside_kserve(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dataset, Path]:
    out = tmp_path_factory.mktemp("capture") / "ds"
    with (
        FakeExporter(lambda n: advancing(SGLANG_04, n)) as engine,
        FakeExporter(lambda n: MIG_A30_KSERVE) as gpus,
    ):
        status = main(
            [
                "capture",
                *("--url", f"sglang={engine.url}", "--url", f"dcgm={gpus.url}"),
                *("--interval", "500ms", "--duration", "3s", "--out", str(out)),
            ]
        )
        assert status == 0
    report = tmp_path_factory.mktemp("report")
    status = main(
        ["report", "--dataset", str(out), "--format", "md,json", "--out", str(report), "--quiet"]
    )
    assert status == 0
    return read_dataset(out), report


def test_the_capture_takes_no_gpu_of_another_pod(
    sglang_beside_kserve: tuple[Dataset, Path],
) -> None:
    dataset, _ = sglang_beside_kserve
    (deployment,) = dataset.manifest.deployments
    assert deployment.engine.name == "sglang"
    assert deployment.gpu_selector is None
    assert deployment.hardware.gpu_model == "unknown"


def test_the_report_says_the_gpus_are_unknown_not_idle(
    sglang_beside_kserve: tuple[Dataset, Path],
) -> None:
    _, report = sglang_beside_kserve
    document = json.loads((report / "report.json").read_text())
    found = {m["key"].split("/", 1)[1]: m for m in document["measurements"]}
    # The KServe pod's instance was 38 % busy: none of it may be read as this deployment's.
    for key, one in found.items():
        if key.startswith("gpu/utilization"):
            assert one["status"] == "no_data", key
    text = (report / "report.md").read_text()
    assert "GPUs unknown: the GPU series scraped name other pods" in text
    assert "| starved |" not in text
    assert "GPUs starved" not in text
    assert "contradicted" not in text.split("(both values shown)")[1]


def test_the_report_reads_sglang_04_inter_token_latency(
    sglang_beside_kserve: tuple[Dataset, Path],
) -> None:
    _, report = sglang_beside_kserve
    document = json.loads((report / "report.json").read_text())
    found = {m["key"].split("/", 1)[1]: m for m in document["measurements"]}
    itl = found["latency/itl_p50"]
    # Each served step adds 10 observations of 1 ms: all in the lowest bucket (le=0.005).
    assert itl["status"] == "ok"
    assert 0 < itl["value"] <= 0.005
    assert any(a["kind"] == "renamed_family" for a in itl["annotations"])


def test_a_capture_shorter_than_the_rolling_window_says_so(
    sglang_beside_kserve: tuple[Dataset, Path],
) -> None:
    _, report = sglang_beside_kserve
    text = (report / "report.md").read_text()
    assert "shorter than the rolling window" in text
    assert "_bucket series are missing" not in text
    # Named as the data holds it, not by vLLM's name.
    assert "sglang:time_per_output_token_seconds" in text
    assert "of vllm:inter_token_latency_seconds" not in text


@pytest.mark.parametrize("split", [True, False], ids=["request_finish_total", "unsplit"])
def test_nim_finish_reasons_come_from_its_per_reason_counter(tmp_path: Path, split: bool) -> None:
    """NIM counts finished requests by reason in request_finish_total; its
    request_success_total has no reason. Without the per-reason counter, the total is
    read and no reason is made up (an empty one read as a reason before)."""
    kept = [line for line in NIM.splitlines() if split or "request_finish" not in line]
    text = "\n".join(kept)
    _recorded(tmp_path, {"nim=http://10.0.0.1:8000/metrics": text}, rounds=4)
    out = tmp_path / "report"
    assert main(["report", "--dataset", str(tmp_path / "ds"), "--out", str(out), "--quiet"]) == 0
    found = {
        m["key"].split("/", 1)[1]: m
        for m in json.loads((out / "report.json").read_text())["measurements"]
    }
    reasons = {k for k in found if k.startswith("shapes/finished_")}
    counter = "request_finish_total" if split else "request_success_total"
    assert counter in found["shapes/finished"]["provenance"]["promql"][0]
    assert found["shapes/finished"]["value"] > 0
    if split:
        assert reasons == {"shapes/finished_length", "shapes/finished_length_share"}
        assert found["shapes/finished_length_share"]["value"] == 1.0
    else:
        assert reasons == set()
    # Prompt lengths from NIM's unprefixed histogram, KV usage from its v0 gauge name.
    assert found["shapes/prompt_tokens_mean"]["status"] == "ok"
    assert found["memory/kv_cache_usage_max"]["value"] == pytest.approx(0.0002848191398461977)
