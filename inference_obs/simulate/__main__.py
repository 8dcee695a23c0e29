"""``python -m inference_obs.simulate SCENARIO --out DIR [--seed N]``: write a dataset."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from inference_obs.errors import InferenceObsError
from inference_obs.simulate.publish import simulate
from inference_obs.simulate.scenario import scenario_names
from inference_obs.source.dataset.reader import MANIFEST

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Simulate a scenario into a dataset directory; 0 on success, 2 on a bad scenario."""
    parser = argparse.ArgumentParser(
        prog="python -m inference_obs.simulate",
        description="Simulate a scenario and write it as an observation dataset.",
    )
    parser.add_argument(
        "scenario", help=f"a shipped scenario ({', '.join(scenario_names())}) or a YAML file"
    )
    parser.add_argument("--out", required=True, type=Path, help="new or empty directory")
    parser.add_argument("--seed", type=int, default=None, help="default: the scenario's seed")
    args = parser.parse_args(argv)
    try:
        dataset = simulate(args.scenario, args.out, seed=args.seed)
    except InferenceObsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name in sorted([*dataset.manifest.files, MANIFEST]):
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
