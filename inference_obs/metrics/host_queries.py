"""Queries over host families: the CPUs beside the GPUs.

CPU counters are CPU-seconds, so their rates are cores in use. Container
series are taken with ``container!=""``: the pod-level cgroup repeats the sum
of its containers and would count every CPU-second twice. Throttling is the
ratio of throttled to elapsed CFS periods, never either counter alone.

Each builder takes a deployment's matchers, a window in seconds and a
grouping, as a :class:`~inference_obs.metrics.standard_query.StandardQuery`
builder does. :data:`HOST_QUERIES` registers each of them.
"""

from __future__ import annotations

from inference_obs.metrics import builders as b, host
from inference_obs.metrics.family import Family
from inference_obs.metrics.standard_query import By, Matchers, StandardQuery
from inference_obs.query import Expr, Matcher, avg_over_time

__all__ = [
    "HOST_QUERIES",
    "container_cpu_cores",
    "container_cpu_limit_cores",
    "container_cpu_throttled_ratio",
    "container_matchers",
    "container_memory_working_set_bytes",
    "node_cpu_busy_ratio",
    "server_process_cpu_cores",
]


def container_matchers(matchers: Matchers) -> tuple[Matcher, ...]:
    """``matchers`` plus ``container!=""``, which leaves out the pod-level cgroup series."""
    return (*matchers, Matcher.not_equal("container", ""))


def _summed_mean(family: Family, matchers: Matchers, window: float, by: By) -> Expr:
    """Mean over scrapes of each series, summed over the group's series."""
    means = avg_over_time(family.select(matchers).over(window))
    return means.sum(by=by) if by else means.sum()


def server_process_cpu_cores(matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Cores the server's API process used: ``sum(rate(process_cpu_seconds_total[w]))``.

    The API-server process only (tokenisation, detokenisation, HTTP): the
    engine core and GPU workers are other processes. Near one core a Python
    process is saturated, whatever the node's core count.
    """
    return b.per_second(host.PROCESS_CPU_SECONDS, matchers, window, by)


def container_cpu_cores(matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Cores the containers used: ``sum(rate(container_cpu_usage_seconds_total[w]))``.

    Containers only (``container!=""``): the pod-level cgroup repeats its containers.
    """
    return b.per_second(host.CONTAINER_CPU_USAGE, container_matchers(matchers), window, by)


def container_cpu_limit_cores(matchers: Matchers, window: float, by: By = ()) -> Expr:
    """CPU limit of the containers, cores: summed mean CFS quota over the CFS period.

    Containers without a limit export no quota: absent, never 0.
    """
    own = container_matchers(matchers)
    quota = _summed_mean(host.CONTAINER_SPEC_CPU_QUOTA, own, window, by)
    periods = avg_over_time(host.CONTAINER_SPEC_CPU_PERIOD.select(own).over(window))
    return quota / (periods.max(by=by) if by else periods.max())


def container_cpu_throttled_ratio(matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Share (0-1) of CFS periods in which the containers were throttled.

    ``sum(increase(throttled_periods)) / sum(increase(periods))``, containers only.
    """
    own = container_matchers(matchers)
    throttled = b.increase_total(host.CONTAINER_CPU_CFS_THROTTLED_PERIODS, own, window, by)
    return throttled / b.increase_total(host.CONTAINER_CPU_CFS_PERIODS, own, window, by)


def container_memory_working_set_bytes(matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Host memory working set of the containers, bytes: per-container means, summed."""
    return _summed_mean(host.CONTAINER_MEMORY_WORKING_SET, container_matchers(matchers), window, by)


def node_cpu_busy_ratio(matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Busy share (0-1) of the nodes' CPUs: non-idle over all CPU-seconds.

    ``sum(rate(node_cpu_seconds_total{mode!="idle"}[w])) / sum(rate(node_cpu_seconds_total[w]))``;
    iowait counts as busy. The whole machine, every pod on it included.
    """
    busy = (*matchers, Matcher.not_equal("mode", "idle"))
    everything = b.per_second(host.NODE_CPU_SECONDS, matchers, window, by)
    return b.per_second(host.NODE_CPU_SECONDS, busy, window, by) / everything


HOST_QUERIES: tuple[StandardQuery, ...] = (
    StandardQuery(
        "host_server_process_cpu_cores",
        "Cores the vLLM API-server process used (CPU-seconds per second)",
        "cores",
        "sum(rate(process_cpu_seconds_total[w])) over the deployment's server targets.",
        (
            "The API-server process only: engine-core and GPU-worker processes are not in it.",
            "Near 1 core a Python process is saturated, whatever the node's core count.",
        ),
        (host.PROCESS_CPU_SECONDS,),
        server_process_cpu_cores,
        ("pod",),
    ),
    StandardQuery(
        "host_container_cpu_cores",
        "Cores the deployment's containers used (cAdvisor)",
        "cores",
        'sum(rate(container_cpu_usage_seconds_total{container!=""}[w])).',
        ('Containers only (container!=""): the pod-level cgroup would count twice.',),
        (host.CONTAINER_CPU_USAGE,),
        container_cpu_cores,
        ("pod",),
    ),
    StandardQuery(
        "host_container_cpu_limit_cores",
        "CPU limit of the deployment's containers, cores (CFS quota over period)",
        "cores",
        "Summed mean container_spec_cpu_quota over the mean container_spec_cpu_period.",
        ("Containers without a CPU limit export no quota: absent, never 0.",),
        (host.CONTAINER_SPEC_CPU_QUOTA, host.CONTAINER_SPEC_CPU_PERIOD),
        container_cpu_limit_cores,
        ("pod",),
    ),
    StandardQuery(
        "host_container_cpu_throttled_ratio",
        "Share of CFS periods in which the server's containers were throttled (0-1)",
        "ratio",
        'sum(increase(container_cpu_cfs_throttled_periods_total{container!=""}[w])) / '
        'sum(increase(container_cpu_cfs_periods_total{container!=""}[w])).',
        (
            'Containers only (container!=""): the pod-level cgroup would count twice.',
            "Periods without runnable tasks are not counted: a share of busy periods.",
            "Bursts inside one 100 ms period throttle a container whose mean use is far "
            "below its limit.",
        ),
        (host.CONTAINER_CPU_CFS_THROTTLED_PERIODS, host.CONTAINER_CPU_CFS_PERIODS),
        container_cpu_throttled_ratio,
        ("pod",),
    ),
    StandardQuery(
        "host_container_memory_working_set_bytes",
        "Host memory working set of the deployment's containers, bytes",
        "bytes",
        'Per-container mean of container_memory_working_set_bytes{container!=""}, summed.',
        ("Host memory, not GPU memory; page cache the kernel can reclaim is excluded.",),
        (host.CONTAINER_MEMORY_WORKING_SET,),
        container_memory_working_set_bytes,
        ("pod",),
    ),
    StandardQuery(
        "host_node_cpu_busy_ratio",
        "Busy share of the nodes' CPUs (0-1), every process on them included",
        "ratio",
        'sum(rate(node_cpu_seconds_total{mode!="idle"}[w])) / '
        "sum(rate(node_cpu_seconds_total[w])).",
        ("The whole machine: other pods on the node count too; iowait counts as busy.",),
        (host.NODE_CPU_SECONDS,),
        node_cpu_busy_ratio,
        ("instance",),
    ),
)
"""Host queries an observation report rests on (exported with the others)."""
