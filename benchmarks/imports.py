"""What a command pays before it works: ``import inference_obs``, ``--version`` and ``lint``.

Each command runs as a user runs it, in a fresh interpreter (``python -m
inference_obs.cli ...`` from the tree's root), so the time includes the
interpreter's start and every import. With ``--against DIR`` (another checkout
of the repository, e.g. ``git archive`` of main unpacked there) both trees run
each command in turn, the order alternating by round, and the medians are
compared in the same run.

Printed per command and tree: the medians of wall time and of CPU time (user +
system, the process's own: on a machine other work shares, the wall time also
holds the waits for a core, the CPU time much less), the 1-minute load average
during the run, and which of pandas, matplotlib and scipy the command loaded.

Goals: ``inference-obs lint`` of a 200-panel dashboard under 0.5 s,
``inference-obs --version`` under 0.3 s, and none of the three loaded.

Run from the repository root::

    python -m benchmarks.imports [--rounds 7] [--against DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.lint import dashboard

HEAVY = ("pandas", "matplotlib", "scipy")
#: Seconds each command must take at most (wall time on an idle machine).
GOALS = {"--version": 0.3, "lint": 0.5}
# Prints the heavy modules loaded once the command has run (its own output discarded).
_PROBE = (
    "import json, runpy, sys\n"
    "sys.argv = ['inference-obs', *{argv!r}]\n"
    "try:\n"
    "    runpy.run_module('inference_obs.cli', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "loaded = sorted(m for m in {heavy!r} if m in sys.modules)\n"
    "sys.__stderr__.write('\\n' + json.dumps(loaded) + '\\n')\n"
)


def commands(dashboard_path: Path) -> dict[str, list[str]]:
    """The command lines timed, by name: each as a user types it (after ``python``)."""
    return {
        "import inference_obs": ["-c", "import inference_obs"],
        "--version": ["-m", "inference_obs.cli", "--version"],
        "lint": ["-m", "inference_obs.cli", "lint", str(dashboard_path)],
    }


def run_once(argv: list[str], tree: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``python ARGV`` run in ``tree`` (its package imported)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *argv],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    wall = time.perf_counter() - started
    # The children's usage grows by this child's alone: it is the only one reaped meanwhile.
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def heavy_loaded(argv: list[str], tree: Path) -> list[str]:
    """Which of pandas, matplotlib and scipy ``python ARGV`` holds once it has run."""
    if argv[0] == "-c":
        code = (
            f"import json, sys\n{argv[1]}\n"
            f"loaded = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
            "sys.__stderr__.write('\\n' + json.dumps(loaded) + '\\n')\n"
        )
    else:
        code = _PROBE.format(argv=argv[2:], heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    last = done.stderr.strip().splitlines()[-1:]
    found: list[str] = json.loads(last[0]) if last else ["(failed)"]
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    args = parser.parse_args(argv)

    trees = {"ours": Path.cwd()}
    if args.against is not None:
        trees["against"] = args.against.resolve()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "dashboard.json"
        path.write_text(json.dumps(dashboard(200)))
        lines = commands(path)
        for root in trees.values():  # compile each tree's bytecode once, untimed
            for line in lines.values():
                run_once(line, root)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {
            (t, c): [] for t in trees for c in lines
        }
        loads = []
        for r in range(args.rounds):
            order = list(trees)[r % len(trees) :] + list(trees)[: r % len(trees)]
            for name, line in lines.items():
                for tree in order:
                    times[(tree, name)].append(run_once(line, trees[tree]))
            loads.append(os.getloadavg()[0])
        loaded = {(t, c): heavy_loaded(lines[c], trees[t]) for t in trees for c in lines}

    print(
        f"{args.rounds} rounds; 1-minute load average {min(loads):.1f}-{max(loads):.1f} "
        f"on {os.cpu_count()} cores"
    )
    print(f"\n{'command':22} {'tree':8} {'wall s':>8} {'CPU s':>8}  loaded")
    for name in lines:
        for tree in trees:
            wall = statistics.median(w for w, _ in times[(tree, name)])
            cpu = statistics.median(c for _, c in times[(tree, name)])
            heavy = ", ".join(loaded[(tree, name)]) or "none of the three"
            print(f"{name:22} {tree:8} {wall:8.3f} {cpu:8.3f}  {heavy}")
    for name, goal in GOALS.items():
        cpu = statistics.median(c for _, c in times[("ours", name)])
        verdict = "within" if cpu < goal else "past"
        print(f"\n{name}: CPU median {cpu:.3f} s, {verdict} the {goal} s goal", end="")
    print()


if __name__ == "__main__":
    main()
