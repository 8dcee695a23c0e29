"""queueing(): requests waiting against GPUs idle as a 2x2 table, on the bundled PRO 5000 vs
H20 data, each expected count taken from the dataset's raw samples and each statistic
worked out by hand (the hypergeometric sum with math.comb, not scipy)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.queueing import QueueClass, QueueingResult, queueing
from inference_obs.analyses.waiting_idle import TwoByTwo
from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm, vllm
from inference_obs.reading.measurement import Status
from inference_obs.samples import Window
from inference_obs.source.dataset.source import DatasetSource

BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"
Cells = tuple[int, int, int, int]


@pytest.fixture(scope="module")
def window(source: DatasetSource) -> Window:
    edges = source.dataset.manifest.window
    return Window(edges.start, edges.end)


def _deployment(source: DatasetSource, name: str) -> Deployment:
    return next(d for d in source.dataset.manifest.deployments if d.name == name)


@pytest.fixture(scope="module")
def pro(source: DatasetSource, window: Window) -> QueueingResult:
    return queueing(source, _deployment(source, "PRO"), window)


@pytest.fixture(scope="module")
def h20(source: DatasetSource, window: Window) -> QueueingResult:
    return queueing(source, _deployment(source, "H20"), window)


def _raw_cells(source: DatasetSource, name: str, window: Window, busy: float) -> dict[str, Cells]:
    """Per replica, from the raw samples: each app scrape's waiting against the mean of its
    pod's GPUs, each GPU at its latest sample at or before the scrape (one pod, one engine)."""
    d = _deployment(source, name)
    app = source.raw(vllm.NUM_REQUESTS_WAITING.select(d.matchers), window)
    gpus = list(source.raw(dcgm.GPU_UTIL.select(d.gpu_matchers), window))
    out: dict[str, Cells] = {}
    for scrape in app:
        pod = scrape.labels["pod"]
        mine = [g for g in gpus if g.labels["pod"] == pod]
        cells = [0, 0, 0, 0]
        for t, waiting in zip(scrape.timestamps.tolist(), scrape.values.tolist(), strict=True):
            util = np.mean([g.values[np.searchsorted(g.timestamps, t, "right") - 1] for g in mine])
            cells[(0 if waiting > 0 else 2) + (0 if util < busy else 1)] += 1
        out[f"{scrape.labels['namespace']}/{pod}"] = (cells[0], cells[1], cells[2], cells[3])
    return out


def _cells(result: QueueingResult, replica: str | None = None) -> Cells:
    t = result.waiting_idle if replica is None else result.waiting_idle_by_replica[replica]
    values = [m.value for m in (t.waiting_idle, t.waiting_busy, t.not_waiting_idle)]
    values.append(t.not_waiting_busy.value)
    assert all(v is not None and v == int(v) for v in values), values
    a, b, c, d = (int(v or 0) for v in values)
    return a, b, c, d


def _fisher_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Sum of the hypergeometric probabilities of every table with these margins that is no
    likelier than the observed one (Fisher's exact test, two-sided), from math.comb."""
    row, col, n = a + b, a + c, a + b + c + d

    def p(k: int) -> float:
        return math.comb(col, k) * math.comb(n - col, row - k) / math.comb(n, row)

    observed = p(a)
    ks = range(max(0, row + col - n), min(row, col) + 1)
    return sum(p(k) for k in ks if p(k) <= observed * (1 + 1e-7))


def test_each_replica_and_the_pool_count_the_raw_scrapes(
    source: DatasetSource, window: Window, pro: QueueingResult, h20: QueueingResult
) -> None:
    for name, result in (("PRO", pro), ("H20", h20)):
        expected = _raw_cells(source, name, window, busy=50.0)
        assert set(result.waiting_idle_by_replica) == set(expected)
        for replica, cells in expected.items():
            assert _cells(result, replica) == cells, (name, replica)
        pooled = tuple(sum(cells[k] for cells in expected.values()) for k in range(4))
        assert _cells(result) == pooled, name
    # The published observation's shape: PRO waited in 6 of 60 scrapes, 3 of them with idle
    # GPUs (17:53, the 18:24 stall, 18:31) and 3 busy (17:54-17:56); never busy without a queue.
    assert _cells(pro) == (3, 3, 54, 0)


def test_odds_ratio_phi_and_p_value_by_hand(pro: QueueingResult) -> None:
    a, b, c, d = _cells(pro)  # 3, 3, 54, 0
    t = pro.waiting_idle
    # ad / bc = 3 x 0 / (3 x 54) = 0: queued scrapes were less often idle than the others.
    assert t.odds_ratio.value == 0.0
    # phi = (ad - bc) / sqrt((a+b)(c+d)(a+c)(b+d)) = -162 / sqrt(6 x 54 x 57 x 3)
    assert t.phi.value == pytest.approx(-162 / math.sqrt(6 * 54 * 57 * 3))
    assert t.phi.value == pytest.approx(-0.68825, abs=1e-5)
    assert t.p_value.value == pytest.approx(_fisher_two_sided(a, b, c, d), rel=1e-9)
    assert t.p_value.value == pytest.approx(0.00058445, rel=1e-4)
    for m in (t.odds_ratio, t.phi, t.p_value):
        assert m.status is Status.OK
        assert any("not causation" in caveat for caveat in m.caveats)


def test_keys_name_the_deployment_and_the_replica(h20: QueueingResult) -> None:
    keys = {m.key for m in h20.measurements()}
    for statistic in (
        "waiting_idle_odds_ratio",
        "waiting_idle_phi",
        "waiting_idle_p_value",
        "waiting_idle_count",
        "waiting_busy_count",
        "not_waiting_idle_count",
        "not_waiting_busy_count",
    ):
        assert f"H20/queueing/{statistic}" in keys
        for replica in ("llm/h20-model-01", "llm/h20-model-02"):
            assert f"H20/queueing/{statistic}[{replica}]" in keys
    assert h20.waiting_idle.waiting_idle.unit == "samples"
    assert h20.waiting_idle.odds_ratio.unit == "ratio"


def test_a_replica_that_never_queued_has_no_odds_ratio_and_says_why(h20: QueueingResult) -> None:
    t = h20.waiting_idle_by_replica["llm/h20-model-01"]
    assert _cells(h20, "llm/h20-model-01")[:2] == (0, 0)
    for m in (t.odds_ratio, t.phi):
        assert m.status is Status.INVALID
        assert m.value is None
        assert "no row had requests waiting" in m.annotations[0].message
    # Fisher's test still holds: with no queue, the table is as likely as any: p = 1.
    assert t.p_value.value == 1.0


def test_the_busy_threshold_moves_rows_between_idle_and_busy(
    source: DatasetSource, window: Window
) -> None:
    result = queueing(source, _deployment(source, "PRO"), window, busy_threshold=10.0)
    expected = _raw_cells(source, "PRO", window, busy=10.0)
    assert _cells(result) == expected["llm/pro-model-01"]
    assert _cells(result) != (3, 3, 54, 0)


def test_without_gpu_series_nothing_is_counted(source: DatasetSource, window: Window) -> None:
    deployment = _deployment(source, "PRO").model_copy(update={"gpu_selector": {"pod": "nomatch"}})
    t = queueing(source, deployment, window).waiting_idle
    for m in (t.waiting_idle, t.odds_ratio, t.phi, t.p_value):
        assert m.status is Status.NO_DATA
        assert m.value is None


def test_rows_are_the_raw_scrapes_with_their_classes(
    source: DatasetSource, window: Window, pro: QueueingResult
) -> None:
    (rows,) = pro.rows
    app = source.raw(vllm.NUM_REQUESTS_WAITING.select(_deployment(source, "PRO").matchers), window)
    (raw,) = list(app)
    np.testing.assert_allclose(rows.t, raw.timestamps)
    np.testing.assert_array_equal(rows.waiting, raw.values)
    assert len(rows.classes) == rows.t.size == 60
    at = {round(float(t)) % 86400: cls for t, cls in zip(rows.t, rows.classes, strict=True)}
    # 17:54:26-17:56:26 +08:00 (09:54:26-09:56:26 UTC) capacity; 18:24:26 running on GPUs at 0.
    assert [at[(9 * 3600 + 54 * 60 + 26) + 60 * k] for k in range(3)] == [QueueClass.CAPACITY] * 3
    assert at[10 * 3600 + 24 * 60 + 26] is QueueClass.INCONSISTENT
    assert pro.row_seconds == 60.0
    assert pro.busy_threshold == 50.0


@pytest.mark.parametrize(
    ("cells", "odds", "phi"),
    [
        ((2, 0, 5, 7), math.inf, (14 - 0) / math.sqrt(2 * 12 * 7 * 7)),
        ((0, 3, 0, 9), math.nan, None),  # never idle: no idle column
        ((4, 1, 2, 8), 16.0, (32 - 2) / math.sqrt(5 * 10 * 6 * 9)),
    ],
)
def test_two_by_two_edges(cells: Cells, odds: float, phi: float | None) -> None:
    t = TwoByTwo(*cells)
    got = t.odds_ratio()
    assert got == odds or (math.isnan(odds) and math.isnan(got))
    assert t.phi() == (None if phi is None else pytest.approx(phi))
    assert t.p_value() == pytest.approx(_fisher_two_sided(*cells), rel=1e-9)
