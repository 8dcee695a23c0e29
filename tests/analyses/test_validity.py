"""Comparison validity on the bundled datasets, a simulated control pair and its variants.

Expectations come from what the datasets were built to show (their scenario
files) and from changes made on purpose (a variant scenario, an altered
declared configuration, a shortened window, a dropped series), never from
the code under test.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_obs.analyses.validity.findings import COMPARISONS, FINDINGS, Severity, latency_keys
from inference_obs.analyses.validity.verdicts import PairValidity, Verdict, validity
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import vllm
from inference_obs.samples import Window
from inference_obs.simulate import simulate
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

from .ground_truth import true_quantile, truth

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT / "datasets"
TWIN = ROOT / "tests" / "fixtures" / "scenarios" / "twin.yaml"
DOCS = ROOT / "docs" / "comparison-findings.md"
#: Codes seen fired by the tests of this module (checked complete at the end).
FIRED: set[str] = set()


def _compare(source: DatasetSource, window: Window | dict[str, Window] | None = None,
             deployments: Any = None) -> PairValidity:  # fmt: skip
    result = validity(
        source, deployments or source.dataset.manifest.deployments,
        window or source.dataset.manifest.window.window(),
    )  # fmt: skip
    (pair,) = result.pairs
    FIRED.update(f.code for f in pair.findings)
    return pair


def _weighing(pair: PairValidity) -> set[str]:
    """Codes of findings that weigh on some comparison (caveat or invalid)."""
    return {f.code for f in pair.findings if f.severity is not Severity.INFO}


@pytest.fixture(scope="module")
def pro_h20() -> PairValidity:
    return _compare(DatasetSource(DATASETS / "pro5000-vs-h20"))


@pytest.fixture(scope="module")
def h100_h200() -> PairValidity:
    return _compare(DatasetSource(DATASETS / "h100-vs-h200"))


def _twin(out: Path, seed: int, change: dict[str, Any] | None = None) -> DatasetSource:
    scenario = yaml.safe_load(TWIN.read_text())
    # B merges A's mapping, so it shares A's nested objects until copied.
    scenario["deployments"][1] = copy.deepcopy(scenario["deployments"][1])
    for key, value in (change or {}).items():
        scenario["deployments"][1]["workload"][0][key] = value
    path = out / "twin.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return DatasetSource(simulate(path, out / "data", seed=seed))


def test_pro5000_output_throughput_is_invalid_for_workload_volume_and_cache(
    pro_h20: PairValidity,
) -> None:
    verdict = pro_h20.verdicts["output_throughput"]
    assert verdict.verdict is Verdict.INVALID
    for code in ("output_length_differs", "max_tokens_differs", "traffic_volume_differs",
                 "external_kv_one_side"):  # fmt: skip
        assert code in verdict.findings, code
    length = pro_h20.finding("output_length_differs")
    assert length is not None
    (evidence,) = length.evidence
    # The dataset was built with ~14-token PRO outputs against ~530-token H20 outputs.
    pro, h20 = evidence.values["PRO"], evidence.values["H20"]
    assert isinstance(pro, float)
    assert isinstance(h20, float)
    assert pro < 20 < 400 < h20
    volume = pro_h20.finding("traffic_volume_differs")
    assert volume is not None
    assert {e.statistic for e in volume.evidence} == {
        "requests_per_second_per_replica", "active_share",
    }  # fmt: skip


def test_pro5000_latency_is_caveated_by_output_length(pro_h20: PairValidity) -> None:
    for key in ("ttft_mean", "ttft_p50", "ttft_p95", "tpot_mean", "tpot_p50", "queue_mean"):
        verdict = pro_h20.verdicts[key]
        assert verdict.verdict is Verdict.CAVEATED, key
        assert "output_length_differs" in verdict.findings, key
    # End-to-end time of 14-token requests against 530-token ones is not a speed comparison.
    assert pro_h20.verdicts["e2e_mean"].verdict is Verdict.INVALID
    # The dataset dropped the ITL buckets: no percentile to compare.
    assert pro_h20.verdicts["itl_p95"].verdict is Verdict.INVALID
    assert "missing_data" in pro_h20.verdicts["itl_p95"].findings


def test_h100_h200_itl_p95_is_invalid_with_the_concurrency_evidence(
    h100_h200: PairValidity,
) -> None:
    verdict = h100_h200.verdicts["itl_p95"]
    assert verdict.verdict is Verdict.INVALID
    assert "concurrency_differs" in verdict.findings
    concurrency = h100_h200.finding("concurrency_differs")
    assert concurrency is not None
    (evidence,) = concurrency.evidence
    # The scenario's targets: ~11 in flight on H100 against ~61 on H200.
    assert 9 < float(evidence.values["H100"] or 0) < 14
    assert 50 < float(evidence.values["H200"] or 0) < 70
    # Median TTFT is comparable, with caveats.
    assert h100_h200.verdicts["ttft_p50"].verdict is Verdict.CAVEATED


def test_concurrency_weighs_on_a_tail_by_which_side_is_worse(h100_h200: PairValidity) -> None:
    concurrency = h100_h200.finding("concurrency_differs")
    assert concurrency is not None
    for key in latency_keys(stats=("p95", "p99")):
        values = h100_h200.verdicts[key].values
        h100, h200 = values["H100"], values["H200"]
        if h100 is None or h200 is None:
            continue
        # H200 is the busier side: its worse tail may be load (invalid); its better one is not.
        expected = Severity.INVALID if h200 > h100 else Severity.CAVEAT
        assert concurrency.affects[key] is expected, key
    assert concurrency.affects["ttft_p50"] is Severity.CAVEAT


def test_spec_decoding_on_one_side_invalidates_itl_not_tpot(h100_h200: PairValidity) -> None:
    spec = h100_h200.finding("spec_decode_one_side")
    assert spec is not None
    for key in latency_keys(("itl",)):
        assert spec.affects[key] is Severity.INVALID
    assert spec.affects["tpot_p50"] is Severity.CAVEAT


def test_h100_h200_ttft_medians_in_one_bucket_are_noted_indistinguishable(
    h100_h200: PairValidity,
) -> None:
    source = DatasetSource(DATASETS / "h100-vs-h200")
    p50 = h100_h200.verdicts["ttft_p50"]
    assert "same_bucket" in p50.notes
    assert "same_bucket" not in p50.findings  # a note: it makes no verdict worse
    bucket = p50.bounds["H100"]
    assert bucket is not None
    assert bucket == p50.bounds["H200"]
    # Both true medians (from requests.csv) lie in that bucket: nothing orders them.
    for name in ("H100", "H200"):
        true = true_quantile(truth(source, name, "ttft", time="first_token"), 0.5)
        assert bucket.lower < true <= bucket.upper, (name, true)
    same = h100_h200.finding("same_bucket")
    assert same is not None
    assert same.affects["ttft_p50"] is Severity.INFO
    # TPOT medians lie in different buckets: no note.
    tpot = h100_h200.verdicts["tpot_p50"]
    assert tpot.bounds["H100"] != tpot.bounds["H200"]
    assert "tpot_p50" not in same.affects


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_an_identical_pair_is_valid_across_the_board(tmp_path: Path, seed: int) -> None:
    pair = _compare(_twin(tmp_path, seed))
    invalid_or_caveated = {k: v.findings for k, v in pair.verdicts.items()
                           if v.verdict is not Verdict.VALID}  # fmt: skip
    assert not invalid_or_caveated
    assert set(pair.verdicts) == set(COMPARISONS) - {"cost_per_token"}
    assert all(v.values["A"] is not None and v.values["B"] is not None
               for v in pair.verdicts.values())  # fmt: skip


def test_a_different_cache_and_acceptance_is_found(tmp_path: Path) -> None:
    change = {
        "prefix_hit_ratio": {"kind": "beta", "mean": 0.8, "concentration": 4},
        "acceptance_rate": {"kind": "beta", "mean": 0.3, "concentration": 60},
    }
    pair = _compare(_twin(tmp_path, 11, change))
    assert _weighing(pair) == {"prefix_hit_rate_differs", "spec_acceptance_differs"}
    assert pair.verdicts["itl_p50"].verdict is Verdict.CAVEATED
    assert pair.verdicts["ttft_p50"].verdict is Verdict.CAVEATED


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> DatasetSource:
    return _twin(tmp_path_factory.mktemp("twin"), 11)


#: Declared changes the series expose (DCGM labels, cache_config_info), so contradict.
CONTRADICTED = {
    "gpu_model_differs", "gpus_per_replica_differs", "parallelism_differs", "kv_dtype_differs",
    "cache_config_differs",
}  # fmt: skip


def test_declared_differences_each_raise_their_finding(twin: DatasetSource) -> None:
    a, b = twin.dataset.manifest.deployments
    changes: dict[str, dict[str, Any]] = {
        "gpu_model_differs": {"hardware": b.hardware.model_copy(update={"gpu_model": "H200"})},
        "gpus_per_replica_differs": {"hardware": b.hardware.model_copy(
            update={"gpus_per_replica": 8})},
        "interconnect_differs": {"hardware": b.hardware.model_copy(
            update={"interconnect": "NVSwitch"})},
        "engine_build_differs": {"engine": b.engine.model_copy(update={"version": "0.26.0"})},
        "parallelism_differs": {"config": b.config.model_copy(update={"tensor_parallel_size": 8})},
        "kv_dtype_differs": {"config": b.config.model_copy(update={"kv_cache_dtype": "auto"})},
        "batched_tokens_differs": {"config": b.config.model_copy(
            update={"max_num_batched_tokens": 8192})},
        "cache_config_differs": {"config": b.config.model_copy(update={"prefix_caching": False})},
    }  # fmt: skip
    for code, update in changes.items():
        pair = _compare(twin, deployments=[a, b.model_copy(update=update)])
        found = {f.code for f in pair.findings} - {f.code for f in _compare(twin).findings}
        # The series contradict what B now declares wherever they expose the field;
        # declaring 8 GPUs where DCGM shows 4 also leaves B's utilisation partial.
        also = {"config_contradicted"} if code in CONTRADICTED else set()
        also |= {"partial_data"} if code == "gpus_per_replica_differs" else set()
        assert found == {code} | also, code
        finding = pair.finding(code)
        assert finding is not None
        assert any(e.values["A"] != e.values["B"] for e in finding.evidence)
    batched = _compare(
        twin, deployments=[a, b.model_copy(update=changes["batched_tokens_differs"])]
    )
    assert batched.verdicts["kv_capacity"].verdict is Verdict.INVALID


def test_windows_of_different_length_and_short_windows(twin: DatasetSource) -> None:
    full = twin.dataset.manifest.window.window()
    shorter = Window(full.start, full.start + (full.end - full.start) * 0.6)
    pair = _compare(twin, {"A": full, "B": shorter})
    assert "window_differs" in _weighing(pair)
    brief = Window(full.end - (full.end - full.start) / 10, full.end)
    few = _compare(twin, brief)
    finding = few.finding("too_few_observations")
    assert finding is not None
    # Three minutes at ~1 request/s: far below the 1000 a P99 needs, enough for a mean.
    assert finding.affects["ttft_p99"] is Severity.CAVEAT
    assert "ttft_mean" not in finding.affects
    assert few.verdicts["ttft_p99"].verdict is Verdict.CAVEATED


def test_a_value_from_partial_data_is_caveated(tmp_path: Path) -> None:
    source = DatasetSource(DATASETS / "pro5000-vs-h20")
    family = vllm.REQUEST_QUEUE_TIME
    dropped = (f"{family.name}_count", "h20-model-03")
    kept = [s for s in source.samples if (s.name, s.labels.get("pod")) != dropped]
    pair = _compare(DatasetSource(write_dataset(tmp_path / "d", source.dataset.manifest, kept)))
    partial = pair.finding("partial_data")
    assert partial is not None
    assert partial.affects == {"queue_mean": Severity.CAVEAT}


def test_bad_calls_are_refused_with_the_input_named() -> None:
    source = DatasetSource(DATASETS / "pro5000-vs-h20")
    deployments = source.dataset.manifest.deployments
    window = source.dataset.manifest.window.window()
    with pytest.raises(ConfigurationError, match="at least two"):
        validity(source, deployments[:1], window)
    with pytest.raises(ConfigurationError, match="distinct"):
        validity(source, [deployments[0], deployments[0]], window)
    with pytest.raises(ConfigurationError, match="H20"):
        validity(source, deployments, {"PRO": window})


def test_frames_and_html_show_every_verdict_and_finding() -> None:
    source = DatasetSource(DATASETS / "pro5000-vs-h20")
    result = validity(
        source, source.dataset.manifest.deployments, source.dataset.manifest.window.window()
    )
    (pair,) = result.pairs
    verdicts = result.to_frame()
    assert len(verdicts) == len(pair.verdicts)
    row = verdicts.set_index("comparison").loc["output_throughput"]
    assert row["verdict"] == "invalid"
    assert "output_length_differs" in row["findings"]
    findings = result.findings_frame()
    assert list(findings["code"]) == [f.code for f in pair.findings]
    length = findings.set_index("code").loc["output_length_differs"]
    assert "PRO=" in length["evidence"]
    assert "H20=" in length["evidence"]
    assert length["how_to_compare"]
    page = result._repr_html_()
    assert page.count("<tr>") == len(pair.verdicts) + 1
    assert "output_throughput" in page
    assert result.verdict("output_throughput") is Verdict.INVALID
    assert result.verdict("ttft_p50", "H20", "PRO") is Verdict.CAVEATED
    with pytest.raises(ConfigurationError, match="unknown comparison"):
        result.verdict("speed")


def test_every_finding_code_is_documented() -> None:
    documented = set(re.findall(r"^### (\w+)$", DOCS.read_text(), flags=re.MULTILINE))
    assert documented == set(FINDINGS)


def test_every_finding_code_fired_in_these_tests() -> None:
    # Runs last in this module (pytest keeps definition order).
    assert set(FINDINGS) - FIRED == set()


def test_a_side_without_finish_counts_is_not_a_finish_mix_of_zeros(tmp_path: Path) -> None:
    # Twin deployments, A's vllm:request_success_total not exported: A's finish mix is no
    # data. Read as 0 of every reason, it would differ from B's by a total variation of
    # 0.5 (half the sum of B's shares, which is 1) and raise finish_mix_differs with
    # "A 0" as its evidence.
    scenario = yaml.safe_load(TWIN.read_text())
    scenario["deployments"][1] = copy.deepcopy(scenario["deployments"][1])
    scenario["faults"] = [
        {"kind": "missing_family", "family": "vllm:request_success_total", "replicas": ["A-01"]}
    ]
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(scenario))
    source = DatasetSource(simulate(path, tmp_path / "data", seed=11))
    pair = _compare(source)
    assert pair.finding("finish_mix_differs") is None
