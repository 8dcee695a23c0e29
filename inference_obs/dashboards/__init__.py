"""Grafana dashboards built from the catalogue's standard queries and builders.

``inference-obs dashboards export --out DIR`` writes them: one for vLLM, one
for SGLang, one for dcgm-exporter, each importable into Grafana, with a data
source variable and a deployment variable every query filters on. ``lint``
finds nothing in them (a test checks it).
"""

from __future__ import annotations

import json

from inference_obs.dashboards.engines import bucket_note, sglang_dashboard, vllm_dashboard
from inference_obs.dashboards.gpus import dcgm_dashboard
from inference_obs.dashboards.model import Dashboard, Panel, Row, Target, render

__all__ = [
    "Dashboard",
    "Panel",
    "Row",
    "Target",
    "bucket_note",
    "dashboard_files",
    "dashboards",
    "dcgm_dashboard",
    "render",
    "sglang_dashboard",
    "vllm_dashboard",
]


def dashboards() -> dict[str, Dashboard]:
    """Every dashboard by its file name."""
    return {
        "vllm.json": vllm_dashboard(),
        "sglang.json": sglang_dashboard(),
        "dcgm.json": dcgm_dashboard(),
    }


def dashboard_files() -> dict[str, str]:
    """File name -> JSON text, as ``dashboards export`` writes them."""
    return {
        name: json.dumps(board.model(), indent=2, ensure_ascii=False) + "\n"
        for name, board in dashboards().items()
    }
