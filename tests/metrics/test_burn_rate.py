"""Burn-rate rules for latency SLOs: promtool accepts them, and they fire when they should.

``promtool test rules`` evaluates the exported rules on input series written
here by hand: a model whose requests miss ``ttft<=1s@99%`` half the time
(error ratio 0.5, above both 14.4 x 1% and 6 x 1%) pages on both pairs; one
missing 8% of the time (above 6%, below 14.4%) pages on the slow pair only;
one missing 0.1% of the time pages on neither.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from inference_obs.cli import main
from inference_obs.errors import ConfigurationError
from inference_obs.metrics.burn_rate import bucket_bound, burn_rate_rules, error_ratio_record
from inference_obs.metrics.export import export_files
from inference_obs.metrics.slo import parse_target
from inference_obs.query import Matcher, parse, selectors

REPO = Path(__file__).resolve().parents[2]
TTFT = "vllm:time_to_first_token_seconds_bucket"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run scripts/check, which installs Debian's prometheus"
    return subprocess.run(
        [promtool, *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_accepts_the_exported_slo_rules(tmp_path: Path) -> None:
    path = tmp_path / "slo-rules.yml"
    path.write_text(export_files()["slo-rules.yml"], encoding="utf-8")
    result = _promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    # Three default targets x (4 error-ratio windows + 2 alerts).
    assert "SUCCESS: 18 rules found" in result.stdout


def _series(model: str, good_per_minute: int, total_per_minute: int) -> list[dict[str, str]]:
    """Cumulative bucket counters growing by these counts each minute, for 7 hours."""
    return [
        {"series": f'{TTFT}{{le="{le}",model_name="{model}"}}', "values": f"0+{step}x420"}
        for le, step in (("1.0", good_per_minute), ("+Inf", total_per_minute))
    ]


#: The pairs' words, by hand: 14.4x over 1h/5m spends 30 days' budget in 30 / 14.4 = 2.08
#: days; 6x over 6h/30m in 5 days.
WORDS = {"fast": ("14.4", "1h", "5m", "2.08"), "slow": ("6", "6h", "30m", "5")}


def _alert(target: str, speed: str, model: str) -> dict[str, object]:
    burn, long, short, days = WORDS[speed]
    return {
        "exp_labels": {
            "model_name": model,
            "slo": target,
            "bucket": "le=1",
            "severity": "page",
        },
        "exp_annotations": {
            "summary": f"{target}: error budget burning at over {burn}x over {long} and {short}",
            "description": f"Share of requests above 1 s over {long} and {short} is above "
            f"{burn} x 0.01: at this rate the 30-day budget lasts {days} days.",
        },
    }


def test_the_alerts_fire_on_a_breach_and_stay_quiet_without_one(tmp_path: Path) -> None:
    target = parse_target("ttft<=1s@99%")
    (tmp_path / "slo-rules.yml").write_text(burn_rate_rules([target]), encoding="utf-8")
    at = "6h30m"  # past the longest window, so every window is full
    tests = {
        "rule_files": ["slo-rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    *_series("breach", 50, 100),  # 50% errors: 0.5 > 0.144 and > 0.06
                    *_series("slow", 92, 100),  # 8% errors: > 0.06, < 0.144
                    *_series("fine", 999, 1000),  # 0.1% errors: below both
                ],
                "promql_expr_test": [
                    {
                        # The recorded 1h error ratio of the breach, by hand: 1 - 50/100.
                        "expr": f'{error_ratio_record(target, 3600)}{{model_name="breach"}}',
                        "eval_time": at,
                        "exp_samples": [
                            {
                                "labels": f"{error_ratio_record(target, 3600)}"
                                '{bucket="le=1",model_name="breach",slo="ttft<=1s@99%"}',
                                "value": 0.5,
                            }
                        ],
                    }
                ],
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": "SloTtftLe1sFastBurn",
                        "exp_alerts": [_alert(target.text, "fast", "breach")],
                    },
                    {
                        "eval_time": at,
                        "alertname": "SloTtftLe1sSlowBurn",
                        "exp_alerts": [
                            _alert(target.text, "slow", "breach"),
                            _alert(target.text, "slow", "slow"),
                        ],
                    },
                ],
            }
        ],
    }
    path = tmp_path / "slo-rules.test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    result = _promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_notices_a_missing_alert(tmp_path: Path) -> None:
    # The unit test above must be able to fail: expecting the fine model to page fails.
    target = parse_target("ttft<=1s@99%")
    (tmp_path / "slo-rules.yml").write_text(burn_rate_rules([target]), encoding="utf-8")
    tests = {
        "rule_files": ["slo-rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _series("fine", 999, 1000),
                "alert_rule_test": [
                    {
                        "eval_time": "6h30m",
                        "alertname": "SloTtftLe1sFastBurn",
                        "exp_alerts": [_alert(target.text, "fast", "fine")],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "wrong.test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    assert _promtool("test", "rules", str(path)).returncode != 0


def test_a_threshold_between_bounds_reads_the_bound_below_it() -> None:
    # vLLM's default TTFT bounds around 2 s are 1 s and 2.5 s: counting against 1 s alerts
    # early (requests of 1-2 s count as errors), never late.
    assert bucket_bound(parse_target("ttft<=2s@99%")) == 1.0
    assert bucket_bound(parse_target("itl<=50ms@99%")) == 0.05
    with pytest.raises(ConfigurationError, match="objective"):
        burn_rate_rules([parse_target("ttft<=1s")])
    with pytest.raises(ConfigurationError, match="no default bucket bound"):
        burn_rate_rules([parse_target("ttft<=0.5ms@99%")])


@pytest.mark.parametrize("value", ['say "hi"', "back\\slash", "two\nlines", "\\\"'\n`"])
def test_hostile_label_values_render_valid_promql(value: str, tmp_path: Path) -> None:
    text = burn_rate_rules([parse_target("e2e<=30s@99%")], [Matcher.equal("namespace", value)])
    path = tmp_path / "rules.yml"
    path.write_text(text, encoding="utf-8")
    result = _promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    rules = [r for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "record" in r]
    for rule in rules:
        found = [s for s in selectors(parse(rule["expr"])) if (s.metric or "").endswith("_bucket")]
        assert found
        for selector in found:
            (namespace,) = [m for m in selector.matchers if m.label == "namespace"]
            assert namespace.value == value  # the value survives quoting unchanged


def test_lint_finds_nothing_in_the_committed_queries(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(REPO / "queries")]) == 0
    assert " 0 findings in " in " " + capsys.readouterr().out
    assert (REPO / "queries" / "slo-rules.yml").read_text(encoding="utf-8") == (
        export_files()["slo-rules.yml"]
    )
