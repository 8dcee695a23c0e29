"""The command line: exit codes, output, and errors that name the bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.cli import main, parse_matcher
from inference_obs.errors import InferenceObsError
from inference_obs.metrics import STANDARD_QUERIES
from inference_obs.query import MatchOp


def test_queries_show_applies_matchers_window_and_grouping(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(
        [
            "queries",
            "show",
            "dcgm_gpu_utilisation_percent",
            "--match",
            "pod=~pro-model-.*",
            "--match",
            "namespace=prod",
            "--window",
            "30m",
            "--by",
            "",
        ]
    )
    assert status == 0
    selector = 'DCGM_FI_DEV_GPU_UTIL{pod=~"pro-model-.*",namespace="prod"}[30m]'
    assert capsys.readouterr().out == (
        f"sum(sum_over_time({selector})) / sum(count_over_time({selector}))\n"
    )


def test_queries_show_rejects_bad_input_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queries", "show", "nope"]) == 2
    assert "no standard query 'nope'" in capsys.readouterr().err
    assert main(["queries", "show", "vllm_ttft_p95_seconds", "--window", "an hour"]) == 2
    assert "'an hour'" in capsys.readouterr().err
    assert main(["queries", "show", "vllm_ttft_p95_seconds", "--match", "bad-label=1"]) == 2
    assert "'bad-label' is not a valid label name" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "label", "op", "value"),
    [
        ("pod=a", "pod", MatchOp.EQ, "a"),
        ("pod!=a", "pod", MatchOp.NE, "a"),
        ("pod=~a.*", "pod", MatchOp.RE, "a.*"),
        ("pod!~a.*", "pod", MatchOp.NRE, "a.*"),
        ("pod=a=b", "pod", MatchOp.EQ, "a=b"),
        ("pod=", "pod", MatchOp.EQ, ""),
    ],
)
def test_parse_matcher(text: str, label: str, op: MatchOp, value: str) -> None:
    matcher = parse_matcher(text)
    assert (matcher.label, matcher.op, matcher.value) == (label, op, value)


def test_parse_matcher_without_operator() -> None:
    with pytest.raises(InferenceObsError, match="expected LABEL=VALUE"):
        parse_matcher("pod")


def test_export_writes_then_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "queries"
    assert main(["queries", "export", "--out", str(out), "--check"]) == 1
    assert main(["queries", "export", "--out", str(out)]) == 0
    assert len(list((out / "promql").glob("*.promql"))) == len(STANDARD_QUERIES)
    assert main(["queries", "export", "--out", str(out), "--check"]) == 0
    (out / "promql" / "retired.promql").write_text("up\n", encoding="utf-8")
    (out / "README.md").write_text("edited\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["queries", "export", "--out", str(out), "--check"]) == 1
    err = capsys.readouterr().err
    assert "retired.promql" in err
    assert "README.md" in err
    assert main(["queries", "export", "--out", str(out)]) == 0
    assert not (out / "promql" / "retired.promql").exists()
    assert main(["queries", "export", "--out", str(out), "--check"]) == 0


def test_catalogue_filters_by_exporter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalogue", "--exporter", "dcgm"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("DCGM_FI_DEV_GPU_UTIL\tgauge\tpercent") for line in lines)
    assert all(line.startswith(("DCGM_", "dcgm_")) for line in lines)


def test_simulate_writes_a_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from inference_obs.source.dataset.reader import read_dataset

    scenario = Path(__file__).parent / "simulate" / "small.yaml"
    assert main(["simulate", str(scenario), "--out", str(tmp_path / "d"), "--seed", "3"]) == 0
    assert "synthetic" in capsys.readouterr().out
    dataset = read_dataset(tmp_path / "d")
    assert dataset.manifest.generator is not None
    assert dataset.manifest.generator.seed == 3
    assert main(["simulate", "no-such-scenario", "--out", str(tmp_path / "e")]) == 2
    assert "no-such-scenario" in capsys.readouterr().err
