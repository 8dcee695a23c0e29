"""Stable pseudonyms for identifying labels, so observed samples can be published.

:func:`sanitise` rewrites the labels of a sample set by
:class:`RedactionRules` and rewrites each deployment's selectors so that they
select the same series after the renaming. It is deterministic: the same
series and rules give the same output, whatever the order of the series. The
mapping from original to published values stays in memory
(:attr:`Sanitised.pseudonyms`) and is never written into a dataset.

What is renamed, dropped and kept, and the defaults, are described in
:mod:`inference_obs.source.dataset.redaction`. Replica pods take their deployment's
replica names (``PRO-01``, ``H20-01`` .. ``H20-04``); other renamed values
become ``<label>-NN``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from inference_obs.deployment import Deployment
from inference_obs.errors import DatasetError
from inference_obs.query import Matcher, regex_alternation
from inference_obs.samples import Labels, SampleSet
from inference_obs.source.dataset.redaction import Action, RedactionRules

__all__ = ["Sanitised", "sanitise"]

# A value shorter than this, or a number, is too common to count as a leak in free text.
_LEAK_MIN_CHARS = 3
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True, slots=True, eq=False)
class Sanitised:
    """Series and deployments ready to publish, and (in memory only) what was renamed.

    Attributes
    ----------
    samples
        The series with their labels rewritten; samples unchanged.
    deployments
        The deployments with selectors that select the same series as before,
        and their replica names.
    notes
        What was renamed or removed, for the manifest's ``sanitisation``.
    pseudonyms
        Label -> original value -> published value, for every value that
        changed. Never written anywhere; kept so the publisher can map back.
    dropped
        Label -> the values it had, for labels removed.
    """

    samples: SampleSet
    deployments: tuple[Deployment, ...]
    notes: tuple[str, ...]
    pseudonyms: Mapping[str, Mapping[str, str]]
    dropped: Mapping[str, frozenset[str]]

    def __repr__(self) -> str:
        return (
            f"Sanitised({len(self.samples)} series, renamed {sorted(self.pseudonyms)}, "
            f"dropped {sorted(self.dropped)})"
        )

    def check_published(self, texts: Iterable[str], where: str) -> None:
        """Refuse free text that still holds an original value of a renamed or dropped label.

        A value counts when it stands on its own (not inside a longer word or
        number) and has at least 3 characters and is not a number.

        Raises
        ------
        DatasetError
            Naming ``where``, the label and the value found.
        """
        owners: dict[str, str] = {}
        for label, mapping in self.pseudonyms.items():
            owners.update(dict.fromkeys(mapping, label))
        for label, values in self.dropped.items():
            owners.update(dict.fromkeys(values, label))
        secrets = sorted(
            (v for v in owners if len(v) >= _LEAK_MIN_CHARS and not _NUMBER.fullmatch(v)),
            key=lambda v: (-len(v), v),
        )
        if not secrets:
            return
        alternatives = "|".join(re.escape(v) for v in secrets)
        found = re.compile(rf"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])")
        for text in texts:
            hit = found.search(text)
            if hit:
                value = hit.group(0)
                raise DatasetError(
                    f"{where} contains {value!r}, an original value of label {owners[value]} "
                    "that sanitisation renames or drops; reword it or keep that label"
                )


def sanitise(
    samples: SampleSet, deployments: Sequence[Deployment], rules: RedactionRules | None = None
) -> Sanitised:
    """Rename identifying label values and rewrite the deployments' selectors to match.

    Parameters
    ----------
    samples
        The series to publish (timestamps unix ms; left as they are).
    deployments
        The deployments the series belong to; their ``selector`` and
        ``gpu_selector`` decide which pods are whose replicas.
    rules
        What to rename, drop and keep (default :class:`RedactionRules()`).

    Returns
    -------
    Sanitised
        Each deployment selects exactly the renamed images of the series it
        selected before (checked).

    Raises
    ------
    DatasetError
        If a pod is selected by two deployments, a rule would give two values
        one published value or an empty one, a selector uses a dropped label,
        or a deployment selects no series.
    """
    rules = rules or RedactionRules()
    values: dict[str, set[str]] = {}
    for labels in samples.labels:
        for label, value in labels.items():
            values.setdefault(label, set()).add(value)
    chosen = [_selected(samples, d) for d in deployments]
    replicas, deployments_out = _replicas(samples, deployments, chosen, rules)
    pseudonyms: dict[str, Mapping[str, str]] = {}
    dropped: dict[str, frozenset[str]] = {}
    notes: dict[str, list[str]] = {}
    for label in sorted(values):
        action = rules.action(label)
        if action == "drop":
            dropped[label] = frozenset(values[label])
            notes.setdefault("dropped", []).append(label)
            continue
        mapping = _mapping(label, action, sorted(values[label], key=_natural), replicas, rules)
        if action in ("replica", "pseudonymise"):
            notes.setdefault(action, []).append(label)
        elif mapping:
            notes.setdefault("values", []).append(label)
        if mapping:
            pseudonyms[label] = MappingProxyType(mapping)
    renamed = [_renamed(labels, pseudonyms, dropped) for labels in samples.labels]
    if len(set(zip(samples.names, renamed, strict=True))) != len(renamed):
        raise DatasetError(
            f"dropping {', '.join(sorted(dropped))} leaves series that only those labels told "
            "apart; pseudonymise them instead"
        )
    out = SampleSet(samples.names, tuple(renamed), samples.offsets, samples.t_ms, samples.values)
    rewritten = tuple(
        _rewrite(d, names, values, pseudonyms, dropped)
        for d, names in zip(deployments, deployments_out, strict=True)
    )
    for before, after, picked in zip(deployments, rewritten, chosen, strict=True):
        if _selected(out, after) != picked:
            raise DatasetError(f"deployment {before.name}: rewritten selectors select other series")
    return Sanitised(
        samples=out,
        deployments=rewritten,
        notes=_notes(notes, rewritten, rules),
        pseudonyms=MappingProxyType(pseudonyms),
        dropped=MappingProxyType(dropped),
    )


def _natural(value: str) -> tuple[tuple[tuple[int, int | str], ...], str]:
    """Sort key comparing runs of digits as numbers (pod-2 before pod-10), then the text
    itself, so values that compare equal as numbers (a2, a02) still have one order."""
    parts = re.split(r"(\d+)", value)
    return tuple((0, int(p)) if p.isdecimal() else (1, p) for p in parts), value


def _numbered(prefix: str, count: int, taken: set[str]) -> list[str]:
    """``count`` names ``prefix-NN`` (two digits at least) not in ``taken``."""
    width = max(2, len(str(count)))
    names: list[str] = []
    i = 0
    while len(names) < count:
        i += 1
        name = f"{prefix}-{i:0{width}d}"
        if name not in taken:
            names.append(name)
    return names


def _matches(name: str, labels: Labels, matchers: Iterable[Matcher]) -> bool:
    return all(
        m.matches(name if m.label == "__name__" else labels.get(m.label, "")) for m in matchers
    )


def _selected(samples: SampleSet, deployment: Deployment) -> frozenset[int]:
    """Indices of the series ``deployment`` selects by its engine or GPU selector."""
    return frozenset(
        i
        for i, (name, labels) in enumerate(zip(samples.names, samples.labels, strict=True))
        if _matches(name, labels, deployment.matchers)
        or _matches(name, labels, deployment.gpu_matchers)
    )


def _replicas(
    samples: SampleSet,
    deployments: Sequence[Deployment],
    chosen: Sequence[frozenset[int]],
    rules: RedactionRules,
) -> tuple[dict[str, str], list[tuple[str, ...]]]:
    """Pod value -> replica name, and each deployment's replica names (declared first)."""
    owner: dict[str, str] = {}
    names: dict[str, str] = {}
    per_deployment: list[tuple[str, ...]] = []
    taken = {name for d in deployments for name in d.replicas}
    for deployment, picked in zip(deployments, chosen, strict=True):
        pods = {
            samples.labels[i][label]
            for i in picked
            for label in rules.replica_labels
            if label in samples.labels[i]
        }
        for pod in pods:
            if pod in owner:
                raise DatasetError(
                    f"pod {pod!r} is selected by deployments {owner[pod]} and {deployment.name}; "
                    "make their selectors disjoint"
                )
            owner[pod] = deployment.name
        ordered = sorted(pods, key=_natural)
        declared = list(deployment.replicas)
        extra = _numbered(deployment.name, max(0, len(ordered) - len(declared)), taken)
        taken.update(extra)
        replica_names = declared + extra
        names.update(zip(ordered, replica_names, strict=False))
        per_deployment.append(tuple(replica_names))
    return names, per_deployment


def _mapping(
    label: str, action: Action, ordered: list[str], replicas: dict[str, str], rules: RedactionRules
) -> dict[str, str]:
    """Original -> published value for the values of ``label`` that change."""
    if action == "replica":
        rest = [v for v in ordered if v not in replicas]
        mapping = {v: replicas[v] for v in ordered if v in replicas}
        mapping.update(zip(rest, _numbered(label, len(rest), set(mapping.values())), strict=True))
    elif action == "pseudonymise":
        mapping = dict(zip(ordered, _numbered(label, len(ordered), set()), strict=True))
    else:
        mapping = {}
        hidden = []
        for value in ordered:
            rule = next(
                (
                    r
                    for r in rules.values
                    if re.fullmatch(r.labels, label) and re.search(r.pattern, value)
                ),
                None,
            )
            if rule is None:
                continue
            if rule.replacement is None:
                hidden.append(value)
            else:
                mapping[value] = re.sub(rule.pattern, rule.replacement, value)
        kept = {v for v in ordered if v not in mapping and v not in hidden}
        mapping.update(zip(hidden, _numbered(label, len(hidden), kept), strict=True))
    published = [mapping.get(v, v) for v in ordered]
    if "" in published or len(set(published)) != len(published):
        raise DatasetError(
            f"label {label}: the rules give two values the same published value, or an empty "
            "one; change the value rule for this label"
        )
    return {k: v for k, v in mapping.items() if k != v}


def _renamed(
    labels: Labels, pseudonyms: Mapping[str, Mapping[str, str]], dropped: Mapping[str, object]
) -> Labels:
    return Labels(
        (k, pseudonyms[k].get(v, v) if k in pseudonyms else v)
        for k, v in labels.items()
        if k not in dropped
    )


def _rewrite(
    deployment: Deployment,
    replicas: tuple[str, ...],
    values: Mapping[str, set[str]],
    pseudonyms: Mapping[str, Mapping[str, str]],
    dropped: Mapping[str, object],
) -> Deployment:
    """The deployment with its replica names, and selectors on renamed labels rewritten."""

    def one(selector: dict[str, str], matchers: tuple[Matcher, ...]) -> dict[str, str]:
        out = {}
        for (label, text), matcher in zip(selector.items(), matchers, strict=True):
            if label in dropped:
                raise DatasetError(
                    f"deployment {deployment.name}: its selector uses label {label}, which the "
                    "rules drop; keep or pseudonymise that label"
                )
            mapping = pseudonyms.get(label)
            if not mapping:
                out[label] = text
                continue
            accepted = sorted(
                {mapping.get(v, v) for v in {"", *values.get(label, ())} if matcher.matches(v)}
            )
            if not accepted:
                raise DatasetError(
                    f"deployment {deployment.name}: its selector on {label} selects no series"
                )
            out[label] = _compact(accepted)
        return out

    data = deployment.model_dump()
    data["replicas"] = replicas
    data["selector"] = one(deployment.selector, deployment.matchers)
    if deployment.gpu_selector is not None:
        data["gpu_selector"] = one(deployment.gpu_selector, deployment.gpu_matchers)
    return Deployment.model_validate(data)


def _compact(accepted: list[str]) -> str:
    """The compact selector form (see :mod:`inference_obs.deployment`) of exactly ``accepted``."""
    if len(accepted) == 1 and not accepted[0].startswith(("~", "!", "=")):
        return accepted[0]
    return "~" + regex_alternation(accepted)


def _notes(
    notes: Mapping[str, list[str]], deployments: Sequence[Deployment], rules: RedactionRules
) -> tuple[str, ...]:
    lines = []
    if "replica" in notes:
        names = "; ".join(f"{d.name}: {', '.join(d.replicas) or 'none'}" for d in deployments)
        lines.append(
            f"Pods ({', '.join(notes['replica'])}) renamed to their deployment's replica names "
            f"in sorted order ({names})."
        )
    if "pseudonymise" in notes:
        lines.append(
            f"Values of {', '.join(notes['pseudonymise'])} replaced by <label>-NN pseudonyms, "
            "numbered in the sorted order of the original values; the mapping is not published."
        )
    if "values" in notes:
        rules_text = "; ".join(r.description for r in rules.values)
        lines.append(
            f"Values of {', '.join(notes['values'])} matching a value rule ({rules_text}) "
            "pseudonymised or rewritten."
        )
    if "dropped" in notes:
        lines.append(f"Labels removed: {', '.join(notes['dropped'])}.")
    lines.append(
        "Deployment selectors rewritten to the published values; each selects the same series "
        "as before sanitisation."
    )
    return tuple(lines)
