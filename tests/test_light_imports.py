"""``import inference_obs``, and every command that draws nothing, loads neither pandas,
matplotlib nor scipy.

Each entry point runs in a fresh interpreter (this one has loaded all three), which then
prints which of them it holds; the commands run through :func:`inference_obs.cli.main` on
real inputs (a generated 200-panel dashboard, saved real ``/metrics`` answers, a fake
exporter serving them) and must succeed, so a command that failed early cannot pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import inference_obs
from benchmarks import imports as imports_runner
from benchmarks.lint import dashboard
from inference_obs.source.dataset.reader import MANIFEST, REQUESTS, SAMPLES
from tests.source.fake_exporters import FakeExporter, advancing, real_text

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "matplotlib", "scipy")
VLLM = real_text("vllm_v0_metrics_paste.prom")


def _run(
    code: str, cwd: Path = ROOT, heavy: tuple[str, ...] = HEAVY
) -> tuple[object, list[str], str]:
    """Run ``code`` (which leaves its result in ``result``) in a fresh interpreter: the
    result, the heavy modules it holds afterwards, and what it printed before them."""
    script = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps([result, sorted(m for m in {heavy!r} if m in sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    *printed, last = done.stdout.splitlines()
    result, loaded = json.loads(last)
    return result, loaded, "\n".join(printed)


def run_cli(
    *argv: str, cwd: Path = ROOT, heavy: tuple[str, ...] = HEAVY
) -> tuple[object, list[str], str]:
    """``inference-obs ARGV`` in a fresh interpreter: exit status, heavy modules, output."""
    code = (
        "from inference_obs.cli import main\n"
        "try:\n"
        f"    result = main({list(argv)!r})\n"
        "except SystemExit as exc:  # argparse's --version and --help exit\n"
        "    result = exc.code\n"
    )
    return _run(code, cwd, heavy)


def test_import_inference_obs_loads_none() -> None:
    # Every public name resolves (the lazy ones below), and none of the three is loaded.
    result, loaded, _ = _run(
        "import inference_obs as obs\nresult = [n for n in obs.__all__ if hasattr(obs, n)]"
    )
    assert result == inference_obs.__all__
    assert loaded == []


def test_reading_the_lazy_names_loads_their_modules_and_still_none_of_the_three() -> None:
    # The names bound when first read (the analyses, the sources, the report model):
    # each is the real object, and building a report's pipeline needs none of the three.
    code = (
        "import inspect\n"
        "import inference_obs as obs\n"
        "from inference_obs.report.from_source import report\n"
        "result = [obs.report is report, inspect.ismodule(obs.analyses),\n"
        "          obs.DatasetSource.__name__, obs.PrometheusSource.__name__,\n"
        "          obs.Report.__name__, obs.read_dataset.__name__, obs.load_deployments.__name__]\n"
    )
    result, loaded, _ = _run(code)
    assert result == [
        True,
        True,
        "DatasetSource",
        "PrometheusSource",
        "Report",
        "read_dataset",
        "load_deployments",
    ]
    assert loaded == []


def test_report_json_and_with_baseline_stay_functions_after_every_report_module() -> None:
    # Like obs.report, both share their name with a submodule: the package binds the
    # functions before the submodules could be bound in their place.
    code = (
        "import importlib, inspect, pkgutil\n"
        "package = importlib.import_module('inference_obs.report')\n"
        "for m in pkgutil.iter_modules(package.__path__, 'inference_obs.report.'):\n"
        "    importlib.import_module(m.name)\n"
        "from inference_obs.report import report_json, with_baseline\n"
        "result = [inspect.isfunction(report_json), inspect.isfunction(with_baseline)]\n"
    )
    result, _, _ = _run(code)
    assert result == [True, True]


def test_version_loads_none() -> None:
    status, loaded, printed = run_cli("--version")
    assert status == 0
    assert printed.startswith("inference-obs ")
    assert loaded == []


def test_lint_of_a_200_panel_dashboard_loads_none(tmp_path: Path) -> None:
    path = tmp_path / "dashboard.json"
    path.write_text(json.dumps(dashboard(200)))
    status, loaded, printed = run_cli("lint", str(path))
    # The generated dashboard holds wrong shapes on purpose (averaged quantiles, ...).
    assert status == 1
    assert "errors" in printed.splitlines()[-1]
    assert loaded == []


def test_import_version_and_lint_load_no_numpy_either(tmp_path: Path) -> None:
    # numpy is a tenth of a second of these commands' time: they read no samples.
    path = tmp_path / "dashboard.json"
    path.write_text(json.dumps(dashboard(200)))
    code = (
        "import sys\n"
        "import inference_obs\n"
        "from inference_obs.cli import main\n"
        "result = ['numpy' in sys.modules]\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "result.append('numpy' in sys.modules)\n"
        f"result.append(main(['lint', {str(path)!r}]))\n"
        "result.append('numpy' in sys.modules)\n"
    )
    result, _, _ = _run(code)
    assert result == [False, False, 1, False]


@pytest.mark.parametrize(
    "argv",
    [("queries", "list"), ("queries", "show", "vllm_ttft_p99_seconds"), ("catalogue",)],
)
def test_catalogue_commands_load_none(argv: tuple[str, ...]) -> None:
    # The catalogue's commands read no samples: no numpy either.
    status, loaded, printed = run_cli(*argv, heavy=(*HEAVY, "numpy"))
    assert status == 0
    assert printed
    assert loaded == []


def test_queries_export_loads_none(tmp_path: Path) -> None:
    status, loaded, _ = run_cli(
        "queries", "export", "--out", str(tmp_path / "queries"), heavy=(*HEAVY, "numpy")
    )
    assert status == 0
    assert any((tmp_path / "queries").iterdir())
    assert loaded == []


def test_capture_loads_none(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with FakeExporter(lambda n: advancing(VLLM, n)) as engine:
        status, loaded, _ = run_cli(
            "capture", "--url", f"vllm={engine.url}", "--interval", "200ms",
            "--duration", "1s", "--out", str(out),
        )  # fmt: skip
    assert status == 0
    assert (out / MANIFEST).is_file()
    assert (out / SAMPLES).is_file()
    assert loaded == []


def test_dataset_from_scrapes_and_discover_on_it_load_none(tmp_path: Path) -> None:
    # Three saved answers of the real vLLM paste, 15 s apart, as `dataset from-scrapes` reads them.
    scrapes = tmp_path / "scrapes.prom"
    scrapes.write_text(
        "\n".join(
            f"# SCRAPE {1_777_000_000 + 15 * n} vllm=http://10.0.0.1:8000\n{advancing(VLLM, n)}"
            for n in range(3)
        )
    )
    out = tmp_path / "ds"
    status, loaded, _ = run_cli("dataset", "from-scrapes", str(scrapes), "--out", str(out))
    assert status == 0
    assert loaded == []
    # A dataset with no requests.csv: discover reads label sets only (requests.csv, where
    # a dataset has one, is read with pandas).
    assert not (out / REQUESTS).exists()
    found = tmp_path / "deployments.yaml"
    status, loaded, _ = run_cli("discover", "--dataset", str(out), "--out", str(found))
    assert status == 0
    assert "mymodelname" in found.read_text()
    assert loaded == []


def test_the_imports_runner_prints_each_command_and_what_it_loaded(
    capsys: pytest.CaptureFixture[str],
) -> None:
    imports_runner.main(["--rounds", "1"])
    out = capsys.readouterr().out
    for command in ("import inference_obs", "--version", "lint"):
        (row,) = [line for line in out.splitlines() if line.startswith(f"{command} ")]
        assert row.endswith("none of the three"), row
    assert "goal" in out
