"""Whether a dataset fits this machine, estimated before it is read.

An offline report holds every sample of a dataset in memory (16 bytes of
columns a sample, and the analyses' working arrays over them). Past what the
machine has, reading would end in swapping or the kernel's OOM killer; the
route then is to load the dataset into a store and report from there
(``inference-obs dataset load DIR --into URL``, then ``inference-obs report
--prometheus URL``), so :func:`check_fits` refuses with that route instead.

The estimate costs reading 1 MiB in 32 places across the file: samples are
the file's size over the mean bytes of a sample line there, series are
samples over the samples a series holds in the manifest's window at its
scrape interval. The peak of a whole offline report (``ru_maxrss`` of
``inference-obs report --dataset DIR``, every format and figure, the sample
cache empty) was measured on this project's datasets and generated fleets
(``python -m benchmarks.fleet``) and fitted as ``320 MiB + 48 B a sample +
12 KiB a series``. The fit's fixed part was 246 MiB; it is raised because a
report's peak varies with how its threads are scheduled (the bundled
dataset's, 257 MiB on a quiet machine, reached 286 MiB on a busy one) and
grows as the report does:

==================================  =========  ======  ========  ========  =====
dataset                             samples    series  measured  estimate  ratio
==================================  =========  ======  ========  ========  =====
pro5000-vs-h20                         32,820     547  257 MiB   328 MiB   0.78
h100-vs-h200                           38,730   1,291  240 MiB   337 MiB   0.71
r1-decode                              30,240     504  225 MiB   328 MiB   0.69
fleet 8 replicas x 8 GPUs, 1 h      1,039,232   4,368  333 MiB   417 MiB   0.80
fleet 8 x 8, 6 h                    6,280,832   4,368  571 MiB   656 MiB   0.87
fleet 32 x 8, 1 h                   4,184,192  17,472  632 MiB   714 MiB   0.89
==================================  =========  ======  ========  ========  =====

(ratio: measured on a quiet machine / estimate; samples and series are the
true counts, which the estimate's own came within 3% of). The estimate was
above the measured peak on each; :data:`MARGIN` covers what it cannot see
(other processes growing while the report runs).

The memory available is the kernel's ``MemAvailable`` (``/proc/meminfo``),
or free physical pages where there is none, within a cgroup v2 limit when
one applies, plus what this process already holds (the estimate counts the
whole process). ``INFERENCE_OBS_AVAILABLE_MEMORY`` overrides it: a size
(``64G``, ``512M``, bytes without a suffix) or ``unlimited``.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from inference_obs.errors import DatasetError

__all__ = ["ENV", "MARGIN", "Estimate", "available_bytes", "check_fits", "estimate"]

#: The environment variable that sets the memory to plan for (or ``unlimited``).
ENV = "INFERENCE_OBS_AVAILABLE_MEMORY"
#: Refuse when the estimate times this exceeds what is available.
MARGIN = 1.25
# The fit above: a report's fixed part (imports, figures), per sample, per series.
_BASE_BYTES = 320 << 20
_SAMPLE_BYTES = 48
_SERIES_BYTES = 12 << 10
# Places across the file where line lengths are sampled, and bytes read at each:
# families differ in line length (DCGM lines carry twice vLLM's labels), so one
# place would not do; 1 MiB read in all.
_PROBES = 32
_PROBE_BYTES = 32 << 10
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Estimate:
    """What reading a dataset and reporting on it is expected to take.

    Attributes
    ----------
    samples, series
        Estimated counts (from the file's size and lines, and the manifest).
    peak_bytes
        Estimated peak resident memory of a whole offline report, bytes.
    """

    samples: int
    series: int
    peak_bytes: int


def estimate(samples_file: Path, window_s: float, interval_s: float) -> Estimate:
    """Estimate a report's peak memory from ``samples_file``'s size and lines read across it.

    Parameters
    ----------
    samples_file
        The dataset's ``samples.om``.
    window_s, interval_s
        The manifest's window length and scrape interval, seconds: a series
        holds about ``window_s / interval_s`` samples.
    """
    size = samples_file.stat().st_size
    lines = counted = 0
    with samples_file.open("rb") as data:
        for k in range(_PROBES):
            data.seek(size * k // _PROBES)
            text = data.read(_PROBE_BYTES)
            # Whole lines only: from after the first newline (but at the start) to the last.
            first = 0 if k == 0 else text.find(b"\n") + 1
            last = text.rfind(b"\n") + 1
            if 0 < first < last or (k == 0 and last):
                whole = text[first:last]
                lines += whole.count(b"\n") - whole.count(b"\n#") - whole.startswith(b"#")
                counted += len(whole)
    samples = round(size * lines / counted) if counted else 0
    per_series = max(window_s / interval_s, 1.0)
    series = max(round(samples / per_series), 1 if samples else 0)
    peak = _BASE_BYTES + _SAMPLE_BYTES * samples + _SERIES_BYTES * series
    return Estimate(samples, series, peak)


def available_bytes() -> int | None:
    """Memory this process may still use, plus what it holds; ``None`` if unknown or unlimited.

    Raises
    ------
    DatasetError
        ``INFERENCE_OBS_AVAILABLE_MEMORY`` is set but is not a size.
    """
    setting = os.environ.get(ENV, "").strip()
    if setting:
        if setting.lower() == "unlimited":
            return None
        match = _SIZE.fullmatch(setting)
        if match is None:
            raise DatasetError(
                f"{ENV}={setting!r}: expected a size such as 64G or 512M, or 'unlimited'"
            )
        power = " KMGT".index(match.group(2).upper() or " ")
        return int(float(match.group(1)) * 1024**power)
    free = _mem_available()
    if free is None:
        return None
    limit = _cgroup_room()
    return (free if limit is None else min(free, limit)) + _resident()


def check_fits(samples_file: Path, dataset: Path, window_s: float, interval_s: float) -> None:
    """Refuse, naming the route past one machine, a dataset this machine cannot hold.

    Raises
    ------
    DatasetError
        When the estimated peak, times :data:`MARGIN`, is above
        :func:`available_bytes`.
    """
    room = available_bytes()
    if room is None:
        return
    try:
        need = estimate(samples_file, window_s, interval_s)
    except OSError:
        return  # a missing or unreadable file is reported where it is read
    if need.peak_bytes * MARGIN <= room:
        return
    raise DatasetError(
        f"{dataset}: an offline report over it needs about {need.peak_bytes / 2**30:.1f} GiB "
        f"(about {need.samples:,} samples of {need.series:,} series, estimated from "
        f"{samples_file.name}'s size), more than the {room / 2**30:.1f} GiB "
        f"{f'{ENV} plans for' if os.environ.get(ENV, '').strip() else 'this machine has available'}"
        "; load it into a Prometheus-compatible store and report from there: "
        f"inference-obs dataset load {dataset} --into URL, then inference-obs report "
        f"--prometheus URL --deployments {dataset / 'manifest.json'} (README: Larger than one "
        f"machine); or set {ENV} to the memory to plan for"
    )


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_room() -> int | None:
    """Room left under this process's cgroup v2 memory limit, if one is set."""
    try:
        group = Path("/proc/self/cgroup").read_text(encoding="utf-8").strip().partition("::")[2]
        base = Path("/sys/fs/cgroup") / group.lstrip("/")
        limit = (base / "memory.max").read_text(encoding="ascii").strip()
        if limit == "max":
            return None
        return int(limit) - int((base / "memory.current").read_text(encoding="ascii"))
    except (OSError, ValueError):
        return None


def _resident() -> int:
    """What this process holds now (its peak so far: the estimate counts the whole process)."""
    try:
        import resource  # not on Windows
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux says KiB, macOS bytes
