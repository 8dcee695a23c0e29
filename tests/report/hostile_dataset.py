"""The bundled dataset with markup and terminal controls in every text a report shows.

The manifest's title, methodology, sanitisation notes, a deployment's name,
replica and GPU model, and a label value of the samples (a pod's name) carry
HTML that runs script in a browser, Markdown links with a ``javascript:``
target and a link reference definition; all but the deployment's name (which
refuses them) carry ANSI escape sequences, a C1 control and bidi controls.
The manifest's file hashes are refreshed so the copy reads as a valid dataset.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"

#: HTML a Markdown renderer passes through as live elements, and a link with a script target.
MARKUP = (
    "<script>alert(1)</script> <iframe src=x></iframe> <img src=x onerror=alert(2)> "
    "<svg onload=alert(3)> [x](javascript:alert(4)) ![y](javascript:alert(5))"
)
#: A line that, at a line's start, would define ``[20, 40]`` (a bucket interval the report
#: prints) as a link to another site.
REFERENCE = "[20, 40]: https://evil.example/"
#: Colour, clear screen, window title (OSC ... BEL), a C1 CSI, bidi override and isolate,
#: a line separator.
CONTROLS = (
    "\x1b[31mRED\x1b[0m \x1b[2J \x1b]0;owned\x07 \x9b31m \u202eevil\u202c \u2066x\u2069 a\u2028b"
)
#: Deployment names become figure file names: ``/`` and ``%`` are encoded there; a name
#: holding a control character is refused (a name is read on screen), so the controls are
#: in the other texts.
NAME = "PRO/1 at 100% <b>bold <img src=x onerror=alert(7)> [n](javascript:alert(8))"


def hostile_dataset(path: Path) -> Path:
    """A copy of the bundled dataset at ``path``, every shown text holding hostile text."""
    shutil.copytree(DATASET, path)
    manifest = json.loads((path / "manifest.json").read_text())
    hostile = f"{MARKUP} {CONTROLS}"
    manifest["title"] += f" {hostile}"
    manifest["methodology"] = [*manifest["methodology"], f"Hostile: {hostile}", REFERENCE]
    manifest["sanitisation"] = [f"Renamed {hostile}"]
    pro = manifest["deployments"][0]
    pro["name"] = NAME
    pro["replicas"] = [f"PRO-01 {hostile}"]
    pro["hardware"]["gpu_model"] += f" {hostile}"
    samples = (path / "samples.om").read_text()
    # No '"', '\\' or newline, so no OpenMetrics escape is needed; the pod still matches
    # the deployment's selector pod=~"pro-model-.*".
    samples = samples.replace(
        'pod="pro-model-01"', 'pod="pro-model-01<img src=x onerror=alert(9)>\x1b[2J"'
    )
    (path / "samples.om").write_text(samples)
    for name in manifest["files"]:
        manifest["files"][name] = hashlib.sha256((path / name).read_bytes()).hexdigest()
    (path / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return path
