"""The finding codes: a stable identifier, a severity, and what each means and how to fix it.

Severities say what happens to the number on the screen:

- ``error``: the number is wrong (a lifetime total shown as a rate, an average
  of quantiles, a unit off by a factor of 100, a family the engine no longer
  exports);
- ``warning``: it misleads in common set-ups (one line per replica where a
  deployment was meant, a mean over unequal pools, a variable no panel reads);
- ``info``: worth knowing, not wrong (a router's view of an engine quantity).

Codes never change meaning; retired codes are not reused. The code reference
of ``docs/lint.md`` is :func:`codes_markdown`'s output (a test keeps it current).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["CODES", "Code", "Severity", "code", "codes_markdown"]


class Severity(StrEnum):
    """How bad a finding is; the order is the exit-status order."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Code:
    """One kind of finding.

    Attributes
    ----------
    id
        Stable identifier, ``OBS`` and three digits.
    name
        Short kebab-case name.
    severity
        Severity of every finding with this code.
    title
        One line: what is wrong.
    explanation
        One paragraph in plain words: why the number is wrong or misleading.
    fix
        How to fix it, in words (findings carry the corrected expression).
    """

    id: str
    name: str
    severity: Severity
    title: str
    explanation: str
    fix: str


E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

CODES: tuple[Code, ...] = (
    Code(
        "OBS001",
        "unparsable",
        W,
        "The expression could not be read, so it was not checked",
        "The text is not PromQL this checker reads (a syntax error, a VictoriaMetrics "
        "MetricsQL extension, a Grafana macro it does not know), or the expression tree "
        "refuses it (rate() of an instant vector), or it is past lint's limits (longer "
        "than 256 KiB, nested more than 100 levels deep). Nothing else was checked in it.",
        "Correct the syntax; if the text is valid where it runs, check it by hand.",
    ),
    Code(
        "OBS002",
        "library-panel-not-read",
        W,
        "A library panel's queries are not in the file, so they were not checked",
        "The panel refers to a Grafana library panel (libraryPanel) whose model, queries "
        "included, Grafana keeps apart from the dashboard; this file holds only the "
        "reference. The panel draws numbers on the dashboard, and none of them was checked.",
        "Export the dashboard for sharing externally, which inlines library panels under "
        "__elements, or lint the library panel's own JSON model.",
    ),
    Code(
        "OBS101",
        "quantile-per-series",
        W,
        "histogram_quantile over buckets not summed by (le)",
        "Without an aggregation inside histogram_quantile, Prometheus estimates one quantile "
        "per bucket series: per replica, per engine, per pod. A deployment is drawn as N "
        "lines, and whoever wants one number averages them, which is not a quantile of "
        "anything. Quantiles across replicas come from buckets added first.",
        "Sum the bucket rates by le (and any label you want one line per), then take the "
        "quantile: histogram_quantile(q, sum by (le) (rate(x_bucket[w]))).",
    ),
    Code(
        "OBS102",
        "quantile-le-dropped",
        E,
        "histogram_quantile over an aggregation that drops the le label",
        "histogram_quantile needs the le label of each bucket. An aggregation inside it "
        "that does not keep le (sum without by, or by labels without le) merges all buckets "
        "into one series without le, and the result is empty: the panel shows no data or "
        "the alert never fires.",
        "Keep le in the grouping: sum by (le, ...) (rate(x_bucket[w])).",
    ),
    Code(
        "OBS103",
        "quantile-averaged",
        E,
        "Quantiles averaged, summed or added",
        "The average of per-replica p99s is not the p99 of the deployment, the average over "
        "time of a p99 is not the p99 of the period, and the sum of two p99s is not the p99 "
        "of the sum. Quantiles do not add or average; the result can be far from any real "
        "latency, in either direction.",
        "Merge the buckets instead: sum by (le) across replicas, and increase over the "
        "whole period for a period's quantile.",
    ),
    Code(
        "OBS104",
        "quantile-not-buckets",
        E,
        "histogram_quantile over series that are not histogram buckets",
        "histogram_quantile reads cumulative _bucket series with an le label. Over _sum, "
        "_count or a counter or gauge it returns nothing, or a number with no meaning.",
        "Select the family's _bucket series.",
    ),
    Code(
        "OBS201",
        "counter-without-rate",
        E,
        "A counter used without rate() or increase()",
        "Counters (_total, and a histogram's _sum, _count and _bucket) hold totals since the "
        "process started. Shown, added, averaged or compared as they are, they are lifetime "
        "numbers that depend on when each replica last restarted, and a ratio of two of "
        "them is a lifetime average, not the current one.",
        "Take rate() or increase() of each series over a window first, then aggregate.",
    ),
    Code(
        "OBS202",
        "sum-without-count",
        E,
        "rate() of a histogram's _sum shown without its _count",
        "rate(x_seconds_sum) is the seconds of observed time accrued per second: it grows "
        "with traffic, and with two requests in flight it reads 2 s per second. Shown as a "
        "time, it is not the time of a request.",
        "Divide by the rate of the same histogram's _count: sum(rate(x_sum[w])) / "
        "sum(rate(x_count[w])) is the mean per observation.",
    ),
    Code(
        "OBS203",
        "count-as-sum-unit",
        E,
        "rate() of a histogram's _count presented in the unit of its observations",
        "A histogram's _count counts observations, not their size: rate() of "
        "vllm:iteration_tokens_total_count is engine steps per second and rate() of "
        "request_prompt_tokens_count is requests per second. Labelled as tokens, the number "
        "is wrong by the mean size of an observation.",
        "For tokens per second use rate() of the _sum; for a mean size divide the _sum "
        "by the _count.",
    ),
    Code(
        "OBS204",
        "counter-delta",
        W,
        "delta(), idelta() or deriv() of a counter",
        "These functions are for gauges: they do not correct for counter resets, so a "
        "restart shows as a large negative change.",
        "Use increase() or rate(), which handle resets.",
    ),
    Code(
        "OBS301",
        "mean-per-series",
        W,
        "A per-series mean never summed across replicas",
        "rate(x_sum) / rate(x_count) without aggregation is one mean per series: per "
        "engine, per replica, per pod. A deployment is drawn as N lines, and their average "
        "is not the deployment's mean because replicas serve different numbers of requests.",
        "Sum each side before dividing: sum(rate(x_sum[w])) / sum(rate(x_count[w])), by any "
        "label you want one line per.",
    ),
    Code(
        "OBS302",
        "mean-of-means",
        W,
        "An average (or sum) of per-series means",
        "avg() of per-replica means weighs a replica that served ten requests like one that "
        "served ten thousand; avg_over_time() of a mean weighs quiet minutes like busy ones. "
        "The result is not the mean of the requests.",
        "Sum the _sum and the _count separately and divide once.",
    ),
    Code(
        "OBS303",
        "pool-average",
        W,
        "An average of usage or hit-rate ratios of unequal pools",
        "avg() of KV-cache usage fractions treats a 10,000-block engine like a "
        "100,000-block one; avg() of hit rates precomputed by the engine treats an idle "
        "engine like a busy one. The average is not the usage of the deployment's pool nor "
        "its hit rate.",
        "For pressure show the fullest engine (max); for a hit rate divide the summed hit "
        "counter by the summed query counter; for usage weigh by pool size.",
    ),
    Code(
        "OBS304",
        "rate-of-gauge",
        E,
        "rate() or increase() of a gauge",
        "A gauge's value goes up and down; rate() treats every decrease as a counter reset "
        "and adds the whole new value, so the result is a number with no meaning.",
        "Show the gauge, or its avg_over_time/max_over_time over a window; use deriv() for "
        "its trend.",
    ),
    Code(
        "OBS305",
        "rate-of-rate",
        E,
        "rate() or increase() of a value that is already a rate",
        "Some gauges are already per-second rates (DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, "
        "DCGM_FI_PROF_PCIE_TX_BYTES and _RX_BYTES, SGLang's gen_throughput), although some "
        "exporters declare them counters. rate() of them is meaningless.",
        "Average the samples: avg_over_time(x[w]), or sum_over_time/count_over_time across GPUs.",
    ),
    Code(
        "OBS306",
        "ratio-matchers-differ",
        W,
        "Numerator and denominator select different series",
        "A ratio whose numerator and denominator carry different label matchers divides one "
        "scope by another: hits of one model by queries of all models, the errors of one "
        "job by the requests of every job. The ratio is not the share it is labelled as.",
        "Give both sides the same matchers (and the same grouping).",
    ),
    Code(
        "OBS307",
        "scales-mixed",
        E,
        "A 0-1 ratio and a 0-100 percentage combined",
        "DCGM reports its profiling fields (DCGM_FI_PROF_*) as 0-1 ratios and its device "
        "utilisation fields (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_MEM_COPY_UTIL) as 0-100 "
        "percentages. Joined with 'or' (one field where the other is missing) or added, and "
        "the result multiplied by 100, the GPUs read through the percentage field show up "
        "to 10,000 %; without the factor, the others show at most 1 %.",
        "Bring both sides to one scale before combining them: (x_ratio * 100) or x_percent.",
    ),
    Code(
        "OBS308",
        "steps-as-share",
        E,
        "Engine steps per second used as a share of time",
        "rate(vllm:iteration_tokens_total_count[w]) is the engine's steps per second, tens "
        "to hundreds on a busy engine; it is not a fraction of time, so 1 minus it is not "
        "the idle share. '> 0' keeps only the pods that stepped, dropping exactly the idle "
        "ones, and clamp_max(..., 1) says only whether at least one step a second was taken.",
        "vLLM does not export its busy time. A share of time with nothing to do is "
        "avg_over_time((vllm:num_requests_running == bool 0)[w:]) (the share of samples "
        "with no running request); GPU busy time is DCGM_FI_PROF_GR_ENGINE_ACTIVE.",
    ),
    Code(
        "OBS309",
        "label-not-exported",
        W,
        "Grouped by a label the exporter does not attach",
        "dcgm-exporter names the node in its Hostname label; its series carry no node label "
        "unless the scrape configuration adds one. Grouped by a label the series lack, every "
        "GPU falls into one group with an empty label: an alert 'on node {{ $labels.node }}' "
        "averages the whole cluster and names no node.",
        "Group by the exporter's label (Hostname for the node), or add the label with a "
        "relabelling rule and keep it in the catalogue's sense.",
    ),
    Code(
        "OBS310",
        "series-count-as-pods",
        W,
        "A count of engine series presented as a count of pods",
        "count() over an engine family counts its series: one per engine and model (vLLM's "
        "engine label with data parallelism or several API servers, one series per served "
        "model or LoRA adapter), not one per pod. A pod with two engines counts twice.",
        "Count the pods: count by (...) (count by (..., pod) (x)).",
    ),
    Code(
        "OBS311",
        "ratio-alert-unguarded",
        W,
        "An alert on a ratio whose denominator can be zero on its own",
        "When the denominator's series are idle (no running requests on the decode pods) "
        "and the numerator's are not, the ratio is +Inf and an alert 'ratio > k' fires on an "
        "idle deployment; 0/0 is NaN and never fires. Numerator and denominator of different "
        "pools or gauges are zero independently.",
        "Guard the denominator: (a / b) > k and b > 0, or divide by clamp_min(b, 1) where "
        "the count is whole.",
    ),
    Code(
        "OBS401",
        "family-removed",
        E,
        "A family the engine version in use no longer exports",
        "The engine removed or renamed the family: the panel shows no data, or only the "
        "replicas still running an old version, and an alert on it never fires.",
        "Use the current name (the finding gives it), or a query that reads both names "
        "with 'or' during an upgrade.",
    ),
    Code(
        "OBS402",
        "family-hidden",
        W,
        "A deprecated family the engine version in use hides by default",
        "vLLM hides a deprecated family one release before removing it; it comes back only "
        "with --show-hidden-metrics-for-version. Without the flag the panel shows no data.",
        "Use the current name (the finding gives it).",
    ),
    Code(
        "OBS403",
        "family-renamed",
        INFO,
        "A deprecated family name, still exported by the version in use",
        "The name still works but will be hidden and then removed in later releases.",
        "Move to the current name (the finding gives it) before upgrading.",
    ),
    Code(
        "OBS404",
        "family-too-new",
        E,
        "A family the engine version in use does not export yet",
        "The family appeared in a later release than the one given with --vllm-version or "
        "--sglang-version: the panel shows no data.",
        "Upgrade, or use the older family the finding names.",
    ),
    Code(
        "OBS405",
        "histogram-base-name",
        E,
        "A histogram selected by its base name",
        "A histogram is exposed as _bucket, _sum and _count series; its base name selects nothing.",
        "Select _bucket for quantiles, or _sum and _count for a mean.",
    ),
    Code(
        "OBS406",
        "router-family",
        INFO,
        "A router family under the engine's prefix",
        "The vLLM production-stack router exports vllm:-prefixed families of its own, with a "
        "server label: averages over the router's sliding window and copies of engine "
        "values, some ending in _total although they are gauges. They are the router's view, "
        "not the engine's statistics.",
        "Read the engine's own family where the engine's number is meant.",
    ),
    Code(
        "OBS407",
        "unknown-engine-family",
        INFO,
        "A name under an engine prefix that the catalogue does not know",
        "The name is neither a family of the catalogue's vLLM or SGLang versions, nor a "
        "retired or router family: a typo, a newer family, or a custom one. Nothing was "
        "checked about its type or unit.",
        "Check the name against the engine's /metrics.",
    ),
    Code(
        "OBS408",
        "success-misnamed",
        W,
        "vllm:request_success_total presented as success",
        "Despite its name, vllm:request_success_total counts every finished request whatever "
        "the reason: stop, length, abort, error, repetition. Labelled as successes it "
        "counts failures too.",
        'Filter finished_reason=~"stop|length" for successes, or split by finished_reason.',
    ),
    Code(
        "OBS409",
        "itl-as-tpot",
        INFO,
        "Inter-token latency presented as time per output token",
        "vllm:inter_token_latency_seconds (and the old time_per_output_token_seconds) is "
        "observed once per engine step, not once per request: long requests weigh more and "
        "a speculative-decoding step bundles several tokens. Per-request TPOT is "
        "vllm:request_time_per_output_token_seconds.",
        "Title it inter-token latency, or read the per-request TPOT family.",
    ),
    Code(
        "OBS410",
        "family-never-exported",
        W,
        "A name no engine version exports, close to one that does",
        "No release of the engine exports the name, so the panel never has data and an "
        "alert on it never fires; the catalogue holds a family of nearly the same name "
        "(a counter without its _total suffix, SGLang's num_queue_reqs written with vLLM's "
        "word 'waiting').",
        "Use the name the finding gives.",
    ),
    Code(
        "OBS501",
        "unit-scale",
        E,
        "The panel unit does not match the unit of the values",
        "Grafana formats the values with the panel's unit and does not know the metric's: a "
        "0-1 ratio with unit percent reads 0.85 %, seconds with unit ms read 2.5 ms for 2.5 "
        "s. The number shown is off by the factor between the units.",
        "Set the unit the values are in (the finding names it), or convert the values.",
    ),
    Code(
        "OBS502",
        "unit-near-miss",
        W,
        "The panel unit is close to, but not, the unit of the values",
        "DCGM reports framebuffer memory in MiB (2^20 bytes); Grafana's decmbytes is MB "
        "(10^6 bytes), so the panel reads 4.9 % low. The same holds for KiB and kB.",
        "Use the binary unit (mbytes for MiB).",
    ),
    Code(
        "OBS503",
        "unused-variable",
        W,
        "A template variable that no query uses",
        "The dashboard offers a choice (a model, a deployment, a GPU) that no panel reads: "
        "whatever is selected, every panel shows all values merged.",
        "Add the variable's matcher to every query, or remove the variable.",
    ),
    Code(
        "OBS504",
        "variable-not-applied",
        W,
        "A query that ignores a variable its neighbours use",
        "Most queries of the same exporter filter on the variable, this one does not: it "
        "shows every value merged while the panels around it follow the selection.",
        "Add the variable's matcher to this query.",
    ),
    Code(
        "OBS505",
        "rate-unit-as-quantity",
        W,
        "A per-second rate shown with the unit of a quantity",
        "The values are a rate (bytes per second: DCGM's PCIe and NVLink fields, rate() of a "
        "byte counter) and the panel unit a quantity (bytes): the number is right but the "
        "axis reads 3 GB where 3 GB/s is meant, and a reader adds rates up as amounts.",
        "Use the rate unit (Bps, or By/s in Cloud Monitoring).",
    ),
)
"""Every finding code, in documentation order."""

_BY_ID = {c.id: c for c in CODES}


def code(identifier: str) -> Code:
    """The code with this id (``OBS101``) or name (``quantile-per-series``)."""
    for candidate in CODES:
        if identifier in (candidate.id, candidate.name):
            return candidate
    raise KeyError(identifier)


def codes_markdown() -> str:
    """The code reference of ``docs/lint.md``, generated from :data:`CODES`."""
    lines = ["| code | name | severity | what |", "| --- | --- | --- | --- |"]
    lines += [f"| {c.id} | `{c.name}` | {c.severity.value} | {c.title} |" for c in CODES]
    for c in CODES:
        lines += ["", f"### {c.id} `{c.name}` ({c.severity.value})", "", f"**{c.title}.**"]
        lines += ["", c.explanation, "", f"Fix: {c.fix}"]
    return "\n".join(lines) + "\n"
