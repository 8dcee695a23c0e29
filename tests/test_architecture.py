"""No import circles between the package's modules.

The import graph is grimp's (the graph import-linter checks its contracts
on): every ``import`` in ``inference_obs``, those inside functions and those
under ``TYPE_CHECKING`` included. A type-only circle is still a circle to
the reader and to the checker: the modules cannot be understood apart.
A circle is written as a chain of module names (without the leading
``inference_obs.``) from its first module in sorted order back to it, e.g.
``report.build -> report.sections -> report.build``.
"""

from __future__ import annotations

import grimp
import pytest

ROOT = "inference_obs"

# More elementary circles than this means a tangle to untie, not a list to read.
_MOST_CIRCLES = 200


def circles(graph: grimp.ImportGraph, root: str) -> set[str]:
    """Every elementary import circle of ``graph``, as a readable chain.

    Each circle is found once, from its first module in sorted order: only
    modules after it, and in its strongly connected part of the graph, are
    walked.
    """
    found: set[str] = set()
    for start in sorted(graph.modules):
        # The modules that both import start (directly or not) and are imported by it.
        tangle = graph.find_downstream_modules(start) & graph.find_upstream_modules(start)
        paths: list[tuple[str, ...]] = [(start,)]
        while paths:
            path = paths.pop()
            for imported in graph.find_modules_directly_imported_by(path[-1]):
                if imported == start:
                    found.add(" -> ".join(_short(m, root) for m in (*path, start)))
                elif imported in tangle and imported > start and imported not in path:
                    paths.append((*path, imported))
            if len(found) > _MOST_CIRCLES:
                raise AssertionError(f"over {_MOST_CIRCLES} import circles, e.g. {sorted(found)}")
    return found


def _short(module: str, root: str) -> str:
    return module.removeprefix(f"{root}.")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # No cache: a cache directory would be left in the working tree.
    return grimp.build_graph(ROOT, cache_dir=None, exclude_type_checking_imports=False)


def test_there_is_no_import_circle(graph: grimp.ImportGraph) -> None:
    found = sorted(circles(graph, ROOT))
    assert not found, "import circles (imports must point one way):\n" + "\n".join(found)


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    made = grimp.ImportGraph()
    for importer, imported in imports:
        made.add_import(importer=importer, imported=imported)
    return made


def test_circles_are_found_once_each_from_their_first_module() -> None:
    made = _graph(
        ("p.c", "p.a"),
        ("p.a", "p.b"),
        ("p.b", "p.c"),
        ("p.b", "p.a"),
        ("p.d", "p.a"),  # imports into a circle but is not in one
    )
    assert circles(made, "p") == {"a -> b -> a", "a -> b -> c -> a"}


def test_a_graph_that_only_points_down_has_no_circles() -> None:
    made = _graph(("p.a", "p.b"), ("p.a", "p.c"), ("p.b", "p.c"))
    assert circles(made, "p") == set()
