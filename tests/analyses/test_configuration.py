"""configuration(): declared fields against the series of the bundled datasets.

Expected values come from the datasets' manifests and raw series (read here
with ``source.raw``), or are written out from their label values with the
arithmetic beside them; never from the code under test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.configuration import CheckStatus, ConfigurationResult, configuration
from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import dcgm, vllm
from inference_obs.reading.measurement import Status
from inference_obs.samples import Series, Window
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset
from tests.test_topology import H100_PAIRS, NV18_MESH

DATASETS = Path(__file__).parents[2] / "datasets"
VERIFIED, CONTRADICTED = CheckStatus.VERIFIED, CheckStatus.CONTRADICTED
CONSISTENT = CheckStatus.CONSISTENT
UNVERIFIABLE, NOT_DECLARED = CheckStatus.UNVERIFIABLE, CheckStatus.NOT_DECLARED


@pytest.fixture(scope="module")
def h100_h200() -> DatasetSource:
    return DatasetSource(DATASETS / "h100-vs-h200")


@pytest.fixture(scope="module")
def pro_h20() -> DatasetSource:
    return DatasetSource(DATASETS / "pro5000-vs-h20")


def _window(source: DatasetSource) -> Window:
    return source.dataset.manifest.window.window()


def _deployment(source: DatasetSource, name: str) -> Deployment:
    return next(d for d in source.dataset.manifest.deployments if d.name == name)


def _run(source: DatasetSource, name: str, **config: object) -> ConfigurationResult:
    deployment = _deployment(source, name)
    if config:
        deployment = deployment.model_copy(
            update={"config": deployment.config.model_copy(update=config)}
        )
    return configuration(source, deployment, _window(source))


@pytest.mark.parametrize(
    ("dataset", "name"),
    [("h100-vs-h200", "H100"), ("h100-vs-h200", "H200"), ("pro5000-vs-h20", "PRO"),
     ("pro5000-vs-h20", "H20")],
)  # fmt: skip
def test_bundled_deployments_run_what_they_declare(dataset: str, name: str) -> None:
    source = DatasetSource(DATASETS / dataset)
    deployment = _deployment(source, name)
    result = configuration(source, deployment, _window(source))
    assert result.contradictions == ()
    # GPUs per pod and their product name, straight from the raw DCGM series.
    raw = source.raw(dcgm.GPU_UTIL.select(deployment.gpu_matchers), _window(source))
    per_pod: dict[str, set[str]] = {}
    for labels in raw.labels:
        per_pod.setdefault(labels["pod"], set()).add(labels["UUID"])
    assert {len(u) for u in per_pod.values()} == {deployment.hardware.gpus_per_replica}
    assert {labels["modelName"] for labels in raw.labels} == {deployment.hardware.gpu_model}
    gpus = result.check("hardware.gpus_per_replica")
    assert gpus.status is VERIFIED
    assert gpus.observed == str(deployment.hardware.gpus_per_replica)
    assert result.check("hardware.gpu_model").status is VERIFIED
    assert result.check("replicas").observed == str(len(deployment.replicas))
    dtype = result.check("config.kv_cache_dtype")
    assert dtype.status is VERIFIED
    assert dtype.observed == deployment.config.kv_cache_dtype
    # Nothing exposes the engine version: never reported as verified.
    version = result.check("engine.version")
    assert version.status is UNVERIFIABLE
    assert "/version" in version.reason


def test_every_declared_field_is_checked(h100_h200: DatasetSource) -> None:
    result = _run(h100_h200, "H100")
    deployment = _deployment(h100_h200, "H100")
    expected = {
        f"{part}.{name}"
        for part in ("hardware", "engine", "config")
        for name in type(getattr(deployment, part)).model_fields
    }
    # The GPU-hour price is what the deployment costs, not a claim its series could check.
    assert expected - {"hardware.gpu_hour_price"} <= {c.field for c in result.checks}
    assert "hardware.gpu_hour_price" not in {c.field for c in result.checks}
    # Every observed value says which queries it came from; only the topology needs none.
    for check in result.checks:
        if check.observed is not None and check.field != "hardware.interconnect":
            assert check.provenance is not None, check.field
            assert check.provenance.promql, check.field
            assert check.provenance.engine == "dataset"


def test_kv_capacity_is_blocks_times_block_size_summed_over_engines(
    h100_h200: DatasetSource,
) -> None:
    # The H200 replica runs 8 DP engines, each num_gpu_blocks="4700", block_size="256".
    h200 = _run(h100_h200, "H200")
    assert h200.kv_capacity_tokens.status is Status.OK
    assert h200.kv_capacity_tokens.value == 8 * 4700 * 256
    assert h200.kv_capacity_tokens.unit == "tokens"
    assert h200.check("config.data_parallel_size").status is VERIFIED
    assert h200.check("config.data_parallel_size").observed == "8"
    # No TP declared: one GPU per engine is what the series show.
    tp = h200.check("config.tensor_parallel_size")
    assert (tp.status, tp.observed) == (NOT_DECLARED, "1 GPU per engine")
    # Each H100 TP4 replica: one engine with num_gpu_blocks="3077" of 256 tokens, 787,712
    # tokens (the published write-up measured about 788k at 16,384 batched tokens).
    h100 = _run(h100_h200, "H100")
    per_replica = {m.statistic: m.value for m in h100.kv_capacity_tokens_per_replica}
    assert per_replica == {
        "kv_capacity_tokens[dsv4-h100-01]": 3077 * 256,
        "kv_capacity_tokens[dsv4-h100-02]": 3077 * 256,
    }
    assert h100.kv_capacity_tokens.value == 2 * 3077 * 256
    promql = h100.kv_capacity_tokens.provenance.promql
    assert promql == ('vllm:cache_config_info{namespace="llm",pod=~"dsv4-h100-.*"}',)
    assert h100.check("cache.num_gpu_blocks").observed == "3077"


def test_tensor_parallel_8_on_4_gpus_per_replica_is_contradicted(
    h100_h200: DatasetSource,
) -> None:
    check = _run(h100_h200, "H100", tensor_parallel_size=8).check("config.tensor_parallel_size")
    assert check.status is CONTRADICTED
    assert (check.declared, check.observed) == ("8", "4 GPUs per engine")
    assert "dsv4-h100-01: 4" in check.reason
    assert "needs at least 8 GPUs per engine" in check.reason
    assert check.provenance is not None
    assert any("(last_over_time(DCGM_FI_DEV_GPU_UTIL{" in q for q in check.provenance.promql)


@pytest.mark.parametrize(("dataset", "name"), [("h100-vs-h200", "H100"), ("pro5000-vs-h20", "H20")])
def test_a_gpu_count_never_verifies_tensor_parallelism(dataset: str, name: str) -> None:
    # Each engine holds as many GPUs as the declared TP (H100: 4 per pod, one engine; H20:
    # 8 per pod, one engine): TP x PP, or spare GPUs, would give the same count, so the
    # declared TP is consistent with it, never verified.
    source = DatasetSource(DATASETS / dataset)
    declared = _deployment(source, name).config.tensor_parallel_size
    assert declared is not None
    check = _run(source, name).check("config.tensor_parallel_size")
    assert check.status is CONSISTENT
    assert check.observed == f"{declared} GPUs per engine"
    assert "cannot show the TP an engine runs" in check.reason
    # Half the GPUs per engine in TP (TP x PP 2, or spare GPUs) is just as consistent.
    half = _run(source, name, tensor_parallel_size=declared // 2).check(
        "config.tensor_parallel_size"
    )
    assert half.status is CONSISTENT


def test_declared_fp8_against_auto_is_contradicted(pro_h20: DatasetSource) -> None:
    result = _run(pro_h20, "H20", kv_cache_dtype="fp8")
    check = result.check("config.kv_cache_dtype")
    assert check.status is CONTRADICTED
    assert (check.declared, check.observed) == ("fp8", "auto")
    assert "declared fp8" in check.reason
    assert result.contradictions == (check,)


def test_draft_length_verifies_num_speculative_tokens(pro_h20: DatasetSource) -> None:
    pro = _run(pro_h20, "PRO")
    assert (
        pro.draft_tokens_per_draft.value
        == pro_h20.dataset.manifest.deployments[0].config.num_speculative_tokens
    )
    assert pro.check("config.num_speculative_tokens").status is VERIFIED
    wrong = _run(pro_h20, "PRO", num_speculative_tokens=4).check("config.num_speculative_tokens")
    assert (wrong.status, wrong.declared, wrong.observed) == (CONTRADICTED, "4", "3")
    # The PRO replica has a KV connector (Mooncake); the H20 ones have none.
    assert pro.check("config.external_kv_cache").status is VERIFIED
    h20 = _run(pro_h20, "H20", external_kv_cache="mooncake").check("config.external_kv_cache")
    assert h20.status is UNVERIFIABLE
    assert vllm.EXTERNAL_PREFIX_CACHE_QUERIES.name in h20.reason


def _without(source: DatasetSource, tmp_path: Path, *names: str) -> DatasetSource:
    kept = [s for s in source.samples if s.name not in names]
    return DatasetSource(write_dataset(tmp_path / "cut", source.dataset.manifest, kept))


def test_removed_cache_config_info_is_unverifiable_naming_it(
    pro_h20: DatasetSource, tmp_path: Path
) -> None:
    cut = _without(pro_h20, tmp_path, vllm.CACHE_CONFIG_INFO.name)
    result = configuration(cut, _deployment(pro_h20, "PRO"), _window(pro_h20))
    for field in ("config.kv_cache_dtype", "config.prefix_caching", "config.tensor_parallel_size"):
        check = result.check(field)
        assert check.status is UNVERIFIABLE, field
        assert check.observed is None
        assert vllm.CACHE_CONFIG_INFO.name in check.reason, field
    capacity = result.kv_capacity_tokens
    assert capacity.status is Status.NO_DATA
    assert capacity.value is None
    assert any(vllm.CACHE_CONFIG_INFO.name in a.message for a in capacity.annotations)
    assert result.kv_capacity_tokens_per_replica == ()
    # The GPU side does not depend on it.
    assert result.check("hardware.gpu_model").status is VERIFIED


def test_removed_dcgm_families_leave_gpus_unverifiable(
    pro_h20: DatasetSource, tmp_path: Path
) -> None:
    dcgm_names = {s.name for s in pro_h20.samples if s.name.startswith("DCGM_")}
    cut = _without(pro_h20, tmp_path, *dcgm_names)
    result = configuration(cut, _deployment(pro_h20, "PRO"), _window(pro_h20))
    for field in ("hardware.gpus_per_replica", "config.tensor_parallel_size"):
        check = result.check(field)
        assert check.status is UNVERIFIABLE
        assert dcgm.GPU_UTIL.name in check.reason
    assert result.check("config.kv_cache_dtype").status is VERIFIED


def _relabelled(source: DatasetSource, tmp_path: Path, change: object) -> DatasetSource:
    assert callable(change)
    out = []
    for s in source.samples:
        if s.name == vllm.CACHE_CONFIG_INFO.name:
            out.extend(change(s))
        else:
            out.append(s)
    return DatasetSource(write_dataset(tmp_path / "relabelled", source.dataset.manifest, out))


def test_label_not_exposed_is_unverifiable_naming_it(
    pro_h20: DatasetSource, tmp_path: Path
) -> None:
    def drop_dtype(s: Series) -> list[Series]:
        labels = {k: v for k, v in s.labels.items() if k != "cache_dtype"}
        return [Series(s.name, labels, s.timestamps, s.values)]

    cut = _relabelled(pro_h20, tmp_path, drop_dtype)
    check = configuration(cut, _deployment(pro_h20, "PRO"), _window(pro_h20)).check(
        "config.kv_cache_dtype"
    )
    assert check.status is UNVERIFIABLE
    assert "does not expose the label cache_dtype" in check.reason


def test_kv_pool_changed_within_the_window_is_invalid(
    pro_h20: DatasetSource, tmp_path: Path
) -> None:
    # The PRO engine restarts halfway with a pool of 5000 blocks instead of 6000.
    def restart(s: Series) -> list[Series]:
        if s.labels["pod"] != "pro-model-01":
            return [s]
        half = s.timestamps.size // 2
        after = {**s.labels, "num_gpu_blocks": "5000"}
        return [
            Series(s.name, s.labels, s.timestamps[:half], s.values[:half]),
            Series(s.name, after, s.timestamps[half:], s.values[half:]),
        ]

    cut = _relabelled(pro_h20, tmp_path, restart)
    result = configuration(cut, _deployment(pro_h20, "PRO"), _window(pro_h20))
    capacity = result.kv_capacity_tokens
    assert capacity.status is Status.INVALID
    assert capacity.value is None
    (note,) = capacity.annotations
    assert "changed within the window" in note.message
    assert str(5000 * 64) in note.message
    assert str(6000 * 64) in note.message
    assert result.check("cache.num_gpu_blocks").observed == "5000, 6000"


def test_topology_of_the_write_up_is_a_finding_not_a_contradiction(
    h100_h200: DatasetSource,
) -> None:
    deployment = _deployment(h100_h200, "H100")
    window = _window(h100_h200)
    result = configuration(h100_h200, deployment.with_facts(topology=H100_PAIRS), window)
    assert result.topology is not None
    assert result.topology.gpu_count == 8
    # "PCIe (PHB), NVLink pairs (NV12)" is what the matrix shows.
    assert result.check("hardware.interconnect").status is VERIFIED
    # The write-up's H100 box runs TP 4 over two NVLink pairs joined by PHB: it runs, slower.
    # That is what the wiring means, not a contradiction of what was declared.
    assert result.contradictions == ()
    assert "topology.parallelism" not in {c.field for c in result.checks}
    (found,) = result.topology_findings
    assert (found.group.gpus, found.group.path.value) == (4, "pcie")
    assert "tensor parallel over 4 GPUs crosses PCIe (PHB)" in found.finding
    assert "TP 2 per group would stay on NVLink" in found.consequence
    assert result.parallel_groups == (found.group,)
    tp8 = deployment.model_copy(
        update={"config": deployment.config.model_copy(update={"tensor_parallel_size": 8})}
    )
    eight = configuration(h100_h200, tp8.with_facts(topology=H100_PAIRS), window)
    assert [(g.gpus, g.path.value) for g in eight.parallel_groups] == [(8, "pcie")]
    # TP 8 on 4 GPUs per pod is contradicted by the GPU count, not by the wiring.
    assert [c.field for c in eight.contradictions] == ["config.tensor_parallel_size"]
    tp2 = deployment.model_copy(
        update={"config": deployment.config.model_copy(update={"tensor_parallel_size": 2})}
    )
    two = configuration(h100_h200, tp2.with_facts(topology=H100_PAIRS), window)
    (inside,) = two.topology_findings
    assert inside.group.path.value == "nvlink"
    assert inside.consequence == "no limit from the wiring"


def test_dp_ep_fits_a_mesh_and_not_pairs(h100_h200: DatasetSource) -> None:
    deployment = _deployment(h100_h200, "H200")
    window = _window(h100_h200)
    mesh = configuration(h100_h200, deployment.with_facts(topology=NV18_MESH), window)
    assert mesh.check("hardware.interconnect").status is VERIFIED  # declared "NVSwitch"
    assert [(g.parallelism.value, g.gpus) for g in mesh.parallel_groups] == [
        ("tensor", 1),
        ("data_expert", 8),
    ]
    assert all(f.group.fits for f in mesh.topology_findings)
    pairs = configuration(h100_h200, deployment.with_facts(topology=H100_PAIRS), window)
    # The declared interconnect is a declared field: NVSwitch against pairs contradicts it.
    assert [c.field for c in pairs.contradictions] == ["hardware.interconnect"]
    all_to_all = pairs.topology_findings[-1]
    assert all_to_all.group.path.value == "pcie"
    assert "peer access" in all_to_all.finding
    assert "expert-parallel shapes depend on it" in all_to_all.consequence


def test_without_topology_the_interconnect_is_unverifiable(h100_h200: DatasetSource) -> None:
    result = _run(h100_h200, "H100")
    check = result.check("hardware.interconnect")
    assert check.status is UNVERIFIABLE
    assert "nvidia-smi topo -m" in check.reason
    assert result.topology is None
    assert result.topology_findings == ()
    # Text that is no topology is refused when it is set, naming the deployment and its line.
    with pytest.raises(ConfigurationError, match="H100: topology: line 1: no header"):
        _deployment(h100_h200, "H100").with_facts(topology="oops")


def test_frame_and_table(h100_h200: DatasetSource) -> None:
    result = _run(h100_h200, "H100", kv_cache_dtype="auto")
    frame = result.to_frame()
    assert list(frame.columns) == ["field", "declared", "observed", "status", "reason", "promql"]
    assert len(frame) == len(result.checks)
    row = frame.set_index("field").loc["config.kv_cache_dtype"]
    assert (row["declared"], row["observed"], row["status"]) == ("auto", "fp8", "contradicted")
    assert "vllm:cache_config_info" in row["promql"]
    table = result._repr_html_()
    assert table.count("<tr>") == len(result.checks) + 1 + len(result.measurements()) + 1
    assert "contradicted" in table
    with pytest.raises(ConfigurationError, match=r"no check of 'config\.nothing'"):
        result.check("config.nothing")
    values = [m.value for m in result.measurements() if m.value is not None]
    assert np.all(np.isfinite(values))


def test_configuration_has_no_settings(h100_h200: DatasetSource) -> None:
    deployment = _deployment(h100_h200, "H100")
    with pytest.raises(ConfigurationError, match=r"configuration\.draft_tolerance"):
        configuration(h100_h200, deployment, _window(h100_h200), draft_tolerance=0.5)
