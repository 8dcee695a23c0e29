"""JSON and YAML read from a user's files, under one set of rules.

Every JSON or YAML file a command reads (a deployments file, a dataset's
``manifest.json``, a ``--baseline`` report.json, a Grafana dashboard, a rule
file) is parsed here, so each rule holds in one place. Text that is not JSON
or YAML at all raises the parser's own error (``json.JSONDecodeError``,
``yaml.YAMLError``), which each reader words for its file; what parses but
breaks a rule raises :class:`~inference_obs.errors.DocumentError`, naming the
file (and the line, where the parser knows it):

- nesting deeper than :data:`MAX_DEPTH` objects or lists (mappings or
  sequences). Without the limit the parsers themselves fail with a
  ``RecursionError`` some thousand levels down, and every reader that walks
  a document recursively (pydantic, the lint walkers) sooner;
- a key twice in one object or mapping (``json`` and PyYAML keep the last one
  silently, so the first would be lost unseen); YAML merge keys (``<<``) are
  not repeats;
- in JSON, ``NaN``, ``Infinity`` and a number too large for a float
  (``1e999``, which Python reads as infinity): JSON has no such numbers, and
  no file these readers take holds one. YAML's ``.nan`` and ``.inf`` are
  floats of YAML's own; the schema of the file refuses them where a number
  must be finite (see :mod:`inference_obs.deployment`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable
from typing import Any

import yaml

from inference_obs.errors import DocumentError

__all__ = ["MAX_DEPTH", "json_document", "yaml_document", "yaml_nodes"]

#: Objects or lists nested in one another, at most. The deepest file known to be read
#: nests 12 (a GKE dashboard: rows of panels of targets); a report.json nests 9. 64 leaves
#: room for any real file, and keeps a recursive reader far from Python's recursion limit
#: (1000 frames, which the parsers reach a few hundred levels down).
MAX_DEPTH = 64


def _too_deep(source: str, line: int | None = None) -> DocumentError:
    where = source if line is None else f"{source}:{line}"
    return DocumentError(
        f"{where}: nested deeper than {MAX_DEPTH} objects or lists; no such file is that deep "
        "(a cut-and-paste or a generated file gone wrong?)"
    )


def _check_depth(value: Any, source: str) -> None:
    """Refuse a parsed JSON value nested deeper than :data:`MAX_DEPTH` (iteratively)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_DEPTH:
            raise _too_deep(source)
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def json_document(text: str, source: str) -> Any:
    """Parse JSON ``text`` under the module's rules; ``source`` names it in errors.

    Raises
    ------
    json.JSONDecodeError
        When ``text`` is not JSON (the caller words it, naming its file).
    DocumentError
        Nested past :data:`MAX_DEPTH`, a key twice in one object, or a number
        that is not finite.
    """

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise DocumentError(f"{source}: key {key!r} appears twice in one object")
            out[key] = value
        return out

    def constant(name: str) -> float:
        raise DocumentError(f"{source}: {name} is not JSON; numbers must be finite")

    def number(digits: str) -> float:
        value = float(digits)
        if not math.isfinite(value):
            raise DocumentError(f"{source}: {digits} is too large for a number; numbers are finite")
        return value

    try:
        value = json.loads(
            text, object_pairs_hook=pairs, parse_constant=constant, parse_float=number
        )
    except RecursionError:
        # The C decoder stops at the interpreter's recursion limit, and unwinds cleanly.
        raise _too_deep(source) from None
    if isinstance(value, dict | list):
        _check_depth(value, source)
    return value


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing nesting past :data:`MAX_DEPTH` and repeated keys."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self.source = source
        self.depth = 0

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:  # checked on the way in, before the composer recurses
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise _too_deep(self.source, event.start_mark.line + 1)

    def compose_sequence_node(self, anchor: Any) -> yaml.SequenceNode:
        self._enter()
        try:
            return super().compose_sequence_node(anchor)
        finally:
            self.depth -= 1

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        self._enter()
        try:
            return super().compose_mapping_node(anchor)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` then a key of base: an override, as YAML means it
            key = self.construct_object(key_node, deep=True)
            try:
                earlier = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the constructor below refuses it
            line = key_node.start_mark.line + 1
            if earlier is not None:
                raise _twice(self.source, key, earlier, line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _twice(source: str, key: object, earlier: int, line: int) -> DocumentError:
    return DocumentError(
        f"{source}:{line}: key {key!r} appears twice in one mapping (lines "
        f"{earlier} and {line}); YAML readers keep only the last, so remove one"
    )


def _check_composed_keys(node: yaml.Node | None, source: str) -> None:
    """Refuse a plain key written twice in one composed mapping (as Prometheus's loader does).

    Only scalar keys are compared, by their text: composing constructs nothing,
    and rule files key their mappings by plain words (``expr``, ``for``).
    """
    stack = [node] if node is not None else []
    visited: set[int] = set()  # an alias is the node it names: visit each once, cycles too
    while stack:
        current = stack.pop()
        if id(current) in visited:
            continue
        visited.add(id(current))
        if isinstance(current, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in current.value:
                stack.append(value_node)
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                    continue
                line = key_node.start_mark.line + 1
                if key_node.value in seen:
                    raise _twice(source, key_node.value, seen[key_node.value], line)
                seen[key_node.value] = line
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


def yaml_document(text: str, source: str) -> Any:
    """Parse one YAML document, as ``yaml.safe_load`` does, under the module's rules.

    Raises
    ------
    yaml.YAMLError
        When ``text`` is not YAML (the caller words it, naming its file).
    DocumentError
        Nested past :data:`MAX_DEPTH`, or a key twice in one mapping.
    """
    loader = _Loader(text, source)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_nodes(text: str, source: str) -> list[yaml.Node | None]:
    """Compose every YAML document of ``text`` (as ``yaml.compose_all``), refusing deep nesting.

    The nodes keep their positions, for readers that name lines. A plain key
    written twice in one mapping is refused, as Prometheus refuses it in a rule file.

    Raises
    ------
    yaml.YAMLError
        When ``text`` is not YAML.
    DocumentError
        Nested past :data:`MAX_DEPTH`, or a plain key twice in one mapping.
    """
    loader = _Loader(text, source)
    try:
        documents: list[yaml.Node | None] = []
        while loader.check_node():
            documents.append(loader.get_node())
    finally:
        loader.dispose()
    for document in documents:
        _check_composed_keys(document, source)
    return documents
