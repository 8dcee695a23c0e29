"""Errors the series can show: the GPUs' last Xid codes and the Mooncake store's operations.

``DCGM_FI_DEV_XID_ERRORS`` holds the code of the last Xid error a GPU
reported (0: none since the exporter started), not a count. The Mooncake
store connector exports its operation latency and failed keys by operation.
None of them is always exported: a family without series is ``no_data``
naming it, never 0, and says that no series is not evidence of absence (an
exporter without the Xid field reports no Xid whatever the GPUs did).
"""

from __future__ import annotations

from functools import partial

from inference_obs.analyses.gpu import gpu_name, gpu_presence
from inference_obs.analyses.memory import NO_SERIES
from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.metrics import builders as b, dcgm, vllm
from inference_obs.query import last_over_time
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import counter_ratios_by, mean_ratio
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Labels

__all__ = ["ErrorsResult", "errors"]

XID_CODE = "The last Xid code a GPU reported (0: none), not a count of errors."
OPERATION_MEAN = "An operation mean, not waiting added to each request."
EXTRAPOLATED = "Prometheus increase(): an extrapolated estimate, not an audited count."


class ErrorsResult(AnalysisResult):
    """Error signals of one deployment over one window.

    Attributes
    ----------
    xid_last
        The largest last Xid code among the GPUs (code; 0: no GPU's last sample held one).
    xid_last_per_gpu
        Each GPU's last Xid code, by GPU name.
    mooncake_failed_keys
        Keys of Mooncake store operations that failed in the window (extrapolated).
    mooncake_operation_mean
        Exact mean Mooncake store operation latency per operation, seconds.
    """

    xid_last: Measurement
    xid_last_per_gpu: dict[str, Measurement]
    mooncake_failed_keys: Measurement
    mooncake_operation_mean: dict[str, Measurement]


def _xid(r: Reading) -> tuple[Measurement, dict[str, Measurement]]:
    matchers, w = r.deployment.gpu_matchers, r.seconds
    selector = dcgm.XID_ERRORS.select(matchers)
    overall = last_over_time(selector.over(w)).max()
    found = r.series(selector)
    if not found:
        return r.measure("xid_last", overall, "code", caveats=(XID_CODE, NO_SERIES)), {}
    ident = gpu_presence(r).ident
    by_gpu = b.last_value(dcgm.XID_ERRORS, matchers, w, ident)
    every, grouped = r.ask([overall, by_gpu])
    groups = {Labels({k: labels[k] for k in ident if k in labels}) for labels in found}
    wanted = {g: f"xid_last[{gpu_name(g)}]" for g in sorted(groups, key=gpu_name)}
    measured = r.measure_by(wanted, by_gpu, ident, "code", caveats=(XID_CODE,), answer=grouped)
    total = r.measure("xid_last", overall, "code", caveats=(XID_CODE,), answer=every)
    return total, {gpu_name(g): m for g, m in measured.items()}


def _mooncake(r: Reading) -> tuple[Measurement, dict[str, Measurement]]:
    family = vllm.MOONCAKE_STORE_OPERATION_TIME
    failed = r.measure(
        "mooncake_failed_keys",
        b.increase_total(vllm.MOONCAKE_STORE_OPERATION_FAILED_KEYS, r.matchers, r.seconds),
        "keys",
        caveats=(EXTRAPOLATED,),
    )
    if not failed.ok:
        failed = failed.model_copy(update={"caveats": (*failed.caveats, NO_SERIES)})
    found = r.series(family.select(r.matchers, "count"))
    operations = sorted({labels["operation"] for labels in found if "operation" in labels})
    if not operations:
        return failed, {}
    means = counter_ratios_by(
        r,
        mean_ratio(r, family, "mooncake_operation_mean", caveats=(OPERATION_MEAN,)),
        by=("operation",),
        groups=[Labels({"operation": op}) for op in operations],
        statistic=lambda g: f"mooncake_operation_mean[{g['operation']}]",
    )
    return failed, {g["operation"]: m for g, m in means.items()}


def _errors(r: Reading, settings: NoSettings) -> ErrorsResult:
    """Last Xid code per GPU (code) and Mooncake store failed keys (keys) and operation
    means (seconds) over the window; every query evaluated at the window's end."""
    mooncake = r.soon(partial(_mooncake, r))
    xid, per_gpu = _xid(r)
    failed, means = mooncake.result()
    return ErrorsResult(
        xid_last=xid,
        xid_last_per_gpu=per_gpu,
        mooncake_failed_keys=failed,
        mooncake_operation_mean=means,
    )


errors = Analysis(
    name="errors",
    title="Errors",
    entry=_errors,
    result=ErrorsResult,
    settings=NoSettings,
    summary="Last Xid code per GPU, Mooncake store failed keys and operation latency.",
)
