"""``inference-obs report`` and ``compare``: the default run, options and exit statuses."""

from __future__ import annotations

import csv
import json
import math
import shutil
import socket
from pathlib import Path

import pytest
import yaml

from inference_obs.cli import (
    EXIT_INVALID,
    EXIT_NO_DATA,
    EXIT_OK,
    EXIT_SOURCE,
    EXIT_USAGE,
    main,
)

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "datasets" / "pro5000-vs-h20"
H100 = ROOT / "datasets" / "h100-vs-h200"


def test_the_default_report_regenerates_the_bundled_dataset_where_there_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["report"]) == EXIT_OK
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[:3] == [f"wrote {Path('report') / f'report.{x}'}" for x in ("md", "html", "json")]
    figures = sorted(str(p) for p in Path("report", "figures").glob("*.png"))
    assert lines[3:] == [f"wrote {p}" for p in figures]  # the figures are listed too
    assert len(figures) == 6
    assert "regenerating it from its scenario" in err
    regenerated = tmp_path / "cache" / "inference-obs" / "pro5000-vs-h20"
    # The regenerated dataset is the bundled one, byte for byte.
    for name in ("manifest.json", "samples.om"):
        assert (regenerated / name).read_bytes() == (DATASET / name).read_bytes(), name
    data = json.loads((tmp_path / "report" / "report.json").read_text())
    assert data["scope"]["source"] == str(regenerated)


def test_hidden_files_in_a_dataset_are_ignored_and_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "dataset"
    shutil.copytree(DATASET, copy)
    (copy / ".DS_Store").write_bytes(b"Bud1")
    (copy / ".ipynb_checkpoints").mkdir()
    argv = ["report", "--dataset", str(copy), "--out", str(tmp_path / "out"), "--quiet"]
    assert main([*argv, "--format", "json"]) == EXIT_OK
    err = capsys.readouterr().err
    assert err.count("ignored hidden entries .DS_Store, .ipynb_checkpoints") == 1, err


def test_quiet_json_only_with_a_price(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "report",
            "--dataset",
            str(DATASET),
            "--out",
            str(tmp_path),
            "--quiet",
            "--format",
            "json",
            "--gpu-hour-price",
            "PRO=1.5",
            "--gpu-hour-price",
            "H20=2",
        ]
    )
    assert code == EXIT_OK
    assert capsys.readouterr() == ("", "")
    # JSON only: no Markdown, HTML or figures; every replica's numbers beside it as CSV,
    # and the hidden list of the files the report wrote.
    written = ["replicas.csv", "report.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".inference-obs-report.json", *written]
    data = json.loads((tmp_path / "report.json").read_text())
    assert any(m["key"] == "PRO/cost/cost" for m in data["measurements"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--end", "2026-10-19T18:40:00", "--window", "1h"], "has no timezone"),
        (["--window", "1h"], "need --end"),
        (["--gpu-hour-price", "PRO"], "expected NAME=PRICE"),
        (["--format", "pdf"], "pdf"),
        (["--resolution", "fine"], "expected auto, scrape, or a tile width"),
        # The bundled window is an hour: 7 s tiles would be 514.3 of them.
        (["--resolution", "7"], "7 s does not cut the 3600 s window"),
    ],
)
def test_bad_options_name_themselves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = main(["report", "--dataset", str(DATASET), "--out", str(tmp_path), *args])
    assert code == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_live_without_deployments_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--prometheus", "http://127.0.0.1:9"]) == EXIT_USAGE
    assert "--deployments" in capsys.readouterr().err


def test_an_unreachable_server_is_a_source_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(
        [
            "report",
            "--prometheus",
            f"http://127.0.0.1:{port}",
            "--deployments",
            str(DATASET / "manifest.json"),
            "--end",
            "2026-10-19T18:40:00+08:00",
            "--window",
            "1h",
            "--out",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert code == EXIT_SOURCE
    assert "source error" in capsys.readouterr().err


def test_deployments_matching_nothing_exit_with_no_data(tmp_path: Path) -> None:
    manifest = json.loads((DATASET / "manifest.json").read_text())
    nothing = manifest["deployments"][:1]
    nothing[0]["selector"] = {"pod": "~no-such-pod-.*"}
    path = tmp_path / "deployments.yaml"
    path.write_text(yaml.safe_dump({"deployments": nothing}))
    code = main(
        [
            "report",
            "--dataset",
            str(DATASET),
            "--deployments",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--quiet",
        ]
    )
    assert code == EXIT_NO_DATA
    assert (tmp_path / "out" / "report.md").is_file()  # written all the same


def test_compare_prints_verdicts_and_fails_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--dataset", str(H100)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "itl_p95" in out
    assert "concurrency_differs" in out
    assert main(["compare", "--dataset", str(H100), "--fail-on", "invalid"]) == EXIT_INVALID
    assert main(["compare", "--dataset", str(H100), "--fail-on", "caveated"]) == EXIT_INVALID


def test_compare_fits_its_tables_to_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["compare", "--dataset", str(DATASET)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert "PRO vs H20" in lines
    # Numbers as the report shows them: significant digits, no exponent.
    row = next(line for line in lines if line.startswith("output_throughput "))
    assert row.split()[:4] == ["output_throughput", "invalid", "7.828", "431.1"]
    assert not any("e+0" in line for line in lines)


def _true_p(values: list[float], q: float) -> float:
    """The smallest value with at least ``q`` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def test_compare_shows_quantiles_as_the_report_does_and_summarises_findings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["compare", "--dataset", str(DATASET)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    # Ground truth: every finished request's queue time and TTFT, per deployment.
    truth: dict[str, dict[str, list[float]]] = {}
    with (DATASET / "requests.csv").open(encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["outcome"] == "finished":
                one = truth.setdefault(r["deployment"], {"queue_time": [], "ttft": []})
                one["queue_time"].append(float(r["queue_time"]))
                one["ttft"].append(float(r["ttft"]))
    # Both queue-time P50s are under a second, in the histogram's lowest bucket (0, 1]:
    # known only as "≤ 1 s", and indistinguishable (same_bucket); never 0.5638 and 0.5012.
    assert all(_true_p(t["queue_time"], 0.5) <= 1.0 for t in truth.values())
    queue = next(line for line in lines if line.startswith("queue_p50 "))
    assert queue.count("≤ 1 s") == 2
    assert "same_bucket" in queue
    # PRO's TTFT P95 lies between the 20 s and 40 s bucket bounds: the bracket is shown.
    assert 20 < _true_p(truth["PRO"]["ttft"], 0.95) <= 40
    ttft = next(i for i, line in enumerate(lines) if line.startswith("ttft_p95 "))
    assert "[20, 40]" in " ".join(lines[ttft : ttft + 2])
    # Findings summarised, not every code wrapped into each row: the row holds the count,
    # a summary names the weightiest few per group of comparisons ("and N more"), and the
    # whole fits in a screenful or two (25 comparisons, 20 findings), where every finding
    # on every row took 206 lines.
    assert "_differs" not in queue
    assert "and 6 more" in "\n".join(lines)
    assert len(lines) <= 130


def test_a_topology_file_gives_findings_not_contradictions_in_the_report(tmp_path: Path) -> None:
    # The H100 box of the H100 vs H200 write-up: NVLink only in pairs.
    topology = ROOT / "tests" / "fixtures" / "topology" / "h100-pairs.txt"
    code = main(
        [
            "report",
            "--dataset",
            str(H100),
            "--out",
            str(tmp_path),
            "--quiet",
            "--format",
            "md,json",
            "--topology",
            f"H100={topology}",
        ]
    )
    assert code == EXIT_OK
    text = (tmp_path / "report.md").read_text()
    section = text.split("## Declared and verified configuration")[1].split("\n## ")[0]
    table, h100 = section.split("### H100 topology")
    # The declared TP 4 crosses PCIe between the pairs: a topology finding with what it
    # means, not a contradiction of the declared configuration (the box does run TP 4).
    assert "| contradicted:" not in table
    assert "Topology:" in h100
    assert "- tensor parallel over 4 GPUs crosses PCIe (PHB)" in h100
    assert "TP 2 per group would stay on NVLink" in h100
    header = next(line for line in table.splitlines() if line.startswith("| field |"))
    assert header.split(" | ")[1:3] == ["H100", "H200"]
    tp = next(line for line in table.splitlines() if line.startswith("| config.tensor_parallel"))
    assert tp.split(" | ")[1].startswith("consistent: 4 declared")  # a count never verifies TP
    assert "### H200 topology" not in section
    data = json.loads((tmp_path / "report.json").read_text())
    (pair,) = data["comparisons"]
    assert "config_contradicted" not in {f["code"] for f in pair["findings"]}
    h100_json = next(d for d in data["deployments"] if d["name"] == "H100")
    (found,) = h100_json["topology_findings"]
    assert (found["group"]["gpus"], found["group"]["path"]) == (4, "pcie")


def test_an_unreadable_topology_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "topo.txt"
    bad.write_text("GPU0 GPU1\nGPU0 X NV4\nGPU1 PHB X\n")
    code = main(
        [
            "report",
            "--dataset",
            str(H100),
            "--out",
            str(tmp_path / "out"),
            "--quiet",
            "--topology",
            f"H100={bad}",
        ]
    )
    assert code == EXIT_USAGE
    assert "line" in capsys.readouterr().err


def test_a_tile_width_is_read_and_reported(tmp_path: Path) -> None:
    out = tmp_path / "tiled"
    argv = ["report", "--dataset", str(DATASET), "--out", str(out), "--quiet"]
    assert main([*argv, "--resolution", "2m", "--format", "md,json"]) == EXIT_OK
    data = json.loads((out / "report.json").read_text())
    assert [d["step_seconds"] for d in data["deployments"]] == [120.0, 120.0]
    shares = [m for m in data["measurements"] if m["statistic"] == "waiting_sample_share"]
    assert all("120 s tiles" in m["provenance"]["computation"] for m in shares), shares
    text = (out / "report.md").read_text()
    assert "Rows are 120 s tiles: samples counts tiles." in text
    assert main([*argv, "--resolution", "scrape", "--format", "json"]) == EXIT_OK
    data = json.loads((out / "report.json").read_text())
    assert [d["step_seconds"] for d in data["deployments"]] == [None, None]


def test_compare_reads_tiles_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--dataset", str(DATASET), "--resolution", "120"]) == EXIT_OK
    assert "throughput" in capsys.readouterr().out
    assert main(["compare", "--dataset", str(DATASET), "--resolution", "7"]) == EXIT_USAGE
    assert "does not cut" in capsys.readouterr().err


def test_compare_honours_analysis_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A TTFT SLA of 250 ms (a bucket bound: the share within it is exact) counts only the
    # tokens of requests whose first token came within it: cost per useful token rises by
    # 1 / that share. Ground truth: the share of PRO's finished requests with TTFT <= 0.25 s.
    monkeypatch.setenv("COLUMNS", "200")
    with (DATASET / "requests.csv").open(encoding="utf-8") as f:
        ttft = [
            float(r["ttft"])
            for r in csv.DictReader(f)
            if r["deployment"] == "PRO" and r["outcome"] == "finished"
        ]
    share = sum(t <= 0.25 for t in ttft) / len(ttft)
    assert 0.5 < share < 0.95
    priced = ["compare", "--dataset", str(DATASET), "--gpu-hour-price", "PRO=2.5"]
    priced += ["--gpu-hour-price", "H20=1.8"]

    def pro_cost(*options: str) -> float:
        assert main([*priced, *options]) == EXIT_OK
        lines = capsys.readouterr().out.splitlines()
        (row,) = [line for line in lines if line.startswith("cost_per_token ")]
        return float(row.split()[2].replace(",", ""))

    # 2% for the requests at the window's edges, which requests.csv counts and the
    # histograms' window does not.
    assert pro_cost() / pro_cost("--set", "cost.sla_ttft_s=0.25") == pytest.approx(share, rel=0.02)
