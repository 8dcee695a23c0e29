"""Shared simulations: each shipped scenario is simulated once per session and read back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from inference_obs.samples import Series
from inference_obs.simulate import Simulation, run_scenario, write_simulation
from inference_obs.source.dataset.reader import Dataset, read_dataset

SMALL = Path(__file__).with_name("small.yaml")
SHIPPED = ("pro5000-vs-h20", "h100-vs-h200", "r1-decode")


@dataclass(frozen=True)
class Observed:
    """A simulation, and the dataset it wrote as read back from disk."""

    sim: Simulation
    dataset: Dataset
    series: tuple[Series, ...]

    @property
    def start_ms(self) -> int:
        return self.sim.window_start_ms

    @property
    def end_ms(self) -> int:
        return self.start_ms + round(self.sim.scenario.window.duration * 1000)

    def select(self, name: str, **labels: str) -> list[Series]:
        """Series named ``name`` whose labels include ``labels``."""
        return [
            s
            for s in self.series
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def offsets(self, series: Series) -> npt.NDArray[np.float64]:
        """Sample times of ``series``, seconds from the window start (the simulator's clock)."""
        out: npt.NDArray[np.float64] = (series.t_ms - self.start_ms) / 1000.0
        return out


def _observe(sim: Simulation, folder: Path) -> Observed:
    write_simulation(sim, folder)
    dataset = read_dataset(folder)
    return Observed(sim, dataset, tuple(dataset.samples))


@pytest.fixture(scope="session")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Observed]:
    """Every shipped scenario at its default seed, simulated and written once."""
    root = tmp_path_factory.mktemp("shipped")
    return {name: _observe(run_scenario(name), root / name) for name in SHIPPED}


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> Observed:
    """The small test scenario with every fault."""
    return _observe(run_scenario(SMALL), tmp_path_factory.mktemp("small") / "data")
