"""Any sequence of report runs into one ``--out`` leaves the last good report and the user's files.

Runs succeed, fail (an OSError) or are interrupted (KeyboardInterrupt), each
writing any subset of the formats. After every run the output directory
holds exactly the files of the last run that succeeded, its manifest, and
the files the user put there, and no staging directory is left beside it.

The report is built and rendered once per module (rendering its figures takes
seconds); ``write_report`` is handed the rendered files of the formats each
run asks for, a file at a time as the writer asks for them. A failure is
injected at a random step of the run: the making of a file, or any call of
the run's own code to ``os`` that makes, writes, moves or removes a file or
directory. The staging directory's removal
after the files are in place (``shutil.rmtree``, whose errors are ignored) is
not such a step: a run interrupted there has already put its report in place.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from inference_obs.report import Report, build_report, write as write_module
from inference_obs.report.write import MANIFEST, write_report
from inference_obs.source.dataset.source import DatasetSource

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "r1-decode"

#: The calls a run's steps are counted at (the rendering is step 0).
_STEPS = ("open", "write", "replace", "rename", "mkdir", "rmdir", "unlink")
#: The modules whose calls are steps: the writer, its helpers, and pathlib on their behalf.
_OWN = ("inference_obs.report.write", "inference_obs.outputs", "pathlib")

#: The user's files, put in ``--out`` before the first run ("figures/" is the report's too).
USER_FILES = {"notes.md": b"mine", "figures/holiday.png": b"my png", ".keep": b""}


class Rendered:
    """The report and its files in every format (named briefly in a failure's example)."""

    def __init__(self) -> None:
        source = DatasetSource(DATASET)
        manifest = source.dataset.manifest
        window = manifest.window.window()
        self.report = build_report(source, manifest.deployments, window, title="t", source_name="d")
        made = write_module._render(self.report, write_module.FORMATS)
        self.files = {name: b"".join(parts) for name, parts in made}

    def __repr__(self) -> str:
        return f"Rendered({sorted(self.files)})"


@pytest.fixture(scope="module")
def rendered() -> Rendered:
    return Rendered()


def _files_of(files: dict[str, bytes], formats: Collection[str]) -> dict[str, bytes]:
    """The files a report of ``formats`` has: figures with md or html, replicas.csv with json."""

    def belongs(name: str) -> bool:
        if name.startswith("figures/"):
            return bool({"md", "html"} & set(formats))
        if name == "replicas.csv":
            return "json" in formats
        return name.removeprefix("report.") in formats

    return {name: data for name, data in files.items() if belongs(name)}


class Injected(Exception):
    """Stands for the failure injected; the run raises it as an OSError or KeyboardInterrupt."""


class _Faults:
    """Raises ``kind`` at the ``at``-th step of a run (once), counting every step."""

    def __init__(self, kind: type[BaseException] | None, at: int) -> None:
        self.kind, self.at, self.steps, self.raised = kind, at, 0, False

    def step(self) -> None:
        if self.kind is not None and not self.raised and self.steps == self.at:
            self.raised = True
            if self.kind is OSError:
                raise OSError(errno.EIO, "injected")
            raise self.kind
        self.steps += 1

    def wrap(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if sys._getframe(1).f_globals.get("__name__", "").startswith(_OWN):
                self.step()
            return call(*args, **kwargs)

        return counted


@contextmanager
def _run_with(faults: _Faults, files: dict[str, bytes]) -> Iterator[None]:
    def render(report: Report, formats: Collection[str]) -> Iterator[tuple[str, Iterable[bytes]]]:
        for name, data in _files_of(files, formats).items():
            faults.step()  # a failure while a file is made, as each is written when made
            yield name, (data,)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(write_module, "_render", render)
        for name in _STEPS:
            patch.setattr(os, name, faults.wrap(getattr(os, name)))
        yield


def _tree(out: Path) -> tuple[dict[str, bytes], set[str]]:
    """Files (their bytes) and directories under ``out``; a link fails the test."""
    files: dict[str, bytes] = {}
    folders: set[str] = set()
    for folder, dirs, names in os.walk(out):
        for name in dirs + names:
            path = Path(folder) / name
            assert not path.is_symlink(), path
            key = path.relative_to(out).as_posix()
            if path.is_dir():
                folders.add(key)
            else:
                files[key] = path.read_bytes()
    return files, folders


runs = st.lists(
    st.tuples(
        st.sets(st.sampled_from(write_module.FORMATS), min_size=1),
        st.sampled_from([None, OSError, KeyboardInterrupt]),
        st.integers(min_value=0, max_value=50),  # a full run of every format is ~40 steps
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(start=st.sampled_from(["absent", "empty", "user files"]), runs=runs)
def test_out_holds_the_last_good_report_and_the_users_files(
    rendered: Rendered,
    start: str,
    runs: list[tuple[set[str], type[BaseException] | None, int]],
) -> None:
    report, files = rendered.report, rendered.files
    user = USER_FILES if start == "user files" else {}
    with tempfile.TemporaryDirectory() as top:
        out = Path(top) / "out"
        if start != "absent":
            out.mkdir()
        for name, data in user.items():
            (out / name).parent.mkdir(exist_ok=True)
            (out / name).write_bytes(data)
        last_good: dict[str, bytes] | None = None
        for formats, kind, at in runs:
            faults = _Faults(kind, at)
            try:
                with _run_with(faults, files):
                    write_report(report, out, sorted(formats))
            except (OSError, KeyboardInterrupt):
                assert faults.raised  # only the injected failure ends a run
            else:
                last_good = _files_of(files, formats)
            assert sorted(p.name for p in Path(top).iterdir()) == (
                ["out"] if last_good is not None or start != "absent" else []
            )
            if last_good is None and start == "absent":
                continue
            found, folders = _tree(out)
            listed = found.pop(MANIFEST, None)
            assert found == {**user, **(last_good or {})}
            assert folders == {name.rsplit("/", 1)[0] for name in found if "/" in name}
            if last_good is None:
                assert listed is None
            else:
                assert listed is not None
                assert json.loads(listed)["files"] == sorted(last_good)
