"""``discover``: find the serving deployments in a source and write a deployments file."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from inference_obs.cli.options import EXIT_NO_DATA, EXIT_OK
from inference_obs.cli.sources import add_discovery_source_options, note, plan
from inference_obs.cli.times import started
from inference_obs.errors import ConfigurationError
from inference_obs.outputs import write_file

__all__ = ["register"]

_DESCRIPTION = """\
Find the vLLM and SGLang deployments with series in the window (by default
the last hour of a live source, or a dataset's own window): their models,
replicas and engines per replica, the GPUs each replica's pods hold according
to DCGM (pod/namespace labels, or exported_pod/exported_namespace in a
default GPU-operator scrape), GPU models and counts, and what
vllm:cache_config_info says. Write them as a commented deployments file, one
deployment per model and hardware class, with explicit selectors that
`inference-obs report --deployments FILE` reads as is. Only label sets are
read (the series endpoint): no samples, no change to anything.

Exit status: 0 written; 2 a bad option, --out exists (give --force), or a
URL that does not serve the Prometheus HTTP API; 3 no vLLM or SGLang series in
the window (nothing written); 4 the source failed."""


def _check_out(text: str, force: bool) -> Path | None:
    """The file to write (None for stdout), refused before any query if it cannot be."""
    if text == "-":
        return None
    if not text:
        raise ConfigurationError("--out: empty; give a file, or - for stdout")
    out = Path(text)
    if out.is_dir():
        raise ConfigurationError(f"--out {out}: is a directory; give a file name")
    if out.exists() and not force:
        raise ConfigurationError(
            f"--out {out}: exists; give --force to replace it (a hand-edited file would be lost)"
        )
    parent = out.parent
    if not parent.is_dir():
        raise ConfigurationError(f"--out {out}: no directory {parent} to write it in")
    try:  # a file made and removed: proves the directory writable, whoever runs this
        handle, probe = tempfile.mkstemp(prefix=f".{out.name}.partial-", dir=parent)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigurationError(
            f"--out {out}: {parent} cannot be written ({exc.strerror})"
        ) from None
    return out


def _discover(args: argparse.Namespace) -> int:
    from inference_obs.discover import discover

    if args.prometheus is None and args.dataset is None:
        raise ConfigurationError("give --prometheus URL (live) or --dataset DIR (offline)")
    out = _check_out(args.out, args.force)
    planned = plan(args, lambda line: None, started(), default_window="1h")
    opened = planned.open()
    found = discover(opened.source, opened.window)
    span = f"{opened.window.start.isoformat()} to {opened.window.end.isoformat()}"
    if not found.found:
        note(f"no vLLM or SGLang series in {opened.name} from {span}; nothing written")
        return EXIT_NO_DATA
    for entry in found.found:
        d = entry.deployment
        print(
            f"inference-obs: {d.name}: {len(d.replicas)} x {d.hardware.gpus_per_replica} "
            f"{d.hardware.gpu_model} ({d.engine.name})",
            file=sys.stderr,
        )
    for line in found.notes:
        note(line)
    text = found.to_yaml(opened.name)
    if out is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        write_file(out, text.encode("utf-8"))  # whole, replacing a link, never through it
    except OSError as exc:
        raise ConfigurationError(f"--out {out}: cannot be written ({exc.strerror})") from None
    print(f"wrote {out}")
    return EXIT_OK


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``discover`` to the top-level subparsers."""
    command = commands.add_parser(
        "discover",
        help="find the serving deployments and write a deployments file",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_discovery_source_options(command)
    command.add_argument(
        "--out",
        default="deployments.yaml",
        help="the deployments file to write, or - for stdout (default: deployments.yaml)",
    )
    command.add_argument("--force", action="store_true", help="replace an existing --out")
    command.set_defaults(run=_discover)
