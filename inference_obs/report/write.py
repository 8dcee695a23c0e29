"""Write a report's files: report.md, report.html, report.json, replicas.csv and figures/*.png.

Paths are fixed by the output directory alone, so scheduled jobs can find
them; the same report gives the same bytes.

A report appears whole or not at all. :func:`write_report` writes every file
into a hidden staging directory beside the output directory
(``.<name>.partial-*``, on the same file system) and moves them into place
only when all are written: into a new directory with one rename, into an
existing one file by file with ``report.json`` last, each file it replaces
or removes set aside in the staging directory. A failure, an interrupt or a
full disk undoes every move, so the output directory is left as it was, a
previous report included: a scheduled job whose run fails keeps its last
good report. A run killed outright (SIGKILL) leaves its staging directory;
the next run of the same output directory removes it once its lock is free
(:mod:`inference_obs.outputs`).

Only the report's own files are removed. The output directory holds a hidden
manifest, ``.inference-obs-report.json``, listing the files the report in it
wrote; the next report removes those of them it does not write again, and
nothing else: a file of the user's, in ``figures/`` too, stays. While files
are moved the manifest lists both reports' files, so a run killed mid-way
leaves the next one every name to remove. A directory without a manifest
(written by an older version) has nothing removed but what is replaced.

Links are replaced, never written or deleted through (a link at
``report.md`` or ``figures`` is removed and a file or directory put in its
place, its target untouched); only ``out`` itself may be a link to the
directory to write in. :func:`check_output` says before any work whether a
directory can take a report.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg

from inference_obs.errors import ConfigurationError
from inference_obs.outputs import PARTIAL, real_directory, staging_directory, write_file
from inference_obs.report.figures import each_figure
from inference_obs.report.html import html_parts
from inference_obs.report.markdown import markdown_parts
from inference_obs.report.report_json import json_parts
from inference_obs.report.sections import sections

if TYPE_CHECKING:
    import pandas as pd

    from inference_obs.report.model import Report

__all__ = [
    "FIGURES",
    "FORMATS",
    "check_output",
    "figure_png",
    "replicas_csv",
    "report_files",
    "write_report",
]

FORMATS = ("md", "html", "json")
#: The folder of the figures, inside the output directory.
FIGURES = "figures"
#: The hidden list of the files the report in a directory wrote: only those are
#: removed by the next report (never a file of the user's beside them).
MANIFEST = ".inference-obs-report.json"


#: Resolution of the figures' PNG files, dots per inch.
PNG_DPI = 100


#: Every replica's per-replica statistics, written with report.json.
REPLICAS = "replicas.csv"

#: The names a report writes, the only ones a manifest may list (a figure is named by its
#: deployment, any text: one name under figures/, never hidden, never a path out of it).
_REPORT_NAME = re.compile(r"report\.(md|html|json)|replicas\.csv|figures/[^/.][^/]*\.png")


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
    if out.is_symlink() and not out.exists():
        raise ConfigurationError(f"{out}: a link to nothing; give a directory")
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"{out}: exists and is not a directory")
    for name in (*(f"report.{fmt}" for fmt in FORMATS), FIGURES):
        target = out / name
        wanted = target.is_dir() if name == FIGURES else target.is_file()
        # A link there is replaced by the report's file (its target kept): never in the way.
        if target.exists() and not target.is_symlink() and not wanted:
            kind = "a directory" if name == FIGURES else "a file"
            raise ConfigurationError(f"{out}: {name} is there and is not {kind}")
    base = out.absolute().parent
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        raise ConfigurationError(f"{out}: {base} is a file, not a directory")
    try:
        handle, probe = tempfile.mkstemp(prefix=f".{out.name}{PARTIAL}", dir=base)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigurationError(f"{out}: cannot write in {base}: {exc.strerror}") from None


def _listed(out: Path) -> list[str]:
    """The files the manifest in ``out`` lists, each a name this module writes.

    A manifest that is missing, a link or not one of ours lists nothing:
    then no file is removed as a previous report's. One that is there but
    cannot be read raises (the run fails, leaving ``out`` as it was), rather
    than leave the previous report's files behind.
    """
    try:
        fd = os.open(out / MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP):  # none, or a link (not followed)
            return []
        raise
    with os.fdopen(fd, "rb") as handle:
        text = handle.read()
    try:
        names = json.loads(text).get("files", [])
    except (ValueError, AttributeError):
        return []
    if not isinstance(names, list):
        return []
    return sorted({n for n in names if isinstance(n, str) and _REPORT_NAME.fullmatch(n)})


def _manifest(names: Collection[str]) -> bytes:
    listed = {"written_by": "inference-obs report", "files": sorted(names)}
    return (json.dumps(listed, indent=1) + "\n").encode("utf-8")


def report_files(out: Path) -> list[Path]:
    """The files of the report in ``out``, as its manifest lists them, that are there.

    ``report.{md,html,json}``, ``replicas.csv`` and ``figures/*.png``; a
    figure behind a link (``figures`` a link) is not the report's.
    """
    figures_real = not (out / FIGURES).is_symlink()
    return [
        out / name
        for name in _listed(out)
        if (figures_real or not name.startswith(f"{FIGURES}/")) and (out / name).is_file()
    ]


def _render(report: Report, formats: Collection[str]) -> Iterator[tuple[str, Iterable[bytes]]]:
    """Relative path and bytes of every file of the report, a file at a time.

    A file's bytes come in parts, each made as it is asked for: a fleet's
    report.json, report.html and report.md are megabytes each, and none of
    them is ever held whole. The figures come first; their PNGs are kept for
    report.html, which embeds them.
    """
    blocks = sections(report)
    pngs: dict[str, bytes] = {}
    if {"md", "html"} & set(formats):
        for name, fig in each_figure(report):
            pngs[name] = figure_png(fig)
            # A figure's artists refer to each other: cleared, its arrays go now rather than
            # at the next collection of cycles, and one figure is held at a time.
            fig.clear()
    for name, png in sorted(pngs.items()):
        yield f"{FIGURES}/{name}.png", (png,)
    texts: dict[str, Callable[[], Iterable[bytes]]] = {
        "md": lambda: _utf8(markdown_parts(blocks)),
        "html": lambda: _utf8(html_parts(blocks, pngs, report.title)),
        "json": lambda: json_parts(report),
    }
    for fmt in FORMATS:
        if fmt in formats:
            yield f"report.{fmt}", texts[fmt]()
    if "json" in formats:
        # Every replica's value of every per-replica statistic, beside report.json: the
        # rows a fleet's body leaves out (Report.replicas).
        yield REPLICAS, (replicas_csv(report.replicas).encode("utf-8"),)


def _utf8(parts: Iterable[str]) -> Iterator[bytes]:
    return (part.encode("utf-8") for part in parts)


#: What a spreadsheet reads as the start of a formula when a cell's text begins with it.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def replicas_csv(frame: pd.DataFrame) -> str:
    """``frame`` as CSV, each text cell that a spreadsheet would run as a formula quoted.

    A replica or deployment name comes from the data (a pod's name, a label):
    ``=HYPERLINK(...)`` there would run when replicas.csv is opened in a
    spreadsheet. Such a text cell gets a leading ``'`` (the usual guard, which
    spreadsheets show as text); numbers are written as they are (``-0.4`` is
    a number, not a formula).
    """

    def guarded(value: object) -> object:
        if isinstance(value, str) and value.startswith(_FORMULA_START):
            return "'" + value
        return value

    from pandas.api.types import is_numeric_dtype

    text_columns = [c for c in frame.columns if not is_numeric_dtype(frame[c])]
    shown = frame.assign(**{c: frame[c].map(guarded) for c in text_columns})
    return shown.to_csv(index=False)


def _order(name: str) -> tuple[bool, bool, str]:
    # Figures first and report.json last: a reader polling for report.json
    # finds the rest already in place.
    return (name == "report.json", not name.startswith(FIGURES), name)


def _commit(stage: Path, out: Path, names: list[str]) -> None:
    """Move the staged files into an existing ``out``, replacing the previous report's.

    Every file moved out of the way goes to the staging directory, and each
    step is undone in reverse on any exception (an interrupt included), so
    ``out`` is left as it was. Until the end the manifest lists both
    reports' files: a writer killed mid-way leaves the next run the names of
    every file to remove.
    """
    for name in names:  # checked first, so a refusal leaves ``out`` untouched
        target, parent = out / name, (out / name).parent
        if target.is_dir() and not target.is_symlink():
            raise IsADirectoryError(errno.EISDIR, "in the way of the report", str(target))
        if parent != out and parent.exists() and not parent.is_symlink() and not parent.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "in the way of the report", str(parent))
    figures = out / FIGURES
    previous = _listed(out)
    if figures.is_symlink():  # behind a link: not the report's, and left alone
        previous = [n for n in previous if not n.startswith(f"{FIGURES}/")]
    aside = stage / ".previous"
    (aside / FIGURES).mkdir(parents=True)
    undo: list[Callable[[], object]] = []

    def move(source: Path, target: Path) -> None:
        os.replace(source, target)
        undo.append(lambda: os.replace(target, source))

    def set_aside(name: str) -> None:
        if os.path.lexists(out / name):
            move(out / name, aside / name)

    try:
        set_aside(MANIFEST)
        undo.append(lambda: os.unlink(out / MANIFEST))
        write_file(out / MANIFEST, _manifest({*previous, *names}))
        wanted = any(name.startswith(f"{FIGURES}/") for name in names)
        if wanted and figures.is_symlink():
            move(figures, aside / ".figures-link")  # the link, never what it points at
        if wanted and real_directory(figures):
            undo.append(figures.rmdir)
        for name in sorted(names, key=_order):
            set_aside(name)
            move(stage / name, out / name)
        for name in sorted(set(previous) - set(names)):
            set_aside(name)  # a previous report's file this one does not have
        drew = any(name.startswith(f"{FIGURES}/") for name in previous)
        emptied = drew and figures.is_dir() and not figures.is_symlink()
        if emptied and not wanted and not any(figures.iterdir()):
            figures.rmdir()  # emptied of the previous report's figures, holding nothing else
            undo.append(figures.mkdir)
        write_file(out / MANIFEST, _manifest(names))
    except BaseException:
        for step in reversed(undo):
            with contextlib.suppress(OSError):
                step()
        raise


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
        The output directory (created if needed; files in it that the
        previous report did not write stay; a link to a directory is followed).
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
        removed and ``out`` is as it was (the previous report's files and
        manifest included).
    """
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ConfigurationError(
            f"unknown report format(s) {unknown}: use any of {', '.join(FORMATS)}"
        )
    # ``out`` itself may be a link to a directory (a user's "latest"): staged beside
    # the directory it points at, so the files move within one file system.
    home = Path(os.path.realpath(out)) if out.is_symlink() and out.is_dir() else out
    files: list[str] = []
    with staging_directory(home) as stage:
        (stage / FIGURES).mkdir()
        for name, parts in _render(report, formats):
            with (stage / name).open("wb") as handle:
                handle.writelines(parts)
            files.append(name)
        if not any((stage / FIGURES).iterdir()):
            (stage / FIGURES).rmdir()
        if before_moving is not None:
            before_moving()
        if os.path.lexists(home):
            _commit(stage, home, files)
        else:
            (stage / MANIFEST).write_bytes(_manifest(files))
            stage.rename(home)  # the whole directory appears at once
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
