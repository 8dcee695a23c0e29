"""One reading per deployment, quoted by every section, and Summary claims that hold in
their numbers: on the reports the command line writes for the bundled datasets.

Expected readings and orders come from each dataset's ``requests.csv`` (the ground truth
the series were made from), never from the code under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from inference_obs.analyses.regime import LABELS, RegimeReading
from inference_obs.cli import main
from inference_obs.report.report_json_model import ReportDocument

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT / "datasets"
Doc = dict[str, Any]


def _write(dataset: str, out: Path) -> tuple[str, Doc]:
    argv = ["report", "--dataset", str(DATASETS / dataset), "--out", str(out), "--quiet"]
    assert main([*argv, "--format", "md,json"]) == 0
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return (out / "report.md").read_text(encoding="utf-8"), doc


@pytest.fixture(scope="module")
def pro_h20(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Doc]:
    return _write("pro5000-vs-h20", tmp_path_factory.mktemp("pro-h20"))


@pytest.fixture(scope="module")
def h100_h200(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Doc]:
    return _write("h100-vs-h200", tmp_path_factory.mktemp("h100-h200"))


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _truth(dataset: str) -> pd.DataFrame:
    truth = pd.read_csv(DATASETS / dataset / "requests.csv")
    return truth[(truth["finish"] > 0) & (truth["finish"] <= 3600)]


def test_pros_queue_came_in_one_burst_on_a_mostly_idle_deployment() -> None:
    # The ground truth behind PRO's reading, "capacity-limited in bursts": nearly all of its
    # queue time fell within one six-minute span, and it had work in flight a fifth of the hour.
    truth = pd.read_csv(DATASETS / "pro5000-vs-h20" / "requests.csv")
    pro = truth[(truth["deployment"] == "PRO") & truth["scheduled"].notna()]
    queued = pro["queue_time"].fillna(0.0)
    spans = [
        queued[(pro["scheduled"] >= s) & (pro["scheduled"] < s + 360)].sum()
        for s in np.arange(-600.0, 3600.0, 10.0)
    ]
    assert max(spans) / queued.sum() > 0.9
    grid = np.arange(0.0, 3600.0, 1.0)
    admitted, finish = pro["admitted"].to_numpy(), pro["finish"].fillna(np.inf).to_numpy()
    in_flight = [bool(((admitted <= g) & (finish > g)).any()) for g in grid]
    assert np.mean(in_flight) < 0.25


def test_every_section_quotes_one_reading_per_deployment(pro_h20: tuple[str, Doc]) -> None:
    text, doc = pro_h20
    ReportDocument.model_validate(doc)  # unknown or missing fields fail here
    regimes = {d["name"]: d["regime"] for d in doc["deployments"]}
    # PRO: one burst of queueing on busy GPUs, idle otherwise (the test above, from the truth);
    # H20: a queue in 1 of 240 scrapes and its KV cache never full.
    assert regimes["PRO"]["reading"] == RegimeReading.BURST_LIMITED.value
    assert regimes["H20"]["reading"] == RegimeReading.DEMAND_LIMITED.value
    body = text.split("## Appendix")[0]
    throughput, gpus = _section(text, "Throughput"), _section(text, "GPU activity and bottleneck")
    queues = _section(text, "Queues and GPU activity")
    stages = _section(text, "Stage boundaries: what the GPUs wait on")
    summary = _section(text, "Summary")
    for name, regime in regimes.items():
        label = LABELS[RegimeReading(regime["reading"])]
        assert regime["evidence"]
        assert all(e["keys"] for e in regime["evidence"])
        assert f"\n- {name} ({label}): " in throughput
        own = queues.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        assert f"Reading: {label}." in own
        assert f"\n{name} ({label}): {regime['advice']}" in gpus
        assert re.search(rf"^\| {name} \|.*\| {re.escape(regime['action'])} \|$", gpus, re.M)
        assert f"| {name} | {label} |" in stages
    assert "PRO reads capacity-limited in bursts" in summary
    # No section issues a reading of its own.
    for said in ("(capacity-limited)", "queues came with busy GPUs", "healthy", "(capacity)"):
        assert said not in body, said
    # One replica: nothing to consolidate.
    assert "fewer replicas" not in body
    pro = next(d for d in doc["deployments"] if d["name"] == "PRO")
    assert len(pro["declared"]["replicas"]) == 1
    assert "fewer replicas" not in pro["bottleneck_advice"] + pro["regime"]["advice"]


def _latency_entry(doc: Doc, comparison: str) -> Doc:
    found: list[Doc] = [e for e in doc["summary"] if e.get("comparison") == comparison]
    (entry,) = found
    return entry


def _true(truth: pd.DataFrame, name: str, column: str) -> np.ndarray:
    rows = truth[(truth["deployment"] == name) & (truth["outcome"] == "finished")]
    out: np.ndarray = rows[column].dropna().to_numpy()
    return out


def test_the_end_to_end_claim_states_its_split(pro_h20: tuple[str, Doc]) -> None:
    _, doc = pro_h20
    truth = _truth("pro5000-vs-h20")
    pro, h20 = (_true(truth, n, "e2e") for n in ("PRO", "H20"))
    # In truth H20's tail is lower and PRO's mean and median are: no side is simply lower.
    assert np.quantile(h20, 0.95) < np.quantile(pro, 0.95)
    assert pro.mean() < 0.9 * h20.mean()
    assert np.median(pro) < np.median(h20)
    entry = _latency_entry(doc, "e2e_p95")
    assert entry["kind"] == "latency_split"
    assert "P95 lower for H20, mean and P50 lower for PRO" in entry["text"]
    assert not entry["text"].startswith("H20 had the lower")


def test_a_side_is_said_to_queue_alone_only_when_the_other_never_queued(
    pro_h20: tuple[str, Doc],
) -> None:
    text, doc = pro_h20
    truth = _truth("pro5000-vs-h20")
    h20 = _true(truth, "H20", "queue_time")
    assert (h20 > 0).mean() > 0.02  # about 4 % of H20's requests waited
    assert "Only PRO queued" not in text + json.dumps(doc)
    (finding,) = [f for f in doc["comparisons"][0]["findings"] if f["code"] == "queueing_differs"]
    said = re.search(r"queue-time means ([\d.,]+) (ms|s) and ([\d.,]+) (ms|s)", finding["message"])
    assert said is not None, finding["message"]
    stated = float(said[3]) / (1000 if said[4] == "ms" else 1)
    assert stated == pytest.approx(h20.mean(), rel=0.05)
    assert "PRO queued far more than H20" in finding["message"]


def _in_flight(doc: Doc) -> dict[str, float] | None:
    for f in doc["comparisons"][0]["findings"]:
        if f["code"] == "concurrency_differs":
            return {k: float(v) for k, v in f["evidence"][0]["values"].items()}
    return None


@pytest.mark.parametrize("dataset", ["pro5000-vs-h20", "h100-vs-h200"])
def test_load_is_blamed_only_where_the_busier_side_had_the_worse_tail(
    dataset: str, pro_h20: tuple[str, Doc], h100_h200: tuple[str, Doc]
) -> None:
    _, doc = pro_h20 if dataset == "pro5000-vs-h20" else h100_h200
    loads = _in_flight(doc)
    assert loads is not None  # both bundled pairs ran at different concurrency
    busier = max(loads, key=lambda n: loads[n])
    truth = _truth(dataset)
    columns = {"ttft": "ttft", "tpot": "tpot", "e2e": "e2e"}
    for entry in doc["summary"]:
        if not entry["kind"].startswith("latency_") or entry["kind"] == "latency_observed":
            continue
        if "may be load" not in (entry["caveat"] or ""):
            continue
        # The busier side's true P95 is the worse (higher) one.
        metric = columns[entry["comparison"].removesuffix("_p95")]
        p95 = {n: np.quantile(_true(truth, n, metric), 0.95) for n in loads}
        assert p95[busier] == max(p95.values()), (entry["text"], p95)
    if dataset == "pro5000-vs-h20":
        # H20 ran 15x the requests in flight and had the lower P95 of every headline metric.
        for metric in columns.values():
            p95 = {n: np.quantile(_true(truth, n, metric), 0.95) for n in loads}
            assert p95["H20"] < p95["PRO"], metric
        assert "may be load" not in (_latency_entry(doc, "tpot_p95")["caveat"] or "")
        (finding,) = [
            f for f in doc["comparisons"][0]["findings"] if f["code"] == "concurrency_differs"
        ]
        assert "may be load" not in finding["message"]
    else:
        # H200 ran 5x the requests in flight and had the worse end-to-end P95 in truth; but
        # the buckets that must hold the P95s of the window's requests overlap (H100's
        # [30, 120], H200's [60, 240], widened by the requests at the window's edges), so the
        # report tells no difference apart and blames no load for one.
        p95 = {n: np.quantile(_true(truth, n, "e2e"), 0.95) for n in loads}
        assert busier == "H200"
        assert p95["H200"] > p95["H100"]
        entry = _latency_entry(doc, "e2e_p95")
        assert entry["kind"] == "latency_indistinguishable"
        assert "may be load" not in (entry["caveat"] or "")
