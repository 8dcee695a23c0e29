"""``inference-obs``: the command line. Wiring only; the work lives in the layers below.

One module per group of commands: :mod:`~.report` (``report``, ``compare``),
:mod:`~.dataset` (``dataset export|verify|from-scrapes``), :mod:`~.capture`
(``capture``, and ``from-scrapes``'s wiring), :mod:`~.catalogue`
(``catalogue``, ``queries``, ``simulate``); :mod:`~.options` holds the
options they share and the exit statuses.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from inference_obs.cli import capture, catalogue, dashboards, dataset, lint, report
from inference_obs.cli.catalogue import parse_matcher
from inference_obs.cli.options import (
    EXIT_BUDGET,
    EXIT_INVALID,
    EXIT_NO_DATA,
    EXIT_OK,
    EXIT_SOURCE,
    EXIT_USAGE,
)
from inference_obs.errors import InferenceObsError

__all__ = [
    "EXIT_BUDGET",
    "EXIT_INVALID",
    "EXIT_NO_DATA",
    "EXIT_OK",
    "EXIT_SOURCE",
    "EXIT_USAGE",
    "main",
    "parse_matcher",
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inference-obs",
        description="Defensible numbers about LLM serving fleets from Prometheus data.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    report.register(commands)
    catalogue.register(commands)
    dataset.register(commands)
    lint.register(commands)
    dashboards.register(commands)
    capture.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        status: int = args.run(args)
    except InferenceObsError as exc:
        print(f"inference-obs: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (`inference-obs queries list | head`): not an
        # error. Point stdout at devnull so the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return status
