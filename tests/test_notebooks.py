"""The notebooks run top to bottom (nbclient), and are committed without outputs.

Run where Jupyter runs them (in notebooks/), they write nothing into the
checkout, and saved with their outputs they stay under
:data:`NOTEBOOK_BYTES`: a report shows its summary, not its megabyte of
figures. ``live-prometheus`` runs in tests/integration, against a real
Prometheus.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
#: The most bytes a notebook file may hold, committed or saved after a run.
NOTEBOOK_BYTES = 200_000


def read(path: Path) -> nbformat.NotebookNode:
    """A notebook file (nbformat's reader is untyped)."""
    book: nbformat.NotebookNode = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    return book


def run_notebook(name: str, cwd: Path) -> nbformat.NotebookNode:
    """Execute ``notebooks/<name>.ipynb`` with ``cwd`` as its working directory.

    The kernel imports this checkout's package, whichever copy is installed.
    """
    book = read(NOTEBOOKS / f"{name}.ipynb")
    client = NotebookClient(
        book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    client.execute(env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)})
    return book


def checkout(folders: tuple[str, ...] = ("notebooks", "datasets")) -> dict[str, tuple[int, int]]:
    """Every file under ``folders`` of the checkout (ignored ones included): path -> (size,
    modification time in ns). Equal before and after a run: nothing was written there."""
    return {
        str(path.relative_to(ROOT)): (path.stat().st_size, path.stat().st_mtime_ns)
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*"))
    }


def saved_bytes(book: nbformat.NotebookNode) -> int:
    """The size of the notebook's file, saved with its outputs."""
    text: str = nbformat.writes(book)  # type: ignore[no-untyped-call]
    return len(text.encode("utf-8"))


def output_text(book: nbformat.NotebookNode) -> str:
    """Every output of an executed notebook (streams and display data), as one text."""
    parts = []
    for cell in book.cells:
        for output in cell.get("outputs", []):
            parts.append(str(output.get("text", "")) + str(output.get("data", {})))
    return "\n".join(parts)


def test_notebooks_are_committed_without_outputs() -> None:
    books = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert [b.stem for b in books] == ["live-prometheus", "quickstart", "reproduce-an-observation"]
    for path in books:
        assert path.stat().st_size < NOTEBOOK_BYTES, path.name
        book = read(path)
        nbformat.validate(book)
        for cell in book.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [], path.name
                assert cell.execution_count is None, path.name


def test_quickstart_is_a_report_in_four_lines() -> None:
    before = checkout()
    book = run_notebook("quickstart", NOTEBOOKS)
    assert checkout() == before  # nothing written beside the notebook or in the dataset
    assert saved_bytes(book) < NOTEBOOK_BYTES  # about 2 MB with the figures embedded
    first = next(cell for cell in book.cells if cell.cell_type == "code")
    assert first.source == (
        "import inference_obs as obs\n"
        "\n"
        'report = obs.report(obs.DatasetSource("../datasets/pro5000-vs-h20"))\n'
        "report"
    )
    (shown,) = (o for o in first.outputs if o.output_type == "execute_result")
    view = shown.data["text/html"]
    assert "<td>H20</td><td>11,674</td>" in view  # the headline numbers ...
    assert "data:image/png" not in view  # ... and no figure: each drawn when asked
    assert "<code>report.figure('H20-gpu-heatmap')</code>" in view
    assert len(shown.data["text/plain"]) < 1_000  # the repr, kept beside the HTML
    # The figure asked for is shown as a PNG image.
    drawn = next(c for c in book.cells if c.source == 'report.figure("PRO-gpu-heatmap")')
    (image,) = (o for o in drawn.outputs if o.output_type == "execute_result")
    assert base64.b64decode(image.data["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    text = output_text(book)
    assert "output throughput: invalid" in text
    assert "output_length_differs" in text
    assert "ttft_p95" in text  # the latency frame


def test_reproduce_an_observation_recomputes_and_judges() -> None:
    before = checkout()
    book = run_notebook("reproduce-an-observation", NOTEBOOKS)
    assert checkout() == before
    assert saved_bytes(book) < NOTEBOOK_BYTES
    text = output_text(book)
    assert "p95 inter-token latency: invalid" in text
    assert "median TTFT: caveated" in text
