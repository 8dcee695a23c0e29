"""The error tree drawn in errors.py's docstring is the tree the classes form."""

from __future__ import annotations

import builtins
import re

from inference_obs import errors
from inference_obs.errors import InferenceObsError

# "    │   ├── Name(Builtin) words": the indent before the branch gives the depth.
_BRANCH = re.compile(
    r"^    (?P<indent>(?:│   |    )*)[├└]── (?P<name>\w+)(?:\((?P<builtin>\w+)\))?"
)


def _drawn() -> dict[str, tuple[str, str | None]]:
    """Each drawn class -> (its parent in the drawing, the builtin named beside it)."""
    assert errors.__doc__ is not None
    parents = ["InferenceObsError"]
    found: dict[str, tuple[str, str | None]] = {}
    for line in errors.__doc__.splitlines():
        match = _BRANCH.match(line)
        if match is None:
            continue
        depth = len(match["indent"]) // 4
        del parents[depth + 1 :]
        found[match["name"]] = (parents[depth], match["builtin"])
        parents.append(match["name"])
    return found


def test_every_error_is_drawn_under_its_parent() -> None:
    drawn = _drawn()
    classes = {
        name: cls
        for name in errors.__all__
        if isinstance(cls := getattr(errors, name), type) and issubclass(cls, InferenceObsError)
    }
    assert set(drawn) == set(classes) - {"InferenceObsError"}
    for name, (parent, builtin) in drawn.items():
        cls = classes[name]
        assert cls.__bases__[0] is classes[parent], f"{name} is drawn under {parent}"
        if builtin is not None:
            assert issubclass(cls, getattr(builtins, builtin)), f"{name} is no {builtin}"


def test_each_builtin_named_is_a_direct_base() -> None:
    # A class names the builtin it adds, not one it inherits from its parent.
    for name, (_, builtin) in _drawn().items():
        if builtin is not None:
            bases = getattr(errors, name).__bases__
            assert getattr(builtins, builtin) in bases, f"{name} does not add {builtin}"
