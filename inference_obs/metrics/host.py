"""Host-side families: the CPUs that tokenise, batch and detokenise for the GPUs.

Three exporters, three label schemes:

- node_exporter (``exporter="node"``): ``node_cpu_seconds_total`` per logical
  CPU and mode, for the whole machine; it knows nothing of pods. Kubernetes
  scrape configurations usually add the node's name as a ``node`` label
  (:data:`NODE_LABELS`), which is how a GPU's ``Hostname`` finds its host.
- cAdvisor, as the kubelet serves it on ``/metrics/cadvisor``
  (``exporter="cadvisor"``): one series per cgroup, labelled ``container``,
  ``pod``, ``namespace`` (plus ``id``, ``image``, ``name``). The pod's own
  cgroup appears too, with ``container=""`` and the sum of its containers.
- the server process itself (``exporter="process"``): prometheus_client's
  process collector in vLLM's API server exports ``process_cpu_seconds_total``
  beside the ``vllm:`` families, with the same scrape labels.

CPU time is counted in CPU-seconds: ``rate()`` of any of these counters is
cores in use (1.0 is one core busy all the time), not a 0-1 share.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics.family import Family, MetricType

__all__ = [
    "CADVISOR_LABELS",
    "CONTAINER_CPU_CFS_PERIODS",
    "CONTAINER_CPU_CFS_THROTTLED_PERIODS",
    "CONTAINER_CPU_USAGE",
    "CONTAINER_MEMORY_WORKING_SET",
    "CONTAINER_SPEC_CPU_PERIOD",
    "CONTAINER_SPEC_CPU_QUOTA",
    "CPU_MODES",
    "FAMILIES",
    "NODE_CPU_SECONDS",
    "NODE_LABELS",
    "PROCESS_CPU_SECONDS",
]

CADVISOR_LABELS: tuple[str, ...] = ("container", "pod", "namespace", "id", "image", "name")
"""Labels of the kubelet's cAdvisor series (scrape labels such as ``instance`` excluded)."""
NODE_LABELS: tuple[str, ...] = ("node", "kubernetes_node")
"""Candidate spellings of the node-name label scrape configurations add to node_exporter."""
CPU_MODES: tuple[str, ...] = ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user")
"""Values of ``mode`` on ``node_cpu_seconds_total`` (Linux); guest time is a separate family."""

_PER_CORE = (
    "CPU-seconds per second: rate() is cores in use, and exceeds 1 on a multi-core host; "
    "compare it with a core count or a CPU limit, not with 1."
)
_POD_CGROUP = (
    'The pod-level cgroup is exported too, with container="" and the sum of its containers: '
    'select container!="" (and container!="POD", the pause container, on old kubelets) or '
    "a pod's usage counts twice."
)
_RESETS = "Restarts with the container (or process): rate() each series, then sum."
_NEEDS_LIMIT = "Exists only for containers with a CPU limit (a CFS quota)."
_RATIO = (
    "Throttling is a ratio of two counters: increase(throttled_periods) / increase(periods) "
    "is the share of CFS periods (100 ms by default) in which the container used up its quota; "
    "either counter alone grows with time and means nothing."
)

_node = partial(Family, exporter="node", labels=("cpu", "mode"))
_cadvisor = partial(Family, exporter="cadvisor", labels=CADVISOR_LABELS)

NODE_CPU_SECONDS = _node(
    name="node_cpu_seconds_total",
    type=MetricType.COUNTER,
    unit="seconds",
    help="CPU time each logical CPU spent in each mode since boot.",
    traps=(
        "One series per logical CPU and mode: rate() of one is a 0-1 share of that core, "
        "the sum over cpu is cores in that mode.",
        'The busy share of a host is sum(rate(mode!="idle")) / sum(rate(every mode)); iowait '
        "is idle time waiting on I/O, and steal is time the hypervisor took.",
        "The whole machine: every pod on the node is in it, not only the inference server.",
        "No pod label: join to GPUs through the node name (Hostname on DCGM series).",
    ),
)
CONTAINER_CPU_USAGE = _cadvisor(
    name="container_cpu_usage_seconds_total",
    type=MetricType.COUNTER,
    unit="seconds",
    help="CPU time the cgroup used, user plus system, since it was created.",
    traps=(
        _PER_CORE,
        _POD_CGROUP,
        'Standalone cAdvisor with per-CPU statistics exports one series per core (cpu="cpu00", '
        '...), otherwise a single cpu="total": sum over cpu, never add a total to per-core series.',
        _RESETS,
    ),
)
CONTAINER_CPU_CFS_PERIODS = _cadvisor(
    name="container_cpu_cfs_periods_total",
    type=MetricType.COUNTER,
    unit="periods",
    help="CFS enforcement periods that elapsed while the cgroup had runnable tasks.",
    condition="a CPU limit is set on the container",
    traps=(_RATIO, _NEEDS_LIMIT, "Idle periods are not counted: the rate is at most 1/period."),
)
CONTAINER_CPU_CFS_THROTTLED_PERIODS = _cadvisor(
    name="container_cpu_cfs_throttled_periods_total",
    type=MetricType.COUNTER,
    unit="periods",
    help="CFS periods in which the cgroup used up its quota and was held off the CPUs.",
    condition="a CPU limit is set on the container",
    traps=(
        _RATIO,
        _NEEDS_LIMIT,
        "A container can be throttled while its mean usage is well below the limit: bursts "
        "inside one period hit the quota (many threads, one limit).",
    ),
)
CONTAINER_SPEC_CPU_QUOTA = _cadvisor(
    name="container_spec_cpu_quota",
    type=MetricType.GAUGE,
    unit="microseconds",
    help="CPU time the cgroup may use per CFS period (the CPU limit times the period).",
    condition="a CPU limit is set on the container",
    traps=(
        "The limit in cores is container_spec_cpu_quota / container_spec_cpu_period, "
        "not the quota alone.",
        _NEEDS_LIMIT,
    ),
)
CONTAINER_SPEC_CPU_PERIOD = _cadvisor(
    name="container_spec_cpu_period",
    type=MetricType.GAUGE,
    unit="microseconds",
    help="Length of the cgroup's CFS period (100000 by default).",
    traps=("Microseconds, like the quota: divide the quota by it for cores.",),
)
CONTAINER_MEMORY_WORKING_SET = _cadvisor(
    name="container_memory_working_set_bytes",
    type=MetricType.GAUGE,
    unit="bytes",
    help="Memory in use minus inactive file cache: what the kubelet compares with the limit.",
    traps=(
        _POD_CGROUP,
        "Includes active page cache (model files read recently): not the process's heap.",
        "Host memory only: GPU memory is DCGM_FI_DEV_FB_USED.",
    ),
)
PROCESS_CPU_SECONDS = Family(
    name="process_cpu_seconds_total",
    type=MetricType.COUNTER,
    unit="seconds",
    help="User plus system CPU time of the process that serves /metrics.",
    exporter="process",
    traps=(
        "vLLM's API server process only: tokenisation, detokenisation and HTTP happen there, "
        "while the engine core and GPU workers run in processes it does not count.",
        "Python work in one process holds the GIL: near 1 core it is saturated, whatever "
        "the node's core count.",
        "Every Prometheus client exports this name: select the server's job and pod.",
        _RESETS,
    ),
)

FAMILIES: tuple[Family, ...] = (
    NODE_CPU_SECONDS,
    CONTAINER_CPU_USAGE,
    CONTAINER_CPU_CFS_PERIODS,
    CONTAINER_CPU_CFS_THROTTLED_PERIODS,
    CONTAINER_SPEC_CPU_QUOTA,
    CONTAINER_SPEC_CPU_PERIOD,
    CONTAINER_MEMORY_WORKING_SET,
    PROCESS_CPU_SECONDS,
)
"""Every host-side family of the catalogue."""
