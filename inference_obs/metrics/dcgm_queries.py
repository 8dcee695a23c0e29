"""Standard queries over DCGM families: GPU activity, memory, power, errors.

GPU means are sample-weighted over every GPU's scrapes, zeros included, and
GPUs that sent nothing are listed by a sample count rather than averaged away.
Gauges that are already rates are averaged, never ``rate()``-d.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics import builders as b, dcgm
from inference_obs.metrics.family import Family
from inference_obs.metrics.standard_query import Builder, By, Matchers, StandardQuery, times
from inference_obs.query import Expr, avg_over_time

__all__ = ["DCGM_QUERIES"]

_GPU_BY: By = ("modelName",)
# Per GPU: by both spellings of the node label (dcgm-exporter's Hostname; hostname where
# a newer exporter or a relabelling names it so). A series lacks the other spelling, and
# an absent label groups like an empty one, so grouping by both groups by whichever the
# data has; either would drop the other one's node from the answer.
_PER_GPU_BY: By = ("modelName", *dcgm.HOSTNAME_LABELS)


def _summed_gpu_mean(family: Family) -> Builder:
    """Mean over scrapes of each GPU, then summed across GPUs of a group."""

    def build(matchers: Matchers, window: float, by: By) -> Expr:
        means = avg_over_time(family.select(matchers).over(window))
        return means.sum(by=by) if by else means.sum()

    return build


def _framebuffer_capacity(matchers: Matchers, window: float, by: By) -> Expr:
    used = b.sample_mean(dcgm.FB_USED, matchers, window, by)
    free = b.sample_mean(dcgm.FB_FREE, matchers, window, by)
    return used + free


def _gpu_mean(key: str, family: Family, title: str, caveat: str) -> StandardQuery:
    return StandardQuery(
        key,
        title,
        family.unit,
        "Sample-weighted mean over every GPU's scrapes in the window, zeros included: "
        "sum(sum_over_time) / sum(count_over_time).",
        (caveat, "GPUs with no samples are absent from this mean: check dcgm_gpu_samples."),
        (family,),
        partial(b.sample_mean, family),
        _GPU_BY,
    )


def _activity_queries() -> list[StandardQuery]:
    """How busy the GPUs were, and how many samples each GPU sent."""
    return [
        _gpu_mean(
            "dcgm_gpu_utilisation_percent",
            dcgm.GPU_UTIL,
            "GPU utilisation, sample-weighted over allocated GPUs (0-100)",
            "Share of time a kernel was resident, not of compute used: 100 does not "
            "mean saturated.",
        ),
        StandardQuery(
            "dcgm_gpu_samples",
            "Utilisation samples per GPU in the window",
            "samples",
            "count_over_time of GPU_UTIL per GPU.",
            ("A GPU missing here reported nothing: no data, not zero.",),
            (dcgm.GPU_UTIL,),
            partial(b.sample_count, dcgm.GPU_UTIL),
            (*_PER_GPU_BY, "gpu"),
        ),
        _gpu_mean(
            "dcgm_dram_active_ratio",
            dcgm.PROF_DRAM_ACTIVE,
            "Memory-interface busy fraction (0-1)",
            "High DRAM activity with low tensor activity is the decode-bound signature.",
        ),
        _gpu_mean(
            "dcgm_tensor_active_ratio",
            dcgm.PROF_PIPE_TENSOR_ACTIVE,
            "Tensor-pipe active fraction (0-1)",
            "Low during single-token decode even when GPU_UTIL reads 100.",
        ),
        _gpu_mean(
            "dcgm_gr_engine_active_ratio",
            dcgm.PROF_GR_ENGINE_ACTIVE,
            "Graphics/compute engine active fraction (0-1)",
            "Fallback when SM_ACTIVE is not exported (it is off by default).",
        ),
        _gpu_mean(
            "dcgm_sm_active_ratio",
            dcgm.PROF_SM_ACTIVE,
            "SM active fraction (0-1)",
            "Exported only with a custom counters file.",
        ),
        _gpu_mean(
            "dcgm_sm_occupancy_ratio",
            dcgm.PROF_SM_OCCUPANCY,
            "SM occupancy (0-1)",
            "Exported only with a custom counters file.",
        ),
    ]


def _power_and_memory_queries() -> list[StandardQuery]:
    """Board power and energy, framebuffer use and capacity."""
    return [
        _gpu_mean(
            "dcgm_power_watts",
            dcgm.POWER_USAGE,
            "Mean board power (W)",
            "A measured board mean: not comparable with a rated board power, and "
            "excludes CPU, memory and network.",
        ),
        StandardQuery(
            "dcgm_energy_joules",
            "Board energy used in the window",
            "joules",
            "Increase of the total-energy counter (mJ) divided by 1000.",
            ("Resets when the driver reloads.",),
            (dcgm.TOTAL_ENERGY_CONSUMPTION,),
            times(partial(b.increase_total, dcgm.TOTAL_ENERGY_CONSUMPTION), 0.001),
            _GPU_BY,
        ),
        StandardQuery(
            "dcgm_framebuffer_used_mib",
            "Framebuffer used, summed over GPUs (MiB)",
            "MiB",
            "Per-group sum of FB_USED, averaged over scrapes.",
            ("Includes memory vLLM preallocates: near capacity whatever the load.",),
            (dcgm.FB_USED,),
            _summed_gpu_mean(dcgm.FB_USED),
            _GPU_BY,
        ),
        StandardQuery(
            "dcgm_framebuffer_capacity_mib",
            "Framebuffer per GPU reported by DCGM (used + free, MiB)",
            "MiB",
            "Mean FB_USED plus mean FB_FREE per GPU sample.",
            (
                "DCGM's reported capacity, not the product's rated memory; reserved memory "
                "is excluded.",
            ),
            (dcgm.FB_USED, dcgm.FB_FREE),
            _framebuffer_capacity,
            _GPU_BY,
        ),
    ]


def _interconnect_queries() -> list[StandardQuery]:
    """PCIe and NVLink traffic, from gauges that are already rates."""
    return [
        _gpu_mean(
            "dcgm_pcie_tx_bytes_per_second",
            dcgm.PROF_PCIE_TX_BYTES,
            "PCIe GPU-to-host traffic (bytes/s)",
            "Already a rate: never rate() it.",
        ),
        _gpu_mean(
            "dcgm_pcie_rx_bytes_per_second",
            dcgm.PROF_PCIE_RX_BYTES,
            "PCIe host-to-GPU traffic (bytes/s)",
            "Already a rate: never rate() it.",
        ),
        _gpu_mean(
            "dcgm_nvlink_bandwidth_mib_per_second",
            dcgm.NVLINK_BANDWIDTH_TOTAL,
            "NVLink traffic, all links (MiB/s)",
            "Declared a counter by the exporter but already a rate: never rate() it.",
        ),
    ]


def _error_queries() -> list[StandardQuery]:
    """XID errors the driver reported."""
    return [
        StandardQuery(
            "dcgm_last_xid",
            "Last XID error code per GPU",
            "code",
            "Newest DCGM_FI_DEV_XID_ERRORS sample per GPU.",
            ("No series is no data, not proof of no errors.",),
            (dcgm.XID_ERRORS,),
            lambda m, w, by: b.last_value(dcgm.XID_ERRORS, m, w, (*by, "gpu")),
            _PER_GPU_BY,
        ),
    ]


DCGM_QUERIES: tuple[StandardQuery, ...] = (
    *_activity_queries(),
    *_power_and_memory_queries(),
    *_interconnect_queries(),
    *_error_queries(),
)
