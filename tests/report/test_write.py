"""Figures to PNG: drawn once, the bytes savefig writes, the figure left as it was."""

from __future__ import annotations

import io

import numpy as np
from matplotlib.figure import Figure
from PIL import Image

from inference_obs.report.write import PNG_DPI, figure_png


def _laid_out(dpi: float) -> Figure:
    """A constrained layout with long tick labels and a colour bar: what the layout moves."""
    fig = Figure(figsize=(6.0, 3.5), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(np.arange(60.0).reshape(6, 10), aspect="auto")
    ax.set_yticks(np.arange(6), [f"gpu-{k} on a-long-host-name-{k}" for k in range(6)])
    ax.set_title("utilisation (%)")
    fig.colorbar(image, ax=ax, label="percent")
    return fig


def _savefig(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=PNG_DPI, metadata={"Software": None})
    return buffer.getvalue()


def test_a_figure_png_is_what_savefig_writes_at_100_dpi() -> None:
    for dpi in (100.0, 72.0):
        png = figure_png(_laid_out(dpi))
        assert png == _savefig(_laid_out(dpi))
        assert Image.open(io.BytesIO(png)).size == (600, 350)


def test_the_figure_keeps_its_canvas_and_resolution() -> None:
    fig = _laid_out(72.0)
    canvas = fig.canvas
    first = figure_png(fig)
    assert fig.canvas is canvas
    assert fig.dpi == 72.0
    assert b"Software" not in first
