"""The live-link runner's critical path: the longest chain of requests, each sent after the one
before it was answered, given link by link (times by hand)."""

from __future__ import annotations

from benchmarks.live_link import Call, critical_path, longest_chain


def test_the_critical_path_is_the_longest_chain_in_order() -> None:
    calls = [
        Call("a", "k", 0.0, 1.0, "first"),
        Call("b", "k", 0.5, 2.0, "overlaps the first: no link after it"),
        Call("c", "k", 1.0, 1.5, "sent as the first was answered"),
        Call("d", "k", 1.7, 3.0, "after c only"),
        Call("e", "k", 1.6, 1.9, "after c"),
        Call("f", "k", 1.9, 2.5, "after e"),
    ]
    # a -> c -> e -> f is four long; a -> c -> d and b alone are shorter.
    assert [call.phase for call in critical_path(calls)] == ["a", "c", "e", "f"]
    assert longest_chain(calls) == 4


def test_no_requests_no_path() -> None:
    assert critical_path([]) == []
    assert longest_chain([]) == 0
