"""Fixtures every test package shares.

``source``: the bundled dataset (datasets/pro5000-vs-h20) read offline, one
per test module, so that what a module's tests ask is kept between them and
not across modules. A module on other data defines its own ``source``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.source.dataset.source import DatasetSource

#: The dataset the README's report reads by default.
BUNDLED = Path(__file__).resolve().parents[1] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def source() -> DatasetSource:
    """The bundled dataset as an offline source, one per module."""
    return DatasetSource(BUNDLED)
