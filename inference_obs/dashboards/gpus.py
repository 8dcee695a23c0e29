"""The DCGM dashboard: GPU activity sample-weighted over every allocated GPU, memory, power, links.

Queries are the catalogue's standard DCGM queries (:mod:`inference_obs.metrics.dcgm_queries`):
means over every GPU's scrapes, zeros included, so a GPU that idles pulls the
line down instead of vanishing; gauges that are already rates are averaged.
NVML's utilisation (0-100) and the profiling ratios (0-1) have panels of
their own, each with its unit.
"""

from __future__ import annotations

from inference_obs.dashboards.model import WINDOW, Dashboard, Panel, Row, Target
from inference_obs.metrics.standard import standard_query
from inference_obs.query import Matcher

__all__ = ["dcgm_dashboard"]

_BY = ("modelName",)
_MATCHERS = (Matcher.regex("pod", "$pod"),)
_PER_MODEL = " {{modelName}}"


def _panel(title: str, unit: str, keys: tuple[tuple[str, str], ...], note: str = "") -> Panel:
    queries = [standard_query(key) for key, _ in keys]
    description = " ".join(
        dict.fromkeys([q.description for q in queries] + [c for q in queries for c in q.caveats])
    )
    return Panel(
        title,
        unit,
        f"{note} {description}".strip(),
        tuple(
            Target(q.expr(_MATCHERS, WINDOW, _BY), f"{legend}{_PER_MODEL}")
            for q, (_, legend) in zip(queries, keys, strict=True)
        ),
    )


def dcgm_dashboard() -> Dashboard:
    """The dcgm-exporter dashboard, filtered by the deployment's ``$pod``."""
    activity = Row(
        "GPU activity (sample-weighted over every allocated GPU)",
        (
            _panel(
                "GPU utilisation (NVML, 0-100)",
                "percent",
                (("dcgm_gpu_utilisation_percent", "utilisation"),),
            ),
            _panel(
                "Engine, SM, tensor and DRAM activity (profiling, 0-1)",
                "percentunit",
                (
                    ("dcgm_gr_engine_active_ratio", "graphics engine active"),
                    ("dcgm_sm_active_ratio", "SM active"),
                    ("dcgm_tensor_active_ratio", "tensor pipes active"),
                    ("dcgm_dram_active_ratio", "DRAM active"),
                ),
                "SM active needs a custom counters CSV; the others are in the default one.",
            ),
            _panel("Samples per GPU", "short", (("dcgm_gpu_samples", "samples"),)),
        ),
    )
    memory_power = Row(
        "Memory and power",
        (
            _panel(
                "Framebuffer memory",
                "mbytes",
                (
                    ("dcgm_framebuffer_used_mib", "used"),
                    ("dcgm_framebuffer_capacity_mib", "used + free"),
                ),
                "DCGM reports MiB; the panel unit is binary (MiB), not decimal MB.",
            ),
            _panel("Board power", "watt", (("dcgm_power_watts", "mean power"),)),
            _panel(
                "Energy per interval",
                "joule",
                (("dcgm_energy_joules", "energy"),),
                "Energy used in each $__rate_interval, from the total-energy counter.",
            ),
        ),
    )
    links = Row(
        "Links",
        (
            _panel(
                "PCIe throughput",
                "Bps",
                (
                    ("dcgm_pcie_tx_bytes_per_second", "to host"),
                    ("dcgm_pcie_rx_bytes_per_second", "from host"),
                ),
            ),
            _panel(
                "NVLink throughput",
                "MiBs",
                (("dcgm_nvlink_bandwidth_mib_per_second", "transmit + receive"),),
            ),
        ),
    )
    return Dashboard(
        uid="inference-obs-dcgm",
        title="GPUs, dcgm-exporter (inference-obs)",
        variable="pod",
        variable_query="label_values(DCGM_FI_DEV_GPU_UTIL, pod)",
        rows=(activity, memory_power, links),
        description="dcgm-exporter metrics of the GPUs allocated to the selected pods.",
    )
