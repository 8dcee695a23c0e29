"""The rules of one reading per deployment, each on PRO's run from the bundled dataset with
one result changed by hand, so that the expected reading follows from the rule alone.

PRO, as run: requests waited in 10 % of its 60 scrapes (throughput: capacity-limited by
its queue line), its GPUs averaged 15.6 % utilisation, its KV cache peaked at 42 %, the
stage boundaries found no sustained interval and the profiling counters are not exported.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses import boundaries, gpu, queueing, run, throughput
from inference_obs.analyses.boundaries import BoundaryCause, CapacityReading
from inference_obs.analyses.queueing import QueueClass, QueueRows
from inference_obs.analyses.regime import RegimeReading, judge, queued_rows
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.throughput import Regime
from inference_obs.source.dataset.source import DatasetSource

DATASET = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"
#: Queueing's default busy line, percent: at or above it a row's GPUs are busy.
BUSY = 50.0


@pytest.fixture(scope="module")
def pro() -> DeploymentResults:
    source = DatasetSource(DATASET)
    window = source.dataset.manifest.window.window()
    deployments = source.dataset.manifest.deployments
    ran = run(source, deployments, {d.name: window for d in deployments})
    (found,) = [d for d in ran if d.deployment.name == "PRO"]
    assert found.of(queueing).busy_threshold == BUSY
    return found


def _with(d: DeploymentResults, **changed: object) -> DeploymentResults:
    """``d`` with the named results' fields replaced: ``queueing={"rows": ...}``."""
    results = dict(d.results)
    for name, fields in changed.items():
        assert isinstance(fields, dict)
        results[name] = results[name].model_copy(update=fields)
    return d.model_copy(update={"results": results})


def _rows(waiting: list[float], util: list[float], running: float = 2.0) -> tuple[QueueRows]:
    """One replica's rows a minute apart: waiting and GPU utilisation (percent) per row; a
    row with work and every GPU at 0 is inconsistent, as queueing classes it."""
    t = 1_800_000_000.0 + 60.0 * np.arange(len(waiting))
    classes = tuple(
        QueueClass.INCONSISTENT
        if u == 0
        else QueueClass.CAPACITY
        if w > 0 and u >= BUSY
        else QueueClass.STARVED
        if w > 0
        else QueueClass.BUSY
        for w, u in zip(waiting, util, strict=True)
    )
    return (
        QueueRows(
            replica="r",
            begin=t,
            t=t,
            waiting=np.asarray(waiting, dtype=np.float64),
            running=np.full(len(waiting), running),
            gpu_util=np.asarray(util, dtype=np.float64),
            classes=classes,
        ),
    )


def test_pros_queue_on_busy_gpus_that_idled_otherwise_reads_capacity_limited_in_bursts(
    pro: DeploymentResults,
) -> None:
    found = judge(pro)
    # 3 of its 6 scrapes with a queue had busy GPUs, but they held 49 of the 63 requests seen
    # waiting (the queues section's table: 9, 3x capacity up to 19, 4, 1): more than two
    # thirds. Its GPUs averaged 15.6 %: in bursts.
    counted = queued_rows(pro)
    assert (counted.busy_rows, counted.idle_rows) == (3, 3)
    assert counted.busy_depth / (counted.busy_depth + counted.idle_depth) > 2 / 3
    assert found.reading is RegimeReading.BURST_LIMITED
    assert any("a stall, not capacity" in e.text for e in found.against)
    keys = {m.key for m in pro.measurements()}
    for e in (*found.evidence, *found.against):
        assert set(e.keys) <= keys, e


def test_a_queue_on_busy_gpus_that_stayed_busy_is_capacity(pro: DeploymentResults) -> None:
    busy = _with(
        pro,
        queueing={"rows": _rows([0, 4, 6, 0, 0], [60, 90, 95, 70, 80])},
        gpu={"utilization_mean": pro.of(gpu).utilization_mean.model_copy(update={"value": 80.0})},
    )
    found = judge(busy)
    assert found.reading is RegimeReading.CAPACITY_LIMITED
    # KV cache peak 42 %, under the bottleneck's 50 % line, and the queue on busy GPUs.
    assert found.action == "batch more"


def test_queues_beside_idle_gpus_are_never_capacity(pro: DeploymentResults) -> None:
    # One run of one row, every GPU at 0 while 5 waited: a stall.
    stalled = judge(_with(pro, queueing={"rows": _rows([0, 5, 0, 0, 0], [20, 0, 20, 20, 20])}))
    assert stalled.reading is RegimeReading.STALLED
    assert stalled.action == "profile before adding GPUs"
    # Four minutes on end (60 s scrapes) beside GPUs at 0: longer than a stall's three.
    lasting = _with(pro, queueing={"rows": _rows([5, 5, 5, 5, 0], [0, 0, 0, 0, 20])})
    assert judge(lasting).reading is RegimeReading.STARVED
    # Two runs apart, GPUs at 10 %: starved, and nothing names the cause.
    starved = judge(_with(pro, queueing={"rows": _rows([3, 0, 0, 3, 0], [10, 10, 10, 10, 10])}))
    assert starved.reading is RegimeReading.STARVED
    # Half the waiting requests on busy GPUs, half beside idle ones: neither holds two thirds.
    mixed = judge(_with(pro, queueing={"rows": _rows([4, 0, 4, 0], [90, 90, 10, 10])}))
    assert mixed.reading is RegimeReading.MIXED
    for found in (stalled, starved, mixed):
        assert "batch more" not in found.advice


def test_sustained_host_intervals_read_host_starved(pro: DeploymentResults) -> None:
    b = pro.of(boundaries)
    host = tuple(
        i.model_copy(update={"cause": BoundaryCause.HOST, "sustained": True}) for i in b.intervals
    )
    starved = {"reading": CapacityReading.STARVED, "intervals": host}
    idle = {"rows": _rows([3, 3, 0, 0, 0], [10, 10, 60, 60, 60])}
    found = judge(_with(pro, boundaries=starved, queueing=idle))
    assert found.reading is RegimeReading.HOST_STARVED
    assert "the host" in found.advice
    # PRO's own queue held 49 of its 63 waiting requests on busy GPUs: both kinds, mixed.
    assert judge(_with(pro, boundaries=starved)).reading is RegimeReading.MIXED


def test_fewer_replicas_only_where_there_are_several(pro: DeploymentResults) -> None:
    t = pro.of(throughput)
    served = {"regime": Regime.DEMAND_LIMITED}
    one = judge(_with(pro, throughput=served))
    assert one.reading is RegimeReading.DEMAND_LIMITED
    assert "fewer replicas" not in one.advice  # PRO has one replica
    four = t.replicas_seen.model_copy(update={"value": 4.0})
    several = judge(_with(pro, throughput={**served, "replicas_seen": four}))
    # Four replicas at 15.6 % mean utilisation, under the bottleneck's 20 % line.
    assert "fewer replicas" in several.advice
