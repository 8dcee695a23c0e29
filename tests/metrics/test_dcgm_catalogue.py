"""The dcgm-exporter catalogue against README exposition samples and field definitions.

Expected values are written out from dcgm-exporter 4.5.3-4.8.2 (``etc/*.csv``) and
the DCGM 4.6 field definitions, independently of the catalogue code.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from inference_obs.metrics import dcgm
from inference_obs.metrics.family import Family, MetricType, resolve_label

FIXTURES = Path(__file__).parents[1] / "fixtures" / "exposition"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
BY_NAME = {name: f for f in dcgm.FAMILIES for name in f.names}
PROF_RATIOS = (
    *(
        f
        for f in dcgm.FAMILIES
        if f.name.startswith("DCGM_FI_PROF_") and f.name.endswith("_ACTIVE")
    ),
    dcgm.PROF_SM_OCCUPANCY,
)


def _lines() -> list[str]:
    files = sorted(FIXTURES.glob("dcgm*.prom"))
    assert len(files) == 2, files
    return [line for f in files for line in f.read_text().splitlines()]


def _samples() -> list[tuple[str, str, str]]:
    out = []
    for line in _lines():
        if line.startswith("#") or not line.strip():
            continue
        match = SAMPLE.match(line)
        assert match, line
        out.append((match.group(1), match.group(2) or "", match.group(3)))
    return out


# --- fixtures -----------------------------------------------------------------------------


def test_every_fixture_series_is_a_catalogue_family() -> None:
    samples = _samples()
    assert len(samples) == 6
    assert {name for name, _, _ in samples} <= set(BY_NAME)


def test_fixture_types_match_the_declared_types() -> None:
    types = [line.split() for line in _lines() if line.startswith("# TYPE ")]
    assert types
    for _, _, name, declared in types:
        family = BY_NAME[name]
        assert declared == (family.declared_type or family.type.value)


def test_fixture_labels_are_gpu_labels() -> None:
    for _, labels, _ in _samples():
        for label in re.findall(r'(\w+)="', labels):
            assert label in dcgm.GPU_LABELS


def test_fixture_sentinels_are_recognised() -> None:
    values = {(name, int(value)) for name, _, value in _samples()}
    blanks = {name for name, value in values if value >= dcgm.SENTINEL_MIN}
    assert blanks == {"DCGM_FI_DEV_MEMORY_TEMP"}
    assert ("DCGM_FI_DEV_SM_CLOCK", 139) in values


def test_sentinel_threshold() -> None:
    assert dcgm.SENTINEL_MIN == 0x7FFFFFFFFFFFFFF0
    assert dcgm.SENTINEL_MIN <= 9223372036854775794  # INT64 NOT_SUPPORTED
    assert dcgm.SENTINEL_MIN <= 2**63 - 1


# --- structure ----------------------------------------------------------------------------


def test_families_lists_every_module_constant_once() -> None:
    constants = [v for v in vars(dcgm).values() if isinstance(v, Family)]
    assert len(set(dcgm.FAMILIES)) == len(dcgm.FAMILIES)
    assert set(constants) == set(dcgm.FAMILIES)


def test_no_two_families_share_a_name_or_alias() -> None:
    counts = Counter(n for f in dcgm.FAMILIES for n in f.names)
    assert [n for n, c in counts.items() if c > 1] == []


@pytest.mark.parametrize("family", dcgm.FAMILIES, ids=lambda f: f.name)
def test_family_is_well_formed(family: Family) -> None:
    assert family.exporter == "dcgm"
    assert family.help.strip()
    assert family.unit.strip()
    assert family.name.startswith(("DCGM_FI_", "DCGM_EXP_"))
    assert family.name == family.name.upper()
    assert family.type in (MetricType.GAUGE, MetricType.COUNTER)
    assert family.buckets is None
    assert family.labels[: len(dcgm.GPU_LABELS)] == dcgm.GPU_LABELS
    if family.already_rate:
        assert family.type is MetricType.GAUGE
        assert family.unit.endswith("_per_second")
    for trap in family.traps:
        assert trap.strip()
        assert len(trap) <= 200


def test_gpu_labels() -> None:
    assert dcgm.GPU_LABELS == (
        "gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
        "DCGM_FI_DRIVER_VERSION", "pod", "namespace", "container",
    )  # fmt: skip


def test_label_scheme_candidates() -> None:
    assert dcgm.HOSTNAME_LABELS == ("Hostname", "hostname")
    assert dcgm.POD_LABELS == ("pod", "exported_pod", "pod_name")
    assert dcgm.NAMESPACE_LABELS == ("namespace", "exported_namespace", "pod_namespace")
    assert dcgm.CONTAINER_LABELS == ("container", "exported_container", "container_name")
    assert dcgm.UUID_LABELS == ("UUID", "uuid")
    assert resolve_label(dcgm.HOSTNAME_LABELS, {"gpu", "hostname"}) == "hostname"
    assert resolve_label(dcgm.POD_LABELS, {"exported_pod", "pod_name"}) == "exported_pod"
    assert resolve_label(dcgm.UUID_LABELS, {"uuid"}) == "uuid"


# --- values and types ---------------------------------------------------------------------


def test_profiling_ratios_are_zero_to_one() -> None:
    assert len(PROF_RATIOS) >= 10
    for family in PROF_RATIOS:
        assert family.unit == "ratio", family.name
        assert family.value_range == (0, 1), family.name


@pytest.mark.parametrize(
    "family", [dcgm.GPU_UTIL, dcgm.MEM_COPY_UTIL, dcgm.ENC_UTIL, dcgm.DEC_UTIL]
)
def test_util_fields_are_percent(family: Family) -> None:
    assert family.unit == "percent"
    assert family.value_range == (0, 100)


def test_gpu_util_new_name_keeps_percent() -> None:
    assert "DCGM_FI_DEV_GPU_UTIL_RATIO" in dcgm.GPU_UTIL.names
    assert "dcgm_gpu_utilization" in dcgm.GPU_UTIL.names
    (alias,) = [a for a in dcgm.GPU_UTIL.aliases if a.name == "DCGM_FI_DEV_GPU_UTIL_RATIO"]
    assert "0-100" in alias.note
    assert dcgm.GPU_UTIL.value_range == (0, 100)


@pytest.mark.parametrize(
    ("family", "old"),
    [
        (dcgm.SM_CLOCK, "dcgm_sm_clock"),
        (dcgm.PROF_GR_ENGINE_ACTIVE, "dcgm_fi_prof_gr_engine_active"),
        (dcgm.PROF_GR_ENGINE_ACTIVE, "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"),
        (dcgm.PROF_PIPE_TENSOR_ACTIVE, "DCGM_FI_PROF_TENSOR_UTIL_RATIO"),
        (dcgm.PROF_DRAM_ACTIVE, "DCGM_FI_PROF_DRAM_UTIL_RATIO"),
        (dcgm.POWER_USAGE, "DCGM_FI_DEV_BOARD_POWER_WATTS"),
        (dcgm.NVLINK_BANDWIDTH_TOTAL, "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL"),
    ],
)
def test_aliases(family: Family, old: str) -> None:
    assert old in family.names
    assert family.resolve({old}).name == old


def test_rates_are_gauges_never_counters() -> None:
    rates = {f for f in dcgm.FAMILIES if f.already_rate}
    assert rates == {
        dcgm.NVLINK_BANDWIDTH_TOTAL,
        dcgm.PROF_PCIE_TX_BYTES,
        dcgm.PROF_PCIE_RX_BYTES,
        dcgm.PROF_NVLINK_TX_BYTES,
        dcgm.PROF_NVLINK_RX_BYTES,
    }
    nvlink = dcgm.NVLINK_BANDWIDTH_TOTAL
    assert nvlink.type is MetricType.GAUGE
    assert nvlink.declared_type == "counter"
    assert nvlink.unit == "MiB_per_second"
    for pcie in (dcgm.PROF_PCIE_TX_BYTES, dcgm.PROF_PCIE_RX_BYTES):
        assert pcie.unit == "bytes_per_second"
        assert pcie.declared_type is None
        assert any("counter" in t for t in pcie.traps)


def test_units() -> None:
    for family in (dcgm.FB_FREE, dcgm.FB_USED, dcgm.FB_RESERVED, dcgm.FB_TOTAL):
        assert family.unit == "MiB"
    assert dcgm.POWER_USAGE.unit == "watts"
    assert dcgm.TOTAL_ENERGY_CONSUMPTION.unit == "millijoules"
    assert dcgm.TOTAL_ENERGY_CONSUMPTION.type is MetricType.COUNTER
    assert dcgm.POWER_VIOLATION.unit == "nanoseconds"
    assert dcgm.SM_CLOCK.unit == "MHz"


def test_xid_fields() -> None:
    assert dcgm.XID_ERRORS.type is MetricType.GAUGE
    assert {"err_code", "err_msg"} <= set(dcgm.XID_ERRORS.labels)
    assert any("not a count" in t for t in dcgm.XID_ERRORS.traps)
    count = dcgm.EXP_XID_ERRORS_COUNT
    assert count.name == "DCGM_EXP_XID_ERRORS_COUNT"
    assert count.type is MetricType.GAUGE
    assert count.declared_type == "counter"
    assert {"xid", "window_size_in_ms"} <= set(count.labels)


@pytest.mark.parametrize(
    "family",
    [
        dcgm.PROF_SM_ACTIVE,
        dcgm.PROF_SM_OCCUPANCY,
        dcgm.PROF_PIPE_FP64_ACTIVE,
        dcgm.PROF_PIPE_FP32_ACTIVE,
        dcgm.PROF_PIPE_FP16_ACTIVE,
        dcgm.PROF_NVLINK_TX_BYTES,
        dcgm.PROF_NVLINK_RX_BYTES,
        dcgm.FB_TOTAL,
    ],
)
def test_off_by_default_fields_need_a_custom_csv(family: Family) -> None:
    assert family.condition is not None
    assert "custom counters CSV" in family.condition


@pytest.mark.parametrize(
    "family",
    [
        dcgm.PROF_GR_ENGINE_ACTIVE,
        dcgm.PROF_PIPE_TENSOR_ACTIVE,
        dcgm.PROF_DRAM_ACTIVE,
        dcgm.PROF_PCIE_TX_BYTES,
        dcgm.PROF_PCIE_RX_BYTES,
    ],
)
def test_shipped_profiling_fields_need_exporter_4(family: Family) -> None:
    assert family.condition is not None
    assert "4.0.0" in family.condition
    assert "dcp" in family.condition


def test_default_fields_are_unconditional() -> None:
    for family in (dcgm.GPU_UTIL, dcgm.FB_USED, dcgm.POWER_USAGE, dcgm.SM_CLOCK):
        assert family.condition is None


def test_sm_active_falls_back() -> None:
    assert any("GR_ENGINE_ACTIVE" in t for t in dcgm.PROF_SM_ACTIVE.traps)


# etc/1.x-compatibility-metrics.csv @ d5e5f51, its enabled lines, mapped by DCGM field id
# (go-dcgm pkg/dcgm/legacy_fields.csv) to the current field names.
ENABLED_1X = {
    "dcgm_sm_clock": "DCGM_FI_DEV_SM_CLOCK",
    "dcgm_memory_clock": "DCGM_FI_DEV_MEM_CLOCK",
    "dcgm_memory_temp": "DCGM_FI_DEV_MEMORY_TEMP",
    "dcgm_gpu_temp": "DCGM_FI_DEV_GPU_TEMP",
    "dcgm_power_usage": "DCGM_FI_DEV_POWER_USAGE",
    "dcgm_total_energy_consumption": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "dcgm_pcie_tx_throughput": "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
    "dcgm_pcie_rx_throughput": "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
    "dcgm_pcie_replay_counter": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "dcgm_gpu_utilization": "DCGM_FI_DEV_GPU_UTIL",
    "dcgm_mem_copy_utilization": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "dcgm_enc_utilization": "DCGM_FI_DEV_ENC_UTIL",
    "dcgm_dec_utilization": "DCGM_FI_DEV_DEC_UTIL",
    "dcgm_xid_errors": "DCGM_FI_DEV_XID_ERRORS",
    "dcgm_fb_free": "DCGM_FI_DEV_FB_FREE",
    "dcgm_fb_used": "DCGM_FI_DEV_FB_USED",
    "dcgm_nvlink_bandwidth_total": "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "dcgm_fi_prof_gr_engine_active": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "dcgm_fi_prof_pipe_tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "dcgm_fi_prof_dram_active": "DCGM_FI_PROF_DRAM_ACTIVE",
    "dcgm_fi_prof_pcie_tx_bytes": "DCGM_FI_PROF_PCIE_TX_BYTES",
    "dcgm_fi_prof_pcie_rx_bytes": "DCGM_FI_PROF_PCIE_RX_BYTES",
}
# The same CSV's commented-out lines: real names too, exported once a user enables them.
COMMENTED_1X = {
    "dcgm_fi_prof_sm_active": "DCGM_FI_PROF_SM_ACTIVE",
    "dcgm_fi_prof_sm_occupancy": "DCGM_FI_PROF_SM_OCCUPANCY",
    "dcgm_power_violation": "DCGM_FI_DEV_POWER_VIOLATION",
    "dcgm_thermal_violation": "DCGM_FI_DEV_THERMAL_VIOLATION",
    "dcgm_sync_boost_violation": "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
    "dcgm_board_limit_violation": "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
    "dcgm_low_util_violation": "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
    "dcgm_reliability_violation": "DCGM_FI_DEV_RELIABILITY_VIOLATION",
    "dcgm_ecc_sbe_volatile_total": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "dcgm_ecc_dbe_volatile_total": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "dcgm_ecc_sbe_aggregate_total": "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "dcgm_ecc_dbe_aggregate_total": "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "dcgm_nvlink_flit_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_data_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_replay_error_count_total": "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_recovery_error_count_total": "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
}


@pytest.mark.parametrize(("old", "current"), sorted({**ENABLED_1X, **COMMENTED_1X}.items()))
def test_every_1x_name_resolves_to_its_field(old: str, current: str) -> None:
    family = BY_NAME[old]
    assert family.name == current
    assert family.resolve({old}).name == old
    (alias,) = [a for a in family.aliases if a.name == old]
    assert "1.x compatibility CSV" in alias.versions
    assert ("commented out" in alias.versions) == (old in COMMENTED_1X)


def test_the_1x_csv_enables_22_names() -> None:
    assert len(ENABLED_1X) == 22
    legacy = {a.name for f in dcgm.FAMILIES for a in f.aliases if a.name.startswith("dcgm_")}
    assert legacy == set(ENABLED_1X) | set(COMMENTED_1X)


def test_nvml_pcie_throughput_is_flagged() -> None:
    for family in (dcgm.PCIE_TX_THROUGHPUT, dcgm.PCIE_RX_THROUGHPUT):
        assert family.declared_type is None
        assert family.type is MetricType.COUNTER
        assert family.unit == "KB"
        assert any("check that the series only grows" in trap for trap in family.traps)


def test_a_real_1x_scrape_resolves() -> None:
    # NVIDIA/dcgm-exporter#272: lowercase names with --use-old-namespace labels.
    text = Path(__file__).parents[1] / "fixtures" / "real" / "dcgm_1x_names_old_namespace.prom"
    names = {line.split("{")[0] for line in text.read_text().splitlines() if line}
    assert dcgm.PROF_GR_ENGINE_ACTIVE.resolve(names).name == "dcgm_fi_prof_gr_engine_active"
