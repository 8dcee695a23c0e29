"""The queues section of the report built with its defaults on the bundled PRO 5000 vs H20
data: the legend before the tables, the waiting-vs-idle reading in words, the waiting
reasons, idle intervals counted rather than listed, replicas grouped. Expected numbers come
from the dataset's raw samples."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from inference_obs import analyses
from inference_obs.analyses.conclusions import conclusions, judged
from inference_obs.analyses.waiting_idle import WaitingIdle
from inference_obs.metrics import dcgm, vllm
from inference_obs.report.document import Block, Heading, Paragraph, Table
from inference_obs.report.from_source import report
from inference_obs.report.model import Report
from inference_obs.report.sections import sections
from inference_obs.samples import Window
from inference_obs.source.dataset.source import DatasetSource

DATASET = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def built(source: DatasetSource) -> Report:
    return report(source)


@pytest.fixture(scope="module")
def blocks(built: Report) -> list[Block]:
    every = list(sections(built))
    start = every.index(Heading(2, "Queues and GPU activity"))
    end = next(k for k in range(start + 1, len(every)) if getattr(every[k], "level", 0) == 2)
    return every[start:end]


def _part(blocks: list[Block], name: str) -> list[Block]:
    start = blocks.index(Heading(3, name))
    ends = [k for k in range(start + 1, len(blocks)) if isinstance(blocks[k], Heading)]
    return blocks[start : ends[0] if ends else len(blocks)]


def _pro_rows(source: DatasetSource) -> list[tuple[float, float, float]]:
    """Per PRO scrape, from the raw samples: waiting, running, and the mean of the 8 GPUs'
    latest samples at or before the scrape."""
    window = Window(source.dataset.manifest.window.start, source.dataset.manifest.window.end)
    d = next(d for d in source.dataset.manifest.deployments if d.name == "PRO")
    (waiting,) = list(source.raw(vllm.NUM_REQUESTS_WAITING.select(d.matchers), window))
    (running,) = list(source.raw(vllm.NUM_REQUESTS_RUNNING.select(d.matchers), window))
    gpus = list(source.raw(dcgm.GPU_UTIL.select(d.gpu_matchers), window))
    assert np.array_equal(waiting.timestamps, running.timestamps)
    out = []
    for t, w, r in zip(waiting.timestamps, waiting.values, running.values, strict=True):
        util = np.mean([g.values[np.searchsorted(g.timestamps, t, "right") - 1] for g in gpus])
        out.append((float(w), float(r), float(util)))
    return out


def test_the_class_legend_comes_before_any_table(blocks: list[Block]) -> None:
    first_table = next(k for k, b in enumerate(blocks) if isinstance(b, Table))
    (legend,) = [
        k for k, b in enumerate(blocks) if isinstance(b, Paragraph) and "The classes: " in b.text
    ]
    assert legend < first_table
    # One paragraph (the body's lines are counted): each class in the order an SRE acts on.
    said = blocks[legend]
    assert isinstance(said, Paragraph)
    classes = said.text.split("The classes: ")[1]
    named = ["capacity", "starved", "inconsistent", "busy", "idle", "unknown"]
    at = [classes.find(f"{name}: ") for name in named]
    assert at[0] == 0
    assert at == sorted(at)
    assert all(classes[k - 2 : k] == "; " for k in at[1:])


def test_the_reading_says_how_often_queues_met_idle_gpus(
    source: DatasetSource, blocks: list[Block]
) -> None:
    rows = _pro_rows(source)
    waited = [util for w, _, util in rows if w > 0]
    idle_when_waiting = sum(util < 50 for util in waited)
    idle_otherwise = sum(util < 50 for w, _, util in rows if w <= 0)
    texts = [b.text for b in _part(blocks, "PRO") if isinstance(b, Paragraph)]
    (reading,) = [t for t in texts if t.startswith("PRO: requests waited in")]
    assert (
        f"requests waited in {len(waited)} of {len(rows)} scrapes; in {idle_when_waiting} of "
        f"them the GPUs were idle" in reading
    )
    assert f"against {idle_otherwise} of the {len(rows) - len(waited)} scrapes" in reading
    assert "Fisher's exact p = 0.0005845" in reading  # the hypergeometric sum, see the analyses
    assert "less than chance" in reading
    assert "at a lag of 0 rows" in reading
    assert any("not causation" in b.text for b in blocks if isinstance(b, Paragraph))


def test_waiting_reasons_are_in_the_body(source: DatasetSource, blocks: list[Block]) -> None:
    window = Window(source.dataset.manifest.window.start, source.dataset.manifest.window.end)
    d = next(d for d in source.dataset.manifest.deployments if d.name == "PRO")
    peaks: dict[str, float] = {}
    for one in source.raw(vllm.NUM_REQUESTS_WAITING_BY_REASON.select(d.matchers), window):
        reason = one.labels["reason"]
        peaks[reason] = max(peaks.get(reason, 0.0), float(np.max(one.values)))
    assert peaks == {"capacity": 19.0, "deferred": 4.0}
    texts = " ".join(b.text for b in _part(blocks, "PRO") if isinstance(b, Paragraph))
    assert "by waiting reason: capacity 19, deferred 4" in texts


def _runs(flags: list[bool]) -> int:
    return sum(1 for k, flag in enumerate(flags) if flag and (k == 0 or not flags[k - 1]))


def test_idle_and_busy_intervals_are_counted_not_listed(
    source: DatasetSource, blocks: list[Block]
) -> None:
    rows = _pro_rows(source)
    # Idle rows: no queue, nothing running, GPUs below 50 %. Busy: no queue, and work
    # running on GPUs reading above 0 % or GPUs at 50 % or more.
    idle = [w <= 0 and r <= 0 and util < 50 for w, r, util in rows]
    busy = [w <= 0 and ((r > 0 and util > 0) or util >= 50) for w, r, util in rows]
    part = _part(blocks, "PRO")
    tables = [b for b in part if isinstance(b, Table) and "class" in b.header]
    (intervals,) = tables
    classes = {row[intervals.header.index("class")] for row in intervals.rows}
    assert classes == {"capacity", "starved", "inconsistent"}
    texts = " ".join(b.text for b in part if isinstance(b, Paragraph))
    assert (
        f"{_runs(busy)} busy intervals ({sum(busy)} scrapes) and {_runs(idle)} idle intervals "
        f"({sum(idle)} scrapes)"
    ) in texts
    # Timestamps to the second in the window's zone: the 17:54-17:56 capacity interval.
    (capacity,) = [row for row in intervals.rows if row[1] == "capacity"]
    assert capacity[2:4] == ("2026-10-19 17:54:26+08:00", "2026-10-19 17:56:26+08:00")


def test_replicas_are_grouped_and_each_has_its_table_row(blocks: list[Block]) -> None:
    part = _part(blocks, "H20")
    (intervals,) = [b for b in part if isinstance(b, Table) and "class" in b.header]
    keys = [(row[0], row[2]) for row in intervals.rows]
    assert keys == sorted(keys)
    (odds,) = [b for b in part if isinstance(b, Table) and "odds ratio" in b.header]
    assert [row[0] for row in odds.rows] == [
        "all (pooled)",
        *(f"llm/h20-model-0{k}" for k in range(1, 5)),
    ]
    # A replica that never queued has no odds ratio; the section says what that means.
    assert odds.rows[1][odds.header.index("odds ratio")] == "invalid"
    assert any(b.text.startswith("invalid: ") for b in part if isinstance(b, Paragraph))


def test_one_replica_gets_its_counts_in_the_reading_not_a_second_table(
    blocks: list[Block],
) -> None:
    part = _part(blocks, "PRO")
    assert not [b for b in part if isinstance(b, Table) and "odds ratio" in b.header]
    (reading,) = [b.text for b in part if isinstance(b, Paragraph) and "Odds ratio" in b.text]
    assert "Odds ratio 0, phi -0.6882, Fisher's exact p = 0.0005845" in reading


def _with_p_value(built: Report, name: str, p: float) -> Report:
    """``built`` with ``name``'s pooled and per-replica Fisher p-values set to ``p``."""

    def tiny(t: WaitingIdle) -> WaitingIdle:
        return t.model_copy(update={"p_value": t.p_value.model_copy(update={"value": p})})

    runs = []
    for d in built.deployments:
        if d.deployment.name == name:
            q = d.of(analyses.queueing)
            by_replica = {r: tiny(t) for r, t in q.waiting_idle_by_replica.items()}
            q = q.model_copy(
                update={"waiting_idle": tiny(q.waiting_idle), "waiting_idle_by_replica": by_replica}
            )
            d = d.model_copy(update={"results": {**d.results, analyses.queueing.name: q}})
        runs.append(d)
    return built.model_copy(update={"deployments": tuple(runs)})


@pytest.mark.parametrize("p", [0.0, 3e-12])
def test_a_p_value_under_a_ten_thousandth_reads_below_it_never_0(built: Report, p: float) -> None:
    # Fisher's exact p of a long, strongly associated table underflows to 0 or to a run of
    # zeros: the report says "p < 0.0001", as p-values are reported, in the queues section
    # (sentence and tables) and in the Summary.
    for name in ("PRO", "H20"):
        shown = _with_p_value(built, name, p)
        every = list(sections(shown))
        start = every.index(Heading(2, "Queues and GPU activity"))
        part = _part(every[start:], name)
        (reading,) = [b.text for b in part if isinstance(b, Paragraph) and "exact p" in b.text]
        assert "Fisher's exact p < 0.0001:" in reading
        cells = [
            row[-1]
            for b in part
            if isinstance(b, Table) and "Fisher p" in b.header
            for row in b.rows
        ]
        assert all(c == "< 0.0001" for c in cells)
    # The Summary's judgement read afresh from the changed results, as build_report reads them.
    changed = _with_p_value(built, "PRO", p)
    found = conclusions(judged(changed.deployments, changed.validity, changed.timeline))
    summary = [c.text for c in found.entries if c.kind == "queued"]
    assert summary
    assert all("Fisher's exact p < 0.0001)" in t for t in summary)
    assert not any(re.search(r"p = 0(?![.\d])|0\.0000", t) for t in summary)


def test_without_gpu_series_the_queue_finding_says_no_data_not_0(source: DatasetSource) -> None:
    # PRO's GPU selector matches no DCGM series: no scrape has a GPU reading, so how many
    # scrapes with a queue had idle (or busy) GPUs is not known. PRO still queued (10% of
    # its scrapes, over the 5% a Summary finding needs), so the finding is made.
    blind = [
        d.model_copy(update={"gpu_selector": {"Hostname": "matches-no-gpu"}})
        if d.name == "PRO"
        else d
        for d in source.dataset.manifest.deployments
    ]
    shown = report(source, blind)
    (queued,) = [c.text for c in shown.conclusions.entries if c.kind == "queued"]
    assert queued.startswith("PRO had requests waiting in 10% of its scrapes")
    assert "no data" in queued
    assert not re.search(r"\bin 0\b|idle \(under 50%\) in|busy in —", queued)
    every = list(sections(shown))
    part = _part(every[every.index(Heading(2, "Queues and GPU activity")) :], "PRO")
    texts = " ".join(b.text for b in part if isinstance(b, Paragraph))
    assert "no row had both a queue and a GPU reading" in texts


def test_a_few_replicas_list_every_interval_up_to_ten_else_the_three_longest(
    built: Report,
) -> None:
    # PRO's 9 intervals are listed in full; five times over (45, one replica, so no fleet
    # rule applies) the table lists the ROWS longest, as a fleet's, and the sentence under
    # it counts the rest.
    from inference_obs.report.sections.queues import FEW_ROWS, FOLDED, ROWS, _intervals

    q = built.deployments[0].of(analyses.queueing)
    listed = [i for i in q.intervals if i.classification not in FOLDED]
    assert len(listed) == 9 < FEW_ROWS == 10
    table = next(iter(_intervals(q)))
    assert isinstance(table, Table)
    assert len(table.rows) == len(listed)
    many = q.model_copy(update={"intervals": q.intervals * 5})
    table, said = list(_intervals(many))[:2]
    assert isinstance(table, Table)
    assert isinstance(said, Paragraph)
    assert len(table.rows) == ROWS == 3
    shown = sorted(int(row[4]) for row in table.rows)
    assert shown[0] >= sorted((i.samples for i in listed), reverse=True)[(ROWS - 1) // 5]
    assert f"The {ROWS} longest of {5 * len(listed)} such intervals" in said.text
    assert "Not listed (no queue" in said.text  # the busy and idle ones, in the same paragraph
