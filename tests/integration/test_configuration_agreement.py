"""``configuration`` gives the same checks offline and from a real Prometheus.

For every bundled dataset and each of its deployments, the analysis runs over
the manifest window through
:class:`~inference_obs.source.dataset.source.DatasetSource` and through
:class:`~inference_obs.source.prometheus.PrometheusSource` on Prometheus 2.42
holding the same samples (backfilled with promtool, as in
``test_analyses_agreement``). Every check has the same declared and observed
values, status, reason and queries, and every Measurement (KV capacity, draft
length) the same status and value to 1e-9 relative.
"""

from __future__ import annotations

import pytest

from inference_obs.analyses.configuration import Check, CheckStatus, configuration
from inference_obs.engine.rules import Rules
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.test_analyses_agreement import _disagreements, backfilled
from tests.test_topology import H100_PAIRS

pytestmark = pytest.mark.integration

# The same per-dataset Prometheus fixture as the other analyses' agreement test.
__all__ = ["backfilled"]


def _plain(check: Check) -> tuple[object, ...]:
    promql = check.provenance.promql if check.provenance else ()
    return (check.field, check.declared, check.observed, check.status, check.reason, promql)


def test_configuration_agrees_with_prometheus(
    backfilled: tuple[Dataset, PrometheusSource],
) -> None:
    dataset, server = backfilled
    local = DatasetSource(dataset, rules=Rules.PROMETHEUS_2)
    window = dataset.manifest.window.window()
    verified = 0
    for deployment in dataset.manifest.deployments:
        offline = configuration(local, deployment.with_facts(topology=H100_PAIRS), window)
        remote = configuration(server, deployment.with_facts(topology=H100_PAIRS), window)
        assert [_plain(c) for c in offline.checks] == [_plain(c) for c in remote.checks]
        assert not _disagreements(offline, remote)
        assert remote.kv_capacity_tokens.ok
        assert remote.kv_capacity_tokens.provenance.engine == "prometheus"
        verified += sum(c.status is CheckStatus.VERIFIED for c in remote.checks)
    # Agreement on "unverifiable" alone would prove little: the series verify several fields.
    assert verified >= 5 * len(dataset.manifest.deployments)
