"""NVIDIA dcgm-exporter metric families, their label schemes and value conventions.

Fields, declared types, units, labels and history were read from dcgm-exporter
4.5.3-4.8.2 and older tags (``etc/*.csv``, ``internal/pkg``) and from the DCGM
4.6 field definitions (``dcgmlib/dcgm_fields.h``).

How dcgm-exporter exposes a field:

- the metric name is the DCGM field name as written in the counters CSV, with no
  prefix, unit or ``_total`` suffix, even for counters;
- the Prometheus type is what the CSV declares, which is not always the truth
  (``declared_type`` records the difference, ``already_rate`` marks rates);
- only the fields enabled in the CSV exist (``condition``: what a default install lacks);
- values are DCGM's latest cached sample, refreshed every
  :data:`DEFAULT_COLLECT_INTERVAL_SECONDS`.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics.family import Alias, Family, MetricType

GPU_LABELS: tuple[str, ...] = (
    *("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"),
    *("pod", "namespace", "container"),
)
"""Labels of GPU-entity series in a default Kubernetes install (exporter 4.x)."""
MIG_LABELS: tuple[str, ...] = ("GPU_I_PROFILE", "GPU_I_ID")
"""Extra labels on MIG-instance series, which share ``gpu``/``UUID`` with their parent."""
NVLINK_ENTITY_LABELS: tuple[str, ...] = (
    *("nvlink", "nvswitch"),
    *("gpu", "gpu_uuid", "pci_bus_id", "device", "model_name", "hostname"),
)
"""Labels of NVLink-entity series: a different scheme, never join it to GPU series on UUID."""

# Candidate spellings of one label across exporter versions and scrape setups, best first.
HOSTNAME_LABELS: tuple[str, ...] = ("Hostname", "hostname")
POD_LABELS: tuple[str, ...] = ("pod", "exported_pod", "pod_name")
NAMESPACE_LABELS: tuple[str, ...] = ("namespace", "exported_namespace", "pod_namespace")
CONTAINER_LABELS: tuple[str, ...] = ("container", "exported_container", "container_name")
UUID_LABELS: tuple[str, ...] = ("UUID", "uuid")
DISCOVERY_LABELS: tuple[str, ...] = (
    *(*HOSTNAME_LABELS, "gpu", *UUID_LABELS, *MIG_LABELS),
    *(*POD_LABELS, *NAMESPACE_LABELS, "modelName"),
)
"""What the analyses read of a GPU series' labels: which GPU, which replica, which model."""

SENTINEL_MIN = 9223372036854775792
"""Integer samples at or above this (0x7ffffffffffffff0) are DCGM blank values: missing."""
DEFAULT_COLLECT_INTERVAL_SECONDS = 30.0
"""Default sampling interval of dcgm-exporter (``-c``) since 2.2.9-2.4.1; 2 s before."""

_SAMPLING = (
    "Sampled every 30 s by default while scrapes are often every 15 s: use windows of 2 "
    "minutes or more, and expect repeated values."
)
_NO_TOTAL = "A counter without _total: the DCGM field name is the metric name."
_RATE = "Already a per-second rate: average it with avg_over_time(), never rate() it."
_PERCENT = "Percent 0-100, while the PROF_* ratios are 0-1: divide by 100 before comparing."
_OLD_PERCENT_HELP = "HELP texts before exporter 3.3.7-3.5.0 said '(in %)'; the values were 0-1."
_CUSTOM = "only with a custom counters CSV (commented out in the shipped ones)"
_PROF = "exporter >= 4.0.0 default CSV, or the dcp CSV"
_NOT_SHIPPED = "only with a custom counters CSV (absent from the shipped ones)"
_1X = "dcgm-exporter with the 1.x compatibility CSV"
_1X_OFF = "dcgm-exporter with the 1.x compatibility CSV, where the line is commented out"
_46 = "DCGM >= 4.6 field name (custom CSVs)"

# The 1.x names are go-dcgm's legacy field names (pkg/dcgm/legacy_fields.csv), each the
# same DCGM field id as the current name; etc/1.x-compatibility-metrics.csv enables 22.


def _legacy(name: str) -> Alias:
    """The lowercase 1.x name of a field the compatibility CSV enables."""
    return Alias(name, _1X, "Legacy lowercase name of the same field.")


def _legacy_off(name: str) -> Alias:
    """The lowercase 1.x name of a field the compatibility CSV lists commented out."""
    return Alias(name, _1X_OFF, "Legacy lowercase name of the same field.")


_gpu = partial(Family, exporter="dcgm", labels=GPU_LABELS)
_gauge = partial(_gpu, type=MetricType.GAUGE)
_counter = partial(_gpu, type=MetricType.COUNTER)
_percent = partial(_gauge, unit="percent", value_range=(0, 100))
_ratio = partial(_gauge, unit="ratio", value_range=(0, 1))

# ---------------------------------------------------------------------------
# Fields enabled in the shipped CSVs (exporter 4.5.3-4.8.2).
# ---------------------------------------------------------------------------

SM_CLOCK = _gauge(
    name="DCGM_FI_DEV_SM_CLOCK",
    unit="MHz",
    help="SM clock frequency.",
    aliases=(_legacy("dcgm_sm_clock"),),
)
MEM_CLOCK = _gauge(
    name="DCGM_FI_DEV_MEM_CLOCK",
    unit="MHz",
    help="Memory clock frequency.",
    aliases=(_legacy("dcgm_memory_clock"),),
)
GPU_TEMP = _gauge(
    name="DCGM_FI_DEV_GPU_TEMP",
    unit="celsius",
    help="GPU temperature.",
    aliases=(_legacy("dcgm_gpu_temp"),),
)
MEMORY_TEMP = _gauge(
    name="DCGM_FI_DEV_MEMORY_TEMP",
    unit="celsius",
    help="Memory temperature.",
    traps=(
        "Unsupported on many GPUs: current exporters then export no series.",
        "Old exporters leaked the DCGM blank sentinel (9223372036854775794): treat values "
        ">= SENTINEL_MIN as missing.",
    ),
    aliases=(_legacy("dcgm_memory_temp"),),
)
POWER_USAGE = _gauge(
    name="DCGM_FI_DEV_POWER_USAGE",
    unit="watts",
    help="Averaged board power draw.",
    aliases=(
        Alias(
            "DCGM_FI_DEV_BOARD_POWER_WATTS",
            _46,
            "DCGM 4.6 keeps POWER_USAGE as an alias of this field.",
        ),
        _legacy("dcgm_power_usage"),
    ),
    traps=("For energy over a window use TOTAL_ENERGY_CONSUMPTION, not a mean of samples.",),
)
TOTAL_ENERGY_CONSUMPTION = _counter(
    name="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    unit="millijoules",
    help="Energy used since the driver was (re)loaded.",
    traps=(
        "Millijoules: mean watts over a window is rate(...) / 1000.",
        "Resets when the driver reloads.",
        _NO_TOTAL,
        _SAMPLING,
    ),
    aliases=(_legacy("dcgm_total_energy_consumption"),),
)
_NVML_PCIE = (
    "Declared a counter of KB, but DCGM calls it PCIe utilization information and "
    "deprecates it for PROF_PCIE_*_BYTES (bytes/s): check that the series only grows before rate()."
)
_NVML_PCIE_CONDITION = (
    "the default CSV before exporter 3.3.7-3.5.0, the 1.x compatibility CSV, or a custom CSV"
)
PCIE_TX_THROUGHPUT = _counter(
    name="DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
    unit="KB",
    help="PCIe transmit traffic read from NVML, as the CSV declares it (in KB).",
    aliases=(_legacy("dcgm_pcie_tx_throughput"),),
    condition=_NVML_PCIE_CONDITION,
    traps=(_NVML_PCIE, _NO_TOTAL),
)
PCIE_RX_THROUGHPUT = _counter(
    name="DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
    unit="KB",
    help="PCIe receive traffic read from NVML, as the CSV declares it (in KB).",
    aliases=(_legacy("dcgm_pcie_rx_throughput"),),
    condition=_NVML_PCIE_CONDITION,
    traps=(_NVML_PCIE, _NO_TOTAL),
)
PCIE_REPLAY_COUNTER = _counter(
    name="DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    unit="retries",
    help="PCIe replay (retry) events.",
    traps=(_NO_TOTAL, _SAMPLING),
    aliases=(_legacy("dcgm_pcie_replay_counter"),),
)
GPU_UTIL = _percent(
    name="DCGM_FI_DEV_GPU_UTIL",
    help="Share of time a kernel was running, over a product-dependent NVML sample period.",
    aliases=(
        Alias(
            "DCGM_FI_DEV_GPU_UTIL_RATIO",
            _46,
            "Renamed field; the value stays 0-100 despite the _RATIO suffix.",
        ),
        _legacy("dcgm_gpu_utilization"),
    ),
    since="dcgm-exporter 2.2.9-2.4.1 (enabled by default)",
    traps=(
        "Coarse: 100 % means some kernel ran all the time, not that the SMs were saturated.",
        _PERCENT,
        _SAMPLING,
    ),
)
MEM_COPY_UTIL = _percent(
    name="DCGM_FI_DEV_MEM_COPY_UTIL",
    help="Share of time the memory controller was busy.",
    traps=("Memory bandwidth activity, not memory capacity used.", _PERCENT),
    aliases=(_legacy("dcgm_mem_copy_utilization"),),
)
ENC_UTIL = _percent(
    name="DCGM_FI_DEV_ENC_UTIL",
    help="Video encoder utilisation.",
    traps=(_PERCENT,),
    aliases=(_legacy("dcgm_enc_utilization"),),
)
DEC_UTIL = _percent(
    name="DCGM_FI_DEV_DEC_UTIL",
    help="Video decoder utilisation.",
    traps=(_PERCENT,),
    aliases=(_legacy("dcgm_dec_utilization"),),
)
XID_ERRORS = _gauge(
    name="DCGM_FI_DEV_XID_ERRORS",
    unit="code",
    help="Code of the last XID error; err_code repeats it and err_msg describes it.",
    labels=(*GPU_LABELS, "err_code", "err_msg"),
    traps=(
        "The value is the last XID code, not a count: use DCGM_EXP_XID_ERRORS_COUNT or "
        "changes() to count errors.",
        "err_msg exists from exporter 3.3.6-3.4.2.",
    ),
    aliases=(_legacy("dcgm_xid_errors"),),
)
FB_FREE = _gauge(
    name="DCGM_FI_DEV_FB_FREE",
    unit="MiB",
    help="Free framebuffer (GPU) memory.",
    traps=("HELP said MB before exporter 4.0.0; the values were always MiB.",),
    aliases=(_legacy("dcgm_fb_free"),),
)
FB_USED = _gauge(
    name="DCGM_FI_DEV_FB_USED",
    unit="MiB",
    help="Used framebuffer (GPU) memory.",
    traps=(
        "Includes what vLLM preallocates (gpu_memory_utilization): expect about 90 % used "
        "whatever the load.",
        "Memory fraction is FB_USED / (FB_USED + FB_FREE + FB_RESERVED where present).",
    ),
    aliases=(_legacy("dcgm_fb_used"),),
)
FB_RESERVED = _gauge(
    name="DCGM_FI_DEV_FB_RESERVED",
    unit="MiB",
    help="Framebuffer memory reserved by the driver.",
    since="dcgm-exporter 4.3.1-4.4.0",
)
NVLINK_BANDWIDTH_TOTAL = _gauge(
    name="DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    unit="MiB_per_second",
    help="NVLink throughput, transmit plus receive over all links.",
    aliases=(
        Alias(
            "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL",
            _46,
            "DCGM 4.6 keeps NVLINK_BANDWIDTH_TOTAL as an alias of this field.",
        ),
        _legacy("dcgm_nvlink_bandwidth_total"),
    ),
    already_rate=True,
    declared_type="counter",
    traps=(
        "Declared a counter, but DCGM already divides by the sampling interval: it is a rate "
        "in about MiB/s.",
        _RATE,
    ),
)
VGPU_LICENSE_STATUS = _gauge(
    name="DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    unit="enum",
    help="vGPU licence state code.",
    condition="vGPU only",
)
UNCORRECTABLE_REMAPPED_ROWS = _counter(
    name="DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    unit="rows",
    help="Memory rows remapped because of uncorrectable errors.",
    traps=(_NO_TOTAL,),
)
CORRECTABLE_REMAPPED_ROWS = _counter(
    name="DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    unit="rows",
    help="Memory rows remapped because of correctable errors.",
    traps=(_NO_TOTAL,),
)
ROW_REMAP_FAILURE = _gauge(
    name="DCGM_FI_DEV_ROW_REMAP_FAILURE",
    unit="boolean",
    help="1 when a memory row remapping has failed.",
    value_range=(0, 1),
)
PROF_GR_ENGINE_ACTIVE = _ratio(
    name="DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    help="Fraction of time a graphics or compute context was active.",
    aliases=(
        Alias("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", _46, "Renamed field, same 0-1 ratio."),
        _legacy("dcgm_fi_prof_gr_engine_active"),
    ),
    condition=_PROF,
    traps=(
        "Busy time, not SM saturation: PROF_SM_ACTIVE is finer where a custom CSV enables it.",
        _OLD_PERCENT_HELP,
    ),
)
PROF_PIPE_TENSOR_ACTIVE = _ratio(
    name="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    help="Fraction of cycles any tensor pipe was active.",
    aliases=(
        Alias("DCGM_FI_PROF_TENSOR_UTIL_RATIO", _46, "Renamed field, same 0-1 ratio."),
        _legacy("dcgm_fi_prof_pipe_tensor_active"),
    ),
    condition=_PROF,
    traps=(_OLD_PERCENT_HELP,),
)
PROF_DRAM_ACTIVE = _ratio(
    name="DCGM_FI_PROF_DRAM_ACTIVE",
    help="Fraction of cycles the memory interface was busy (a bandwidth-use proxy).",
    aliases=(
        Alias("DCGM_FI_PROF_DRAM_UTIL_RATIO", _46, "Renamed field, same 0-1 ratio."),
        _legacy("dcgm_fi_prof_dram_active"),
    ),
    condition=_PROF,
    traps=(_OLD_PERCENT_HELP,),
)
_PCIE_DECLARED = (
    "Declared a counter in the dcp CSV before exporter 2.4.6-2.6.10 and in the default CSV "
    "from 3.3.7-3.5.0 until 4.0.0; a rate in every version."
)
PROF_PCIE_TX_BYTES = _gauge(
    name="DCGM_FI_PROF_PCIE_TX_BYTES",
    unit="bytes_per_second",
    help="PCIe data rate from the GPU to the host, headers included.",
    already_rate=True,
    condition=_PROF,
    traps=(_PCIE_DECLARED, _RATE),
    aliases=(_legacy("dcgm_fi_prof_pcie_tx_bytes"),),
)
PROF_PCIE_RX_BYTES = _gauge(
    name="DCGM_FI_PROF_PCIE_RX_BYTES",
    unit="bytes_per_second",
    help="PCIe data rate from the host to the GPU, headers included.",
    already_rate=True,
    condition=_PROF,
    traps=(_PCIE_DECLARED, _RATE),
    aliases=(_legacy("dcgm_fi_prof_pcie_rx_bytes"),),
)

# ---------------------------------------------------------------------------
# Fields off by default: need a custom counters CSV.
# ---------------------------------------------------------------------------

FB_TOTAL = _gauge(
    name="DCGM_FI_DEV_FB_TOTAL",
    unit="MiB",
    help="Total framebuffer memory.",
    condition=_CUSTOM,
    traps=("Not exported by default: FB_FREE + FB_USED + FB_RESERVED approximates it.",),
)
_FALLBACK = (
    "Absent from default installs of every release: fall back to PROF_GR_ENGINE_ACTIVE, "
    "then GPU_UTIL."
)
PROF_SM_ACTIVE = _ratio(
    name="DCGM_FI_PROF_SM_ACTIVE",
    help="Fraction of cycles an SM had at least one warp assigned, averaged over SMs.",
    condition=_CUSTOM,
    traps=(_FALLBACK,),
    aliases=(_legacy_off("dcgm_fi_prof_sm_active"),),
)
PROF_SM_OCCUPANCY = _ratio(
    name="DCGM_FI_PROF_SM_OCCUPANCY",
    help="Resident warps relative to the maximum an SM can hold, averaged over SMs.",
    condition=_CUSTOM,
    traps=(_FALLBACK,),
    aliases=(_legacy_off("dcgm_fi_prof_sm_occupancy"),),
)
PROF_PIPE_FP64_ACTIVE = _ratio(
    name="DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    help="Fraction of cycles the FP64 pipe was active.",
    condition=_CUSTOM,
)
PROF_PIPE_FP32_ACTIVE = _ratio(
    name="DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    help="Fraction of cycles the FP32 pipe was active.",
    condition=_CUSTOM,
)
PROF_PIPE_FP16_ACTIVE = _ratio(
    name="DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    help="Fraction of cycles the FP16 pipe was active.",
    condition=_CUSTOM,
)
PROF_PIPE_TENSOR_HMMA_ACTIVE = _ratio(
    name="DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE",
    help="Fraction of cycles the half-precision tensor (HMMA) pipe was active.",
    condition=_NOT_SHIPPED,
)
PROF_PIPE_TENSOR_IMMA_ACTIVE = _ratio(
    name="DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE",
    help="Fraction of cycles the integer tensor (IMMA) pipe was active.",
    condition=_NOT_SHIPPED,
)
PROF_PIPE_TENSOR_DFMA_ACTIVE = _ratio(
    name="DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE",
    help="Fraction of cycles the FP64 tensor (DFMA) pipe was active.",
    condition=_NOT_SHIPPED,
)
PROF_PIPE_INT_ACTIVE = _ratio(
    name="DCGM_FI_PROF_PIPE_INT_ACTIVE",
    help="Fraction of cycles the integer pipe was active.",
    condition=_NOT_SHIPPED,
)
PROF_NVLINK_TX_BYTES = _gauge(
    name="DCGM_FI_PROF_NVLINK_TX_BYTES",
    unit="bytes_per_second",
    help="NVLink transmit data rate over all links, headers included.",
    already_rate=True,
    condition=_NOT_SHIPPED,
    traps=(_RATE,),
)
PROF_NVLINK_RX_BYTES = _gauge(
    name="DCGM_FI_PROF_NVLINK_RX_BYTES",
    unit="bytes_per_second",
    help="NVLink receive data rate over all links, headers included.",
    already_rate=True,
    condition=_NOT_SHIPPED,
    traps=(_RATE,),
)
_NS = "Nanoseconds: HELP said microseconds until exporter 4.4.2-4.7.1."
_violation = partial(_counter, unit="nanoseconds", condition=_CUSTOM, traps=(_NS, _NO_TOTAL))
POWER_VIOLATION = _violation(
    name="DCGM_FI_DEV_POWER_VIOLATION",
    help="Cumulative time the clocks were held back by the power limit.",
    aliases=(_legacy_off("dcgm_power_violation"),),
)
THERMAL_VIOLATION = _violation(
    name="DCGM_FI_DEV_THERMAL_VIOLATION",
    help="Cumulative time the clocks were held back by thermal limits.",
    aliases=(_legacy_off("dcgm_thermal_violation"),),
)
SYNC_BOOST_VIOLATION = _violation(
    name="DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
    help="Cumulative time the clocks were held back by sync boost.",
    aliases=(_legacy_off("dcgm_sync_boost_violation"),),
)
BOARD_LIMIT_VIOLATION = _violation(
    name="DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
    help="Cumulative time the clocks were held back by the board limit.",
    aliases=(_legacy_off("dcgm_board_limit_violation"),),
)
LOW_UTIL_VIOLATION = _violation(
    name="DCGM_FI_DEV_LOW_UTIL_VIOLATION",
    help="Cumulative time the clocks were held back because of low utilisation.",
    aliases=(_legacy_off("dcgm_low_util_violation"),),
)
RELIABILITY_VIOLATION = _violation(
    name="DCGM_FI_DEV_RELIABILITY_VIOLATION",
    help="Cumulative time the clocks were held back by reliability limits.",
    aliases=(_legacy_off("dcgm_reliability_violation"),),
)
_errors = partial(_counter, unit="errors", condition=_CUSTOM, traps=(_NO_TOTAL,))
ECC_SBE_VOL_TOTAL = _errors(
    name="DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    help="Single-bit ECC errors since the driver was loaded.",
    aliases=(_legacy_off("dcgm_ecc_sbe_volatile_total"),),
)
ECC_DBE_VOL_TOTAL = _errors(
    name="DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    help="Double-bit ECC errors since the driver was loaded.",
    aliases=(_legacy_off("dcgm_ecc_dbe_volatile_total"),),
)
ECC_SBE_AGG_TOTAL = _errors(
    name="DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    help="Single-bit ECC errors over the GPU's lifetime.",
    aliases=(_legacy_off("dcgm_ecc_sbe_aggregate_total"),),
)
ECC_DBE_AGG_TOTAL = _errors(
    name="DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    help="Double-bit ECC errors over the GPU's lifetime.",
    aliases=(_legacy_off("dcgm_ecc_dbe_aggregate_total"),),
)
NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL = _errors(
    name="DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    help="NVLink flow-control CRC errors, all links.",
    aliases=(_legacy_off("dcgm_nvlink_flit_crc_error_count_total"),),
)
NVLINK_CRC_DATA_ERROR_COUNT_TOTAL = _errors(
    name="DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    help="NVLink data CRC errors, all links.",
    aliases=(_legacy_off("dcgm_nvlink_data_crc_error_count_total"),),
)
NVLINK_REPLAY_ERROR_COUNT_TOTAL = _errors(
    name="DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    help="NVLink replay errors, all links.",
    aliases=(_legacy_off("dcgm_nvlink_replay_error_count_total"),),
)
NVLINK_RECOVERY_ERROR_COUNT_TOTAL = _errors(
    name="DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    help="NVLink recovery errors, all links.",
    aliases=(_legacy_off("dcgm_nvlink_recovery_error_count_total"),),
)

# ---------------------------------------------------------------------------
# Exporter-computed windowed counts (DCGM_EXP_*), off by default.
# ---------------------------------------------------------------------------

_WINDOWED = (
    "Declared a counter but it is a count over the last window (window_size_in_ms, default "
    "300000): not monotonic, read it as a gauge."
)
EXP_XID_ERRORS_COUNT = _gauge(
    name="DCGM_EXP_XID_ERRORS_COUNT",
    unit="events",
    help="XID errors of each code (label xid) in the last window.",
    labels=(*GPU_LABELS, "xid", "window_size_in_ms"),
    declared_type="counter",
    since="dcgm-exporter 3.3.5-3.4.0",
    condition=_CUSTOM,
    traps=(_WINDOWED,),
)
EXP_CLOCK_EVENTS_COUNT = _gauge(
    name="DCGM_EXP_CLOCK_EVENTS_COUNT",
    unit="events",
    help="Clock events (throttle reasons, label clock_event) in the last window.",
    labels=(*GPU_LABELS, "clock_event", "window_size_in_ms"),
    declared_type="counter",
    aliases=(
        Alias(
            "DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT",
            "dcgm-exporter development builds of early 2024",
            "Earlier name of the same windowed count.",
        ),
    ),
    since="dcgm-exporter 3.3.5-3.4.0",
    condition=_CUSTOM,
    traps=(_WINDOWED,),
)

FAMILIES: tuple[Family, ...] = (
    SM_CLOCK,
    MEM_CLOCK,
    GPU_TEMP,
    MEMORY_TEMP,
    POWER_USAGE,
    TOTAL_ENERGY_CONSUMPTION,
    PCIE_TX_THROUGHPUT,
    PCIE_RX_THROUGHPUT,
    PCIE_REPLAY_COUNTER,
    GPU_UTIL,
    MEM_COPY_UTIL,
    ENC_UTIL,
    DEC_UTIL,
    XID_ERRORS,
    FB_FREE,
    FB_USED,
    FB_RESERVED,
    NVLINK_BANDWIDTH_TOTAL,
    VGPU_LICENSE_STATUS,
    UNCORRECTABLE_REMAPPED_ROWS,
    CORRECTABLE_REMAPPED_ROWS,
    ROW_REMAP_FAILURE,
    PROF_GR_ENGINE_ACTIVE,
    PROF_PIPE_TENSOR_ACTIVE,
    PROF_DRAM_ACTIVE,
    PROF_PCIE_TX_BYTES,
    PROF_PCIE_RX_BYTES,
    FB_TOTAL,
    PROF_SM_ACTIVE,
    PROF_SM_OCCUPANCY,
    PROF_PIPE_FP64_ACTIVE,
    PROF_PIPE_FP32_ACTIVE,
    PROF_PIPE_FP16_ACTIVE,
    PROF_PIPE_TENSOR_HMMA_ACTIVE,
    PROF_PIPE_TENSOR_IMMA_ACTIVE,
    PROF_PIPE_TENSOR_DFMA_ACTIVE,
    PROF_PIPE_INT_ACTIVE,
    PROF_NVLINK_TX_BYTES,
    PROF_NVLINK_RX_BYTES,
    POWER_VIOLATION,
    THERMAL_VIOLATION,
    SYNC_BOOST_VIOLATION,
    BOARD_LIMIT_VIOLATION,
    LOW_UTIL_VIOLATION,
    RELIABILITY_VIOLATION,
    ECC_SBE_VOL_TOTAL,
    ECC_DBE_VOL_TOTAL,
    ECC_SBE_AGG_TOTAL,
    ECC_DBE_AGG_TOTAL,
    NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
    NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
    NVLINK_REPLAY_ERROR_COUNT_TOTAL,
    NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
    EXP_XID_ERRORS_COUNT,
    EXP_CLOCK_EVENTS_COUNT,
)
"""Every dcgm-exporter family of the catalogue."""
