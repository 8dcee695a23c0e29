"""What ``report``, ``compare`` and ``discover`` read: a live source or a dataset, in two steps.

:func:`plan` checks the source options and reads the small input files (the
deployments file, a dataset's manifest) without sending a query or reading a
sample, so every bad option or input ends the run before any work. What a
report reads is resolved as ``obs.report`` resolves it
(:func:`~inference_obs.report.from_source.resolve_inputs`), naming the options.
:meth:`Plan.open` then does the work of opening: it reads the dataset's
samples (within the time budget) or hands over the live source, which has
sent nothing yet.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from inference_obs.cli.options import add_live_options, add_window_options, open_prometheus
from inference_obs.cli.times import window
from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError
from inference_obs.report.from_source import InputNames

if TYPE_CHECKING:
    from inference_obs.reading.resolution import Resolution
    from inference_obs.samples import Window
    from inference_obs.source.base import Source
    from inference_obs.topology import Topology

__all__ = [
    "DEFAULT_DATASET",
    "OPTIONS",
    "Opened",
    "Plan",
    "add_discovery_source_options",
    "add_source_options",
    "note",
    "plan",
]

#: The dataset ``inference-obs report`` reads when given no source.
DEFAULT_DATASET = "pro5000-vs-h20"
#: How errors about what a report reads name the command line's options.
OPTIONS = InputNames(
    deployments="--deployments",
    window="--window",
    end="--end",
    gpu_hour_prices="--gpu-hour-price",
    topologies="--topology",
    resolution="--resolution",
)
Say = Callable[[str], None]


def note(line: str) -> None:
    """A line for the user on stderr that ``--quiet`` does not silence (a caveat, not progress)."""
    print(f"inference-obs: {line}", file=sys.stderr)


def add_source_options(command: argparse.ArgumentParser) -> None:
    """``--dataset``, ``--prometheus``, ``--deployments``, the window and live access."""
    where = _what_to_read(command)
    where.add_argument(
        "--deployments",
        metavar="FILE",
        help="deployments YAML/JSON, as `inference-obs discover` writes it (a dataset "
        "manifest works too); see docs/deployments.md",
    )
    add_window_options(command)
    add_live_options(command)


def add_discovery_source_options(command: argparse.ArgumentParser) -> None:
    """``--dataset``, ``--prometheus``, the window and live access: the deployments are found."""
    _what_to_read(command)
    add_window_options(command)
    add_live_options(command)


def _what_to_read(command: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    where = command.add_argument_group("what to read")
    where.add_argument("--dataset", help="an observation dataset directory (offline)")
    where.add_argument(
        "--prometheus", metavar="URL", help="a Prometheus-compatible API, http(s)://... (live)"
    )
    return where


def _bundled(name: str, say: Say) -> Path:
    """The bundled dataset ``name``: ``datasets/<name>`` here, else regenerated from its scenario.

    The bundled datasets are the simulator's output for their scenario's own
    seed, so regenerating one gives the same files.
    """
    here = Path("datasets") / name
    if (here / "manifest.json").is_file():
        return here
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "inference-obs" / name
    if not (cache / "manifest.json").is_file():
        from inference_obs.simulate import simulate

        say(f"no datasets/{name} here: regenerating it from its scenario into {cache}")
        if cache.exists():
            shutil.rmtree(cache)
        simulate(name, cache)
    return cache


@dataclass(frozen=True)
class Opened:
    """An open source, and the deployments and window to read from it."""

    source: Source
    deployments: tuple[Deployment, ...]
    window: Window
    name: str


@dataclass(frozen=True)
class Plan:
    """Checked source options: what will be read, over which window, for which deployments.

    Nothing has been queried or loaded yet; :meth:`open` does that.
    """

    deployments: tuple[Deployment, ...]
    window: Window
    name: str
    live: Source | None = None
    dataset: Path | None = None

    def open(self, deadline: float | None = None) -> Opened:
        """The source, reading a dataset's samples now (stopping at ``deadline``, monotonic s).

        Hidden entries a dataset directory holds (``.DS_Store``) are ignored and
        said once, on stderr.
        """
        if self.live is not None:
            source = self.live
        else:
            from inference_obs.source.dataset.source import DatasetSource

            assert self.dataset is not None
            loaded = DatasetSource(self.dataset, deadline=deadline)
            if loaded.dataset.ignored:
                note(
                    f"{self.dataset}: ignored hidden entries {', '.join(loaded.dataset.ignored)} "
                    "(not part of a dataset)"
                )
            source = loaded
        return Opened(source, self.deployments, self.window, self.name)


def _refuse_live_options_offline(args: argparse.Namespace) -> None:
    # Without --prometheus these would be ignored, and the command read a dataset
    # (by default the bundled one) where the user meant a live source.
    for option, value in (
        ("--token-file", args.token_file),
        ("--token-env", args.token_env),
        ("--ca-file", args.ca_file),
        ("--header", args.header or None),
    ):
        if value is not None:
            raise ConfigurationError(f"{option} is for a live source: give --prometheus URL too")


def plan(
    args: argparse.Namespace,
    say: Say,
    now: datetime,
    *,
    default_window: str | None = None,
    gpu_hour_prices: Mapping[str, float] | None = None,
    topologies: Mapping[str, Topology] | None = None,
    resolution: Resolution = "auto",
) -> Plan:
    """Check the source options and read the deployments and manifest; nothing else.

    Parameters
    ----------
    args
        The parsed options (see :func:`add_source_options`).
    say
        Progress (regenerating the bundled dataset).
    now
        What ``now`` means in ``--end now``.
    default_window
        For a live source without ``--end``: a window ending now (``discover``
        uses ``1h``); ``None`` requires the window options.
    gpu_hour_prices, topologies, resolution
        Checked against the deployments and the window, as a report reads
        them; each price and topology is set on the deployment it names.

    Raises
    ------
    ConfigurationError
        Naming the bad option or file (a deployments file or manifest that is
        missing or invalid is a :class:`~inference_obs.errors.DatasetError`).
    """
    from inference_obs.report.from_source import resolve_inputs
    from inference_obs.source.dataset.reader import read_manifest
    from inference_obs.source.deployments_file import load_deployments

    if args.prometheus is not None and args.dataset is not None:
        raise ConfigurationError("give --prometheus or --dataset, not both")
    live = args.prometheus is not None
    if live and default_window is not None and args.start is None and args.end is None:
        args = argparse.Namespace(**{**vars(args), "end": "now"})
        args.window = args.window or default_window
    span = window(args, now)
    wanted = getattr(args, "deployments", None)
    resolve = partial(
        resolve_inputs,
        window=span,
        gpu_hour_prices=gpu_hour_prices,
        topologies=topologies,
        resolution=resolution,
        names=OPTIONS,
    )
    if args.prometheus is not None:
        source = open_prometheus(args)  # checks the live options; sends nothing
        if not hasattr(args, "deployments"):  # discover, which finds them
            assert span is not None  # its default window
            return Plan((), span, source.url, live=source)
        if wanted is not None and span is None:
            raise ConfigurationError(
                "reading a live source needs --end and --start or --window (e.g. --end now "
                "--window 1h)"
            )
        found = resolve(wanted)
        return Plan(found.deployments, found.window, source.url, live=source)
    _refuse_live_options_offline(args)
    if args.dataset == "":
        raise ConfigurationError("--dataset: empty; give a dataset directory")
    if wanted == "":
        raise ConfigurationError("--deployments: empty; give a file")
    given = load_deployments(wanted) if wanted else None  # before any dataset work
    path = Path(args.dataset) if args.dataset is not None else _bundled(DEFAULT_DATASET, say)
    found = resolve(given, dataset=read_manifest(path))
    return Plan(found.deployments, found.window, str(path), dataset=path)
