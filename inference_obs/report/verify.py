"""A dataset's published numbers recomputed from its samples: the directory read, then checked.

:func:`verify_dataset` reads a dataset directory and hands what it publishes
(``aggregates.json``, ``requests.csv``) and its samples to
:func:`~inference_obs.analyses.verify.verify_published`, which recomputes
every number with the analyses and says where they differ.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from inference_obs.analyses.verify import Published, VerifyResult, verify_published
from inference_obs.engine.rules import Rules
from inference_obs.source.base import Source
from inference_obs.source.dataset.reader import AGGREGATES, Dataset, read_dataset
from inference_obs.source.dataset.source import DatasetSource

__all__ = ["verify_dataset"]


def _samples(dataset: Dataset, rules: Rules | None) -> Source:
    return DatasetSource(dataset) if rules is None else DatasetSource(dataset, rules=rules)


def verify_dataset(path: str | Path, *, rel_tol: float = 1e-9) -> VerifyResult:
    """Recompute the published numbers of the dataset at ``path`` from its samples.

    Parameters
    ----------
    path
        A dataset directory.
    rel_tol
        Relative tolerance: a difference up to ``rel_tol`` times the larger
        magnitude counts as equal (plus the rounding of simulated numbers).

    Returns
    -------
    VerifyResult
        One row per published number; no rows when there is no ``aggregates.json``.

    Raises
    ------
    DatasetError
        If the dataset does not read, or its aggregates name an unknown rule
        set or an invalid window.
    NotSupportedOffline
        If the aggregates name ``victoriametrics`` rules, whose
        histogram_quantile the local engine does not model.
    """
    dataset = read_dataset(Path(path))
    published = Published(
        path=str(dataset.path),
        aggregates=dataset.aggregates,
        where=str(dataset.path / AGGREGATES),
        window=dataset.manifest.window.window(),
        deployments=dataset.manifest.deployments,
        requests=dataset.requests,
    )
    return verify_published(published, partial(_samples, dataset), rel_tol=rel_tol)
