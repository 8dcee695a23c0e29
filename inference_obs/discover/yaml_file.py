"""The discovered deployments as a commented YAML file that ``report --deployments`` reads as is.

Every value is written explicitly: regex selectors in the ``{regex: "..."}``
form (never the ``~`` shorthand), strings double-quoted (JSON string syntax,
which YAML reads unchanged), and what the series show but a deployment does
not declare (replica names, KV-cache details, the parallelism the GPU count
allows) as comments above each entry. Text from the series in a comment has
every character that is not printable (a line or paragraph separator, which
YAML reads as a line break; a control character) written as a ``\\uXXXX``
escape, so that no label value can end a comment and add YAML of its own: the
file reads back as exactly the deployments found.
"""

from __future__ import annotations

import json
import textwrap

from inference_obs.deployment import EXPLICIT, DeclaredConfig, Deployment
from inference_obs.discover.group import Found

__all__ = ["deployments_yaml"]

# The compact prefixes, longest first, and the explicit form each is written as.
_FORMS = sorted(((prefix, form) for form, prefix in EXPLICIT.items()), key=lambda p: -len(p[0]))


def _text(value: str) -> str:
    return json.dumps(value)


def _comment(text: str) -> str:
    """``text`` safe inside a ``#`` comment: what is not printable, escaped.

    YAML 1.1 breaks lines at U+0085, U+2028 and U+2029 as well as at CR and LF,
    so any of them in a model or pod name would end the comment early.

    >>> _comment("org/m\\u2028- name: x")
    'org/m\\\\u2028- name: x'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def _value(compact: str) -> str:
    """A compact selector value in its explicit YAML form."""
    for prefix, form in _FORMS:
        if compact.startswith(prefix):
            return f"{{{form}: {_text(compact[len(prefix) :])}}}"
    return _text(compact)


def _selector(name: str, selector: dict[str, str], indent: str) -> list[str]:
    lines = [f"{indent}{name}:"]
    lines += [f"{indent}  {label}: {_value(v)}" for label, v in selector.items()]
    return lines


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return _text(str(value))


def _entry(found: Found) -> list[str]:
    d: Deployment = found.deployment
    lines = [
        f"  # {'  ' * (i > 0)}{line}"
        for note in found.notes
        for i, line in enumerate(textwrap.wrap(_comment(note), 84))
    ]
    lines.append(f"  - name: {_text(d.name)}")
    lines.append(f"    replicas: [{', '.join(_text(r) for r in d.replicas)}]")
    lines += _selector("selector", d.selector, "    ")
    if d.gpu_selector is not None:
        lines.append(
            "    # DCGM names the pods exported_pod/exported_namespace (GPU-operator scrape)"
        )
        lines += _selector("gpu_selector", d.gpu_selector, "    ")
    lines += [
        "    hardware:",
        f"      gpu_model: {_text(d.hardware.gpu_model)}",
        f"      gpus_per_replica: {d.hardware.gpus_per_replica}",
        "    engine:",
        f"      name: {d.engine.name}",
    ]
    declared = {k: v for k, v in d.config.model_dump().items() if v is not None}
    if declared:
        lines.append("    config:")
        lines += [f"      {k}: {_scalar(v)}" for k, v in declared.items()]
    return lines


def deployments_yaml(found: list[Found], *, source: str, window: str, notes: list[str]) -> str:
    """The deployments file: a header, then one commented entry per deployment.

    Parameters
    ----------
    found
        From :func:`~inference_obs.discover.group.deployments`.
    source
        Where they were found (a URL without credentials, or a dataset path).
    window
        The window read, as text.
    notes
        Findings about the whole source (GPUs no replica holds), as comment lines.
    """
    unset = ", ".join(f for f in DeclaredConfig.model_fields if f not in _declared(found))
    header = [
        "# Deployments found by `inference-obs discover`",
        f"# in {_comment(source)}",
        f"# over {_comment(window)}.",
        "#",
        "# One deployment per model and hardware class, everything read from the series.",
        "# Rename deployments freely (names appear in report keys). Selectors: a plain",
        '# value matches exactly, {regex: "..."} as a PromQL regex (anchored); see',
        "# docs/deployments.md. Declared config may also hold, where you know them:",
        *(f"#   {line}" for line in textwrap.wrap(unset + ".", 84)),
        "# Check it against the fleet with:",
        "#   inference-obs report --deployments THIS_FILE --prometheus URL --end now --window 1h",
    ]
    header += [
        f"# {'  ' * (i > 0)}{line}"
        for note in notes
        for i, line in enumerate(textwrap.wrap(_comment(note), 86))
    ]
    body = ["deployments:"]
    for entry in found:
        body += _entry(entry)
    return "\n".join([*header, "", *body]) + "\n"


def _declared(found: list[Found]) -> set[str]:
    return {k for f in found for k, v in f.deployment.config.model_dump().items() if v is not None}
