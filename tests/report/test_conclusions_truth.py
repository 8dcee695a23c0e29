"""Every claim of the summary holds in the simulator's ground truth, for every bundled scenario.

Each scenario is simulated at a seed drawn afresh for every run (never one a
scenario ships with; a failure names it, to rerun), as it defines it (its
durations kept), and reported as the command line reports a dataset. Each
summary entry is then checked against ``requests.csv`` (the ground truth the
series were made from, :mod:`inference_obs.simulate.ground_truth`) and the
scenario: a side called lower has the lower P95 AND the lower mean in truth;
a split names each statistic's lower side as the truth orders it; quantiles
that cannot be told apart, or stated alone, lie in the buckets given; a
deployment said to queue had requests waiting, for the queue-time mean
stated; a side said to queue alone had no request wait on the other; GPUs
said to wait on the host or on transfers had such a fault injected, as had a
deployment read host- or transfer-starved; a stall or restart named was
injected on that replica at that time; a replica said to stand out from its
deployment's others had a fault injected on it. A kind of entry this test does
not know fails it, so a new finder comes with its check.

The slowest scenario takes about 10 s to simulate and 5 s to report.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from inference_obs.analyses.validity.checks import Thresholds
from inference_obs.cli import main
from inference_obs.simulate.faults import Restart, Stall, of_kind
from inference_obs.simulate.scenario import load_scenario, scenario_names
from inference_obs.source.dataset.reader import read_dataset

SCENARIOS = (
    "gpu-boundaries", "gpu-boundaries-healthy", "h100-vs-h200", "pro5000-vs-h20", "r1-decode",
)  # fmt: skip
#: The column each latency metric is in, and whether vLLM records it on finishing (else on
#: the first token, for every request that got one).
COLUMNS = {
    "ttft": ("ttft", False),
    "tpot": ("tpot", True),
    "e2e": ("e2e", True),
    "queue": ("queue_time", True),
}
#: A split's statistics by the words the summary uses, and how the truth computes each.
STATISTICS: dict[str, Callable[[np.ndarray], float]] = {
    "P95": lambda v: float(np.quantile(v, 0.95, method="inverted_cdf")),
    "mean": lambda v: float(np.mean(v)),
    "P50": lambda v: float(np.quantile(v, 0.5, method="inverted_cdf")),
}
Doc = dict[str, Any]


def fresh_seed() -> int:
    """A seed none of the bundled scenarios ships with, drawn anew on every call."""
    shipped = {load_scenario(name).seed for name in SCENARIOS}
    while (seed := random.SystemRandom().randrange(1, 2**31)) in shipped:
        pass
    return seed


def test_the_scenarios_are_the_bundled_ones() -> None:
    assert set(SCENARIOS) == set(scenario_names())
    assert fresh_seed() not in {load_scenario(name).seed for name in SCENARIOS}


def _seconds(doc: Doc) -> float:
    (window,) = {(w["start"], w["end"]) for w in doc["scope"]["windows"].values()}
    start, end = (pd.Timestamp(t) for t in window)
    return float((end - start).total_seconds())


def _spans(data: Path, doc: Doc) -> pd.DataFrame:
    """Per engine, the span (first, last] of its samples inside the window, seconds from the
    window start: what the report's counter changes cover."""
    manifest = json.loads((data / "manifest.json").read_text())
    scenario = load_scenario(manifest["generator"]["scenario"])
    start_ms = pd.Timestamp(manifest["window"]["start"]).timestamp() * 1000
    samples = read_dataset(data).samples
    rows = []
    for spec in scenario.deployments:
        for i, replica in enumerate(spec.replicas):
            for s in samples:
                if s.name != "vllm:e2e_request_latency_seconds_count":
                    continue
                if s.labels.get("pod") != spec.pod(i):
                    continue
                t = (s.t_ms - start_ms) / 1000.0
                t = t[(t >= 0) & (t <= _seconds(doc))]
                engine = int(s.labels["engine"])
                rows.append((spec.name, replica, engine, float(t[0]), float(t[-1])))
    return pd.DataFrame(rows, columns=["deployment", "replica", "engine", "first", "last"])


def _values(truth: pd.DataFrame, deployment: str, metric: str, doc: Doc) -> np.ndarray:
    """The metric's true values for the requests the window's histograms recorded."""
    column, on_finish = COLUMNS[metric]
    rows = truth[truth["deployment"] == deployment]
    at = rows["finish"] if on_finish else rows["first_token"]
    inside = (at > rows["first"]) & (at <= rows["last"])
    if on_finish:
        inside &= rows["outcome"] == "finished"
    out: np.ndarray = rows.loc[inside, column].dropna().to_numpy()
    return out


def _true_p95(truth: pd.DataFrame, deployment: str, metric: str, doc: Doc) -> float:
    values = _values(truth, deployment, metric, doc)
    # The smallest value with at least 95% of values at or below it: the observation a
    # histogram's bucket search finds (rank 0.95 x count), not an interpolation.
    return float(np.quantile(values, 0.95, method="inverted_cdf"))


def _bounds(doc: Doc, key: str) -> tuple[float, float]:
    m = next(m for m in doc["measurements"] if m["key"] == key)
    return float(m["bounds"]["lower"]), float(m["bounds"]["upper"])


def _in_bucket(doc: Doc, truth: pd.DataFrame, deployment: str, metric: str) -> None:
    low, high = _bounds(doc, f"{deployment}/latency/{metric}_p95")
    true = _true_p95(truth, deployment, metric, doc)
    assert low <= true <= high, (deployment, metric, true, low, high)


def _latency_lower(entry: Doc, doc: Doc, truth: pd.DataFrame, _data: Path) -> None:
    metric = entry["comparison"].removesuffix("_p95")
    low, high = entry["deployments"]
    assert _true_p95(truth, low, metric, doc) < _true_p95(truth, high, metric, doc), entry["text"]
    means = [float(np.mean(_values(truth, n, metric, doc))) for n in (low, high)]
    assert means[0] < means[1], (entry["text"], means)


def _latency_split(entry: Doc, doc: Doc, truth: pd.DataFrame, _data: Path) -> None:
    metric = entry["comparison"].removesuffix("_p95")
    values = {n: _values(truth, n, metric, doc) for n in entry["deployments"]}
    stated = re.findall(r"((?:P95|mean|P50)(?: and (?:mean|P50))*) lower for (\w+)", entry["text"])
    assert stated, entry["text"]
    assert stated[0][0].startswith("P95"), entry["text"]
    for words, low in stated:
        (high,) = set(values) - {low}
        for stat in words.split(" and "):
            true = {n: STATISTICS[stat](v) for n, v in values.items()}
            assert true[low] < true[high], (entry["text"], stat, true)
    if "means within" in entry["text"]:
        means = [float(np.mean(v)) for v in values.values()]
        assert abs(means[0] - means[1]) < 0.1 * max(means), (entry["text"], means)


def _latency_indistinguishable(entry: Doc, doc: Doc, truth: pd.DataFrame, _data: Path) -> None:
    metric = entry["comparison"].removesuffix("_p95")
    for name in entry["deployments"]:
        _in_bucket(doc, truth, name, metric)


def _latency_observed(entry: Doc, doc: Doc, truth: pd.DataFrame, _data: Path) -> None:
    (name,) = entry["deployments"]
    for key in entry["keys"]:
        statistic = key.split("/")[-1]
        metric = statistic.rsplit("_", 1)[0]
        if statistic.endswith("_p95"):
            _in_bucket(doc, truth, name, metric)
        else:  # an exact mean over the span: the true mean, to rounding
            value = next(m["value"] for m in doc["measurements"] if m["key"] == key)
            true = float(np.mean(_values(truth, name, metric, doc)))
            assert value == pytest.approx(true, rel=1e-6), (key, value, true)


def _throughput_ratio(entry: Doc, doc: Doc, truth: pd.DataFrame, _data: Path) -> None:
    a, b = entry["deployments"]
    finished = truth[(truth["outcome"] == "finished") & (truth["finish"] > 0)]
    finished = finished[finished["finish"] <= _seconds(doc)]
    means = [finished.loc[finished["deployment"] == n, "output_tokens"].mean() for n in (a, b)]
    if "output length differs" in entry["text"]:
        assert max(means) / min(means) >= Thresholds().length_ratio * 0.9, means
    if entry["verdict"] != "valid":
        assert "says nothing about the hardware" in entry["text"]


def _waiting_peak(rows: pd.DataFrame, seconds: float) -> int:
    """Largest number of requests waiting at once (from reaching the engine to scheduled)."""
    arrived = (rows["scheduled"] - rows["queue_time"]).to_numpy()
    scheduled = rows["scheduled"].to_numpy()
    keep = (rows["queue_time"] > 0).to_numpy() & (scheduled > 0) & (arrived < seconds)
    events = sorted([(t, 1) for t in arrived[keep]] + [(t, -1) for t in scheduled[keep]])
    level = peak = 0
    for t, step in events:
        level += step
        if 0 <= t <= seconds:
            peak = max(peak, level)
    return peak


def _queued(entry: Doc, doc: Doc, truth: pd.DataFrame, _data: Path) -> None:
    (name,) = entry["deployments"]
    rows = truth[(truth["deployment"] == name) & truth["scheduled"].notna()]
    peak = next(m for m in doc["measurements"] if m["key"] == f"{name}/queueing/peak_waiting")
    # A scrape sees the queue at one instant; in truth at least that many waited at once.
    assert _waiting_peak(rows, _seconds(doc)) >= peak["value"] >= 1, entry["text"]
    # The queue-time mean stated: an exact mean over the span, the true one to rounding.
    mean = next(m for m in doc["measurements"] if m["key"] == f"{name}/latency/queue_mean")
    if "queue-time mean" in entry["text"]:
        true = float(np.mean(_values(truth, name, "queue", doc)))
        assert mean["value"] == pytest.approx(true, rel=1e-6), (entry["text"], true)
        assert true > 0, entry["text"]


def _queue_caveat(entry: Doc, doc: Doc, truth: pd.DataFrame) -> None:
    """A caveat that says who queued holds in the true queue times."""
    caveat = entry.get("caveat") or ""
    names = {d["name"] for d in doc["deployments"]}
    if alone := re.search(r"Only (\w+) queued requests", caveat):
        for other in names - {alone[1]}:
            waited = _values(truth, other, "queue", doc)
            assert not (waited > 0).any(), (caveat, other, float(waited.max()))
    if more := re.search(r"(\w+) queued far more than (\w+)", caveat):
        means = [float(np.mean(_values(truth, n, "queue", doc))) for n in (more[1], more[2])]
        assert means[0] > means[1] > 0, (caveat, means)


def _regimes(doc: Doc, truth: pd.DataFrame, data: Path) -> None:
    """Each deployment's one reading rests on what happened: a starved one had the fault
    injected, a capacity-limited one had requests wait."""
    manifest = json.loads((data / "manifest.json").read_text())
    faults = {f.kind for f in load_scenario(manifest["generator"]["scenario"]).faults}
    wanted = {"host_starved": "host_starved", "transfer_starved": "transfer_bound"}
    for d in doc["deployments"]:
        reading = d["regime"]["reading"]
        if reading in wanted:
            assert wanted[reading] in faults, (d["name"], reading, faults)
        if reading in ("capacity_limited", "burst_limited"):
            waited = truth.loc[truth["deployment"] == d["name"], "queue_time"].fillna(0)
            assert (waited > 0).any(), (d["name"], reading)


def _boundaries_starved(entry: Doc, doc: Doc, truth: pd.DataFrame, data: Path) -> None:
    manifest = json.loads((data / "manifest.json").read_text())
    faults = {f.kind for f in load_scenario(manifest["generator"]["scenario"]).faults}
    causes = set(re.findall(r"\b(host|transfer|unexplained): ", entry["text"]))
    assert causes, entry["text"]
    wanted = {"host": "host_starved", "transfer": "transfer_bound"}
    assert {wanted[c] for c in causes if c in wanted} <= faults, (causes, faults)


def _busy_share(rows: pd.DataFrame, span: float) -> float:
    """Share of ``span`` seconds from the window start in which some request of ``rows``
    (one replica) was being served: the union of their (scheduled, finish) intervals."""
    busy, reach = 0.0, 0.0
    spans = zip(rows["scheduled"].clip(0, span), rows["finish"].clip(0, span), strict=True)
    for begin, end in sorted(spans):
        if end > reach:
            busy += end - max(begin, reach)
            reach = end
    return busy / span


def _boundaries_saturated(entry: Doc, doc: Doc, truth: pd.DataFrame, _data: Path) -> None:
    """GPUs computing most of the time with requests waiting: in truth, each replica had a
    request in service for most of the window and some requests queued."""
    (name,) = entry["deployments"]
    rows = truth[(truth["deployment"] == name) & truth["scheduled"].notna()]
    rows = rows.assign(finish=rows["finish"].fillna(_seconds(doc)))
    shares = [_busy_share(one, _seconds(doc)) for _, one in rows.groupby("replica")]
    assert min(shares) >= 0.8, (entry["text"], shares)
    assert (rows["queue_time"].fillna(0) > 0).any(), entry["text"]


def _bottleneck(entry: Doc, doc: Doc, truth: pd.DataFrame, _data: Path) -> None:
    (name,) = entry["deployments"]
    rows = truth[(truth["deployment"] == name) & (truth["outcome"] == "finished")]
    decode, prefill = rows["decode_time"].sum(), rows["prefill_time"].sum()
    if "bandwidth bound decode" in entry["text"]:
        assert decode > prefill, (decode, prefill)
    else:
        pytest.fail(f"no ground truth check for {entry['text']!r}")


def _incident(entry: Doc, doc: Doc, truth: pd.DataFrame, data: Path) -> None:
    """A stall or restart named in the summary was injected on that replica at that time,
    to two scrape intervals; a queue named for the latency spike after it held requests,
    and the spike's bucket holds the true quantile of its window."""
    manifest = json.loads((data / "manifest.json").read_text())
    scenario = load_scenario(manifest["generator"]["scenario"])
    (event,) = [e for e in doc["timeline"] if entry["text"].endswith(e["text"])]
    start_s = pd.Timestamp(manifest["window"]["start"]).timestamp()
    seen = [pd.Timestamp(event[k]).timestamp() - start_s for k in ("start", "end")]
    slack = 2 * float(manifest["scrape_interval_seconds"])
    if event["kind"] == "queue_burst":
        _queue_then_spike(event, truth, start_s, seen, slack)
        return
    injected: list[tuple[str, float, float]] = [
        (f.replica, f.start, f.end) for f in of_kind(scenario.faults, Stall)
    ] if event["kind"] == "stall" else [
        (f.replica, f.at, f.at + f.downtime) for f in of_kind(scenario.faults, Restart)
    ]  # fmt: skip
    assert event["kind"] in ("stall", "restart"), entry["text"]

    def pod(replica: str) -> str:
        spec = scenario.deployment_of(replica)
        return spec.pod(spec.replicas.index(replica))

    assert any(
        any(r.endswith(f"/{pod(replica)}") for r in event["replicas"])
        and abs(seen[0] - start) <= slack
        and abs(seen[1] - end) <= slack
        for replica, start, end in injected
    ), (entry["text"], seen, injected)


_SPIKE = re.compile(
    r"rolling P(?P<q>\d+) of (?P<what>[a-z ]+) \((?P<minutes>[\d.]+)-minute windows\) rose to "
    r"(?:between (?P<low>[\d.,]+) and (?P<high>[\d.,]+)|above (?P<above>[\d.,]+)"
    r"|at most (?P<most>[\d.,]+)) s at (?P<at>\d\d:\d\d:\d\d)"
)
#: The truth's column for each rolling quantile's family, by its words, and the time at
#: which the histogram observes it.
_SPIKE_COLUMNS = {
    "time to first token": ("ttft", "first_token"),
    "inter token latency": ("tpot", "finish"),
    "time per output token": ("tpot", "finish"),
}


def _number(text: str | None, default: float) -> float:
    return default if text is None else float(text.replace(",", ""))


def _queue_then_spike(
    event: Doc, truth: pd.DataFrame, start_s: float, seen: list[float], slack: float
) -> None:
    """Requests of the deployment waited during the queue (to ``slack``), and the true
    quantile of each spike's window lies in the stated bucket, to a factor of two (the
    rolling window's edges are scrapes, not the spike's clock)."""
    rows = truth[(truth["deployment"] == event["deployment"]) & truth["scheduled"].notna()]
    waited = rows[(rows["arrival"] <= seen[1] + slack) & (rows["scheduled"] >= seen[0] - slack)]
    assert (waited["queue_time"] > 0).any(), (event["text"], seen)
    spikes = list(_SPIKE.finditer(event["text"]))
    assert spikes, event["text"]
    day = pd.Timestamp(event["start"])
    for spike in spikes:
        column, at = _SPIKE_COLUMNS[spike["what"]]
        low = _number(spike["low"] or spike["above"], 0.0)
        high = _number(spike["high"] or spike["most"], np.inf)
        peak = pd.Timestamp(f"{day.date()} {spike['at']}", tz=day.tz).timestamp() - start_s
        if peak < seen[0]:  # the spike's clock passed midnight
            peak += 86400
        length = 60 * float(spike["minutes"])
        window = rows[(rows[at] > peak - length) & (rows[at] <= peak)]
        true = float(np.quantile(window[column], float(spike["q"]) / 100))
        assert low / 2 <= true <= 2 * high, (event["text"], spike[0], true)


def _replica_outliers(entry: Doc, doc: Doc, truth: pd.DataFrame, data: Path) -> None:
    """A replica named as standing out had a fault injected on it: otherwise a scenario's
    replicas of one deployment are alike by construction (same engine, same traffic
    class, routed alike), so any difference is chance."""
    manifest = json.loads((data / "manifest.json").read_text())
    scenario = load_scenario(manifest["generator"]["scenario"])
    (name,) = entry["deployments"]
    (deployment,) = [d for d in doc["deployments"] if d["name"] == name]
    spec = next(s for s in scenario.deployments if s.name == name)
    faulty = {
        spec.pod(k)
        for k, replica in enumerate(spec.replicas)
        if any(f.applies_to(replica) for f in scenario.faults)
    }
    named = {o["replica"] for o in deployment["outliers"]}
    assert named, entry["text"]
    assert all(any(r.endswith(pod) for pod in faulty) for r in named), (entry["text"], faulty)


CHECKS: dict[str, Callable[[Doc, Doc, pd.DataFrame, Path], None]] = {
    "latency_lower": _latency_lower,
    "latency_split": _latency_split,
    "latency_indistinguishable": _latency_indistinguishable,
    "latency_observed": _latency_observed,
    "throughput_ratio": _throughput_ratio,
    "queued": _queued,
    "boundaries_starved": _boundaries_starved,
    "boundaries_saturated": _boundaries_saturated,
    "bottleneck": _bottleneck,
    "incident": _incident,
    "replica_outliers": _replica_outliers,
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_summary_claim_holds_in_the_ground_truth(scenario: str, tmp_path: Path) -> None:
    seed = fresh_seed()
    try:
        _check(scenario, seed, tmp_path)
    except AssertionError as exc:
        raise AssertionError(
            f"{scenario} at seed {seed} (rerun: inference-obs simulate {scenario} --seed "
            f"{seed}): {exc}"
        ) from exc


def _check(scenario: str, seed: int, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "report"
    assert main(["simulate", scenario, "--seed", str(seed), "--out", str(data)]) == 0
    code = main(["report", "--dataset", str(data), "--out", str(out), "--quiet"])
    assert code == 0
    doc = json.loads((out / "report.json").read_text())
    truth = pd.read_csv(data / "requests.csv").merge(
        _spans(data, doc), on=["deployment", "replica", "engine"]
    )
    assert doc["summary"], scenario
    for entry in doc["summary"]:
        check = CHECKS.get(entry["kind"])
        assert check is not None, f"no ground truth check for {entry['kind']}: {entry['text']}"
        check(entry, doc, truth, data)
        _queue_caveat(entry, doc, truth)
    _regimes(doc, truth, data)
    if of_kind(load_scenario(scenario).faults, Stall):  # a stall is named where injected
        assert "incident" in {e["kind"] for e in doc["summary"]}, scenario
    if scenario == "gpu-boundaries-healthy":
        assert not [e for e in doc["summary"] if e["kind"].startswith("boundaries")]
