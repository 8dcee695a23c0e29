"""Write a report's files: report.md, report.html, report.json, replicas.csv and figures/*.png.

Paths are fixed by the output directory alone, so scheduled jobs can find
them; the same report gives the same bytes.

A report appears whole or not at all. :func:`write_report` writes every file
into a hidden staging directory beside the output directory
(``.<name>.partial-*``, on the same file system) and moves them into place
only when all are written: into a new directory with one rename, into an
existing one file by file with ``report.json`` last. A failure, an
interrupt or a full disk leaves the staging directory removed and the output
directory as it was, a previous report included: a scheduled job whose run
fails keeps its last good report. :func:`check_output` says before any work
whether a directory can take a report.
"""

from __future__ import annotations

import errno
import io
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, cast

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg

from inference_obs.errors import ConfigurationError
from inference_obs.report.figures import draw_figures
from inference_obs.report.html import to_html
from inference_obs.report.markdown import to_markdown
from inference_obs.report.report_json import to_json
from inference_obs.report.sections import sections

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = [
    "FIGURES",
    "FORMATS",
    "check_output",
    "figure_png",
    "report_files",
    "write_report",
]

FORMATS = ("md", "html", "json")
#: The folder of the figures, inside the output directory.
FIGURES = "figures"
_PARTIAL = ".partial-"


#: Resolution of the figures' PNG files, dots per inch.
PNG_DPI = 100


#: Every replica's per-replica statistics, written with report.json.
REPLICAS = "replicas.csv"


def figure_png(figure: matplotlib.figure.Figure) -> bytes:
    """A figure as PNG bytes (100 dpi, no timestamp in the metadata).

    Drawn once, on an Agg canvas. ``savefig`` draws a figure that has a
    layout engine twice, the first time without rendering, only to lay it
    out; the second draw lays it out again and renders the same pixels (the
    report's figures, on the bundled datasets and the generated fleet, come
    out byte for byte the same) at about 1.4x the time. The figure's own
    canvas and resolution are restored afterwards.
    """
    buffer = io.BytesIO()
    canvas, dpi = figure.canvas, figure.dpi
    try:
        figure.dpi = PNG_DPI
        # (matplotlib's backends ship without annotations: a typed entry point)
        print_png = cast("Callable[..., None]", FigureCanvasAgg(figure).print_png)
        print_png(buffer, metadata={"Software": None})
    finally:
        figure.dpi = dpi
        figure.set_canvas(canvas)
    return buffer.getvalue()


def _staging(out: Path) -> Path:
    """A new hidden directory beside ``out`` (its parent created if needed).

    Made with the process's umask, unlike :func:`tempfile.mkdtemp` (0700): it
    becomes ``out`` itself when ``out`` is new, and a report is meant to be read.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    while True:
        stage = out.parent / f".{out.name}{_PARTIAL}{secrets.token_hex(4)}"
        try:
            stage.mkdir()
        except FileExistsError:
            continue
        return stage


def check_output(out: Path) -> None:
    """Refuse an output directory a report cannot be written to, before any work.

    ``out`` may exist (a directory: files other than a report's are left
    alone) or not (it is created, with its parents, when the report is
    written). Nothing is created here: a file is made and removed in the
    nearest directory that exists, which proves it writable whoever runs
    this (root passes permission checks, not a read-only file system).

    Raises
    ------
    ConfigurationError
        Naming ``out`` and why: it or a parent is a file, a report's name
        in it is taken by something else, or it cannot be written.
    """
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"{out}: exists and is not a directory")
    for name in (*(f"report.{fmt}" for fmt in FORMATS), FIGURES):
        target = out / name
        wanted = target.is_dir() if name == FIGURES else target.is_file()
        if target.exists() and not wanted:
            kind = "a directory" if name == FIGURES else "a file"
            raise ConfigurationError(f"{out}: {name} is there and is not {kind}")
    base = out.absolute().parent
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        raise ConfigurationError(f"{out}: {base} is a file, not a directory")
    try:
        handle, probe = tempfile.mkstemp(prefix=f".{out.name}{_PARTIAL}", dir=base)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigurationError(f"{out}: cannot write in {base}: {exc.strerror}") from None


def report_files(out: Path) -> list[Path]:
    """The files of a report in ``out``: ``report.{md,html,json}``, ``replicas.csv`` and
    ``figures/*.png``."""
    found = [out / f"report.{fmt}" for fmt in FORMATS if (out / f"report.{fmt}").is_file()]
    if (out / REPLICAS).is_file():
        found.append(out / REPLICAS)
    if (out / FIGURES).is_dir():
        found += sorted((out / FIGURES).glob("*.png"))
    return found


def _render(report: Report, formats: Collection[str]) -> dict[str, bytes]:
    """Relative path -> bytes of every file of the report."""
    blocks = sections(report)
    pngs = (
        {name: figure_png(fig) for name, fig in draw_figures(report).items()}
        if ({"md", "html"} & set(formats))
        else {}
    )
    files = {f"{FIGURES}/{name}.png": png for name, png in sorted(pngs.items())}
    texts = {
        "md": lambda: to_markdown(blocks),
        "html": lambda: to_html(blocks, pngs, report.title),
        "json": lambda: to_json(report),
    }
    for fmt in FORMATS:
        if fmt in formats:
            files[f"report.{fmt}"] = texts[fmt]().encode("utf-8")
    if "json" in formats:
        # Every replica's value of every per-replica statistic, beside report.json: the
        # rows a fleet's body leaves out (Report.replicas).
        files[REPLICAS] = report.replicas.to_csv(index=False).encode("utf-8")
    return files


def _move_into(stage: Path, out: Path, names: list[str]) -> None:
    """Move the staged files into an existing ``out``, replacing a previous report's."""
    for name in names:  # checked first, so a refusal leaves ``out`` untouched
        if (out / name).is_dir() or (out / name).parent.is_file():
            raise IsADirectoryError(errno.EISDIR, "in the way of the report", str(out / name))
    for old in report_files(out):
        if str(old.relative_to(out)).replace(os.sep, "/") not in names:
            old.unlink()  # a previous report's file this one does not have
    figures = out / FIGURES
    if figures.is_dir() and not any(figures.iterdir()):
        figures.rmdir()  # emptied of a previous report's figures, and holding nothing else
    if any(name.startswith(f"{FIGURES}/") for name in names):
        (out / FIGURES).mkdir(exist_ok=True)
    # Figures first and report.json last: a reader polling for report.json
    # finds the rest already in place.
    for name in sorted(names, key=lambda n: (n == "report.json", not n.startswith(FIGURES), n)):
        os.replace(stage / name, out / name)


def write_report(
    report: Report,
    out: Path,
    formats: Collection[str] = FORMATS,
    *,
    before_moving: Callable[[], None] | None = None,
) -> dict[str, Path]:
    """Write the report's files under ``out``, all of them or none.

    Parameters
    ----------
    report
        From :func:`~inference_obs.report.build.build_report`.
    out
        The output directory (created if needed; other files in it stay).
    formats
        Any of ``md``, ``html``, ``json``; figures are written with ``md`` or ``html``.
    before_moving
        Called once every file is staged, before the first is moved into
        ``out``; an exception from it (a time budget that ran out) leaves
        ``out`` as it was.

    Returns
    -------
    dict
        Format (``figure:<name>``, ``replicas`` for replicas.csv) -> the path written.

    Raises
    ------
    ValueError
        An unknown format, named.
    OSError
        When a file cannot be written or moved; the staging directory is
        removed and ``out`` holds no file of this report.
    """
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ConfigurationError(
            f"unknown report format(s) {unknown}: use any of {', '.join(FORMATS)}"
        )
    files = _render(report, formats)
    stage = _staging(out)
    try:
        (stage / FIGURES).mkdir()
        for name, data in files.items():
            (stage / name).write_bytes(data)
        if not any((stage / FIGURES).iterdir()):
            (stage / FIGURES).rmdir()
        if before_moving is not None:
            before_moving()
        if out.exists():
            _move_into(stage, out, list(files))
        else:
            stage.rename(out)  # the whole directory appears at once
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    written: dict[str, Path] = {}
    for name in files:
        if name.startswith(f"{FIGURES}/"):
            written[f"figure:{Path(name).stem}"] = out / FIGURES / Path(name).name
    for fmt in FORMATS:
        if fmt in formats:
            written[fmt] = out / f"report.{fmt}"
    if REPLICAS in files:
        written["replicas"] = out / REPLICAS
    return written
