"""Same scenario and seed, same bytes; another seed, other bytes; shipped datasets reproduce."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference_obs.simulate import simulate
from inference_obs.simulate.__main__ import main

from .conftest import SHIPPED, SMALL, Observed

DATASETS = Path(__file__).parents[2] / "datasets"
# The data files of a dataset (manifest.json records their checksums).
FILES = ("samples.om", "requests.csv", "aggregates.json")


def _bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_same_seed_gives_identical_files(tmp_path: Path) -> None:
    first = simulate(SMALL, tmp_path / "a")
    second = simulate(SMALL, tmp_path / "b")
    assert _bytes(tmp_path / "a") == _bytes(tmp_path / "b")
    assert first.manifest.files == second.manifest.files
    assert set(first.manifest.files) == set(FILES)


def test_another_seed_changes_every_data_file(tmp_path: Path) -> None:
    default = simulate(SMALL, tmp_path / "a")
    other = simulate(SMALL, tmp_path / "b", seed=8)
    assert other.manifest.generator is not None
    assert other.manifest.generator.seed == 8
    for name in FILES:
        assert default.manifest.files[name] != other.manifest.files[name], name


@pytest.mark.parametrize("name", SHIPPED)
def test_committed_datasets_are_what_the_simulator_makes(
    name: str, shipped: dict[str, Observed]
) -> None:
    committed = json.loads((DATASETS / name / "manifest.json").read_text(encoding="utf-8"))
    assert committed["files"] == shipped[name].dataset.manifest.files, (
        f"datasets/{name} is stale: regenerate it with "
        f"python -m inference_obs.simulate {name} --out datasets/{name}"
    )


@pytest.mark.parametrize("name", SHIPPED)
def test_committed_datasets_are_small(name: str) -> None:
    size = sum(p.stat().st_size for p in (DATASETS / name).iterdir())
    assert size < 10_000_000, f"datasets/{name} holds {size} bytes"


def test_module_entry_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(SMALL), "--out", str(tmp_path / "out"), "--seed", "3"]) == 0
    printed = capsys.readouterr().out.split()
    assert sorted(Path(p).name for p in printed) == sorted((*FILES, "manifest.json"))
    assert main(["no-such-scenario", "--out", str(tmp_path / "x")]) == 2
    assert "no scenario named 'no-such-scenario'" in capsys.readouterr().err
