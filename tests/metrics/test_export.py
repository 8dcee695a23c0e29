"""The exported query files are current, and promtool accepts the rules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from inference_obs.metrics import STANDARD_QUERIES
from inference_obs.metrics.export import export_files, record_name
from inference_obs.query import to_promql

REPO = Path(__file__).resolve().parents[2]


def test_committed_queries_folder_is_current() -> None:
    folder = REPO / "queries"
    files = export_files()
    stale = [
        p
        for p, text in files.items()
        if not (folder / p).is_file() or (folder / p).read_text(encoding="utf-8") != text
    ]
    extra = [p for p in folder.glob("promql/*.promql") if str(p.relative_to(folder)) not in files]
    assert (stale, extra) == ([], []), (
        f"stale: {stale}, not in the catalogue: {extra}; run `inference-obs queries export`"
    )


def test_each_promql_file_ends_with_the_query_and_documents_it() -> None:
    files = export_files()
    for query in STANDARD_QUERIES:
        lines = files[f"promql/{query.key}.promql"].splitlines()
        assert lines[0] == f"# {query.title}"
        assert all(line.startswith("#") for line in lines[:-1])
        assert lines[-1] == to_promql(query.expr(window=3600))
        assert any(f"Unit: {query.unit}." in line for line in lines)


def test_rules_file_holds_every_query_once() -> None:
    rules = yaml.safe_load(export_files()["recording-rules.yml"])
    records = [r["record"] for g in rules["groups"] for r in g["rules"]]
    assert sorted(records) == sorted(record_name(q) for q in STANDARD_QUERIES)
    assert len(records) == len(set(records))


def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run scripts/check, which installs Debian's prometheus"
    path = tmp_path / "recording-rules.yml"
    path.write_text(export_files()["recording-rules.yml"], encoding="utf-8")
    result = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(STANDARD_QUERIES)} rules found" in result.stdout
