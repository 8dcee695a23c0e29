"""The per-GPU standard queries name each GPU's node whichever spelling the data has.

dcgm-exporter writes the node as ``Hostname``; a newer exporter, or a relabelling that
copies ``__meta_kubernetes_pod_node_name``, writes ``hostname``. The real 4.x exposition
(tests/fixtures/real) is read as it is, and with ``Hostname`` respelled ``hostname``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.deployment import Deployment
from inference_obs.metrics import standard_query
from inference_obs.query import to_promql
from inference_obs.samples import Vector
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.real_fleets import SCRAPES, fixture, record, target

NODE = "ip-10-0-180-136.ec2.internal"


@pytest.mark.parametrize("spelling", ["Hostname", "hostname"])
def test_gpu_samples_keep_the_node(tmp_path: Path, spelling: str) -> None:
    text = fixture("dcgm_4x_pod_uid_empty.prom").replace('Hostname="', f'{spelling}="')
    deployment = Deployment(
        name="gpus",
        selector={"job": "dcgm"},
        hardware={"gpu_model": "NVIDIA H100 80GB HBM3", "gpus_per_replica": 3},
        engine={"name": "vllm"},
    )
    served = [(target("dcgm=http://10.0.0.2:9400/metrics"), text, 0)]
    source = DatasetSource(record(tmp_path / "ds", served, [deployment]))
    window = source.dataset.manifest.window.window()
    query = standard_query("dcgm_gpu_samples").expr(window=window.seconds)
    answer = source.instant(query, window.end_s).value
    assert isinstance(answer, Vector)
    # GPUs 5, 6 and 7 of one node, each scraped SCRAPES times.
    assert sorted((one[spelling], one["gpu"]) for one in answer.labels) == [
        (NODE, "5"),
        (NODE, "6"),
        (NODE, "7"),
    ]
    assert answer.values.tolist() == [SCRAPES] * 3


def test_last_xid_groups_by_either_spelling() -> None:
    # The fixture exports no XID field, so the grouping is checked on the PromQL.
    assert to_promql(standard_query("dcgm_last_xid").expr(window=3600)) == (
        "max by (modelName, Hostname, hostname, gpu) (last_over_time(DCGM_FI_DEV_XID_ERRORS[1h]))"
    )
