"""The notebooks run top to bottom (nbclient), and are committed without outputs.

``live-prometheus`` runs in tests/integration, against a real Prometheus.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


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
        book = read(path)
        nbformat.validate(book)
        for cell in book.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [], path.name
                assert cell.execution_count is None, path.name


def test_quickstart_is_a_report_in_four_lines() -> None:
    book = run_notebook("quickstart", NOTEBOOKS)
    first = next(cell for cell in book.cells if cell.cell_type == "code")
    assert first.source == (
        "import inference_obs as obs\n"
        "\n"
        'report = obs.report(obs.DatasetSource("../datasets/pro5000-vs-h20"))\n'
        "report"
    )
    (shown,) = (o for o in first.outputs if o.output_type == "execute_result")
    summary, folded = shown.data["text/html"].split("<details>")
    assert "<td>H20</td><td>11,674</td>" in summary  # the headline numbers first ...
    assert folded.count("data:image/png;base64,") == 6  # ... the figures folded below
    text = output_text(book)
    assert "output throughput: invalid" in text
    assert "output_length_differs" in text
    assert "ttft_p95" in text  # the latency frame


def test_reproduce_an_observation_recomputes_and_judges() -> None:
    text = output_text(run_notebook("reproduce-an-observation", NOTEBOOKS))
    assert "p95 inter-token latency: invalid" in text
    assert "median TTFT: caveated" in text
