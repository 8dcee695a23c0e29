"""No base URL and no label name makes the client send a request off its allowlist.

Generated base-URL suffixes (after ``http://127.0.0.1:PORT``) and label names
drive every public method of a source against a recording fake: each input is
refused before any request, or every request the fake receives is an
allowlisted (method, path) under the prefix the source reports. A suffix that
moves the host (an ``@``) still reaches the fake: the transport is pinned to it.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Callable, Iterator

import pytest
from hypothesis import event, given, settings, strategies as st

from inference_obs.errors import ConfigurationError, QueryFailed
from inference_obs.query import Selector
from inference_obs.samples import Window
from inference_obs.source.endpoint import parse_base_url
from inference_obs.source.prometheus import PrometheusSource
from inference_obs.source.transport import PooledTransport
from tests.properties.strategies import label_values
from tests.source.fault_servers import allowlist_violations, api_answer
from tests.source.test_prometheus_fakes import FakeServer, fake_server

WINDOW = Window.parse("2026-01-01T00:00+00:00", 60.0)
UP = Selector("up")

# Pieces that mean something to a URL parser or a server's path handling.
_piece = st.sampled_from(
    [
        *"/.?#@\\;:%&=[] \t\r\néx",
        "..", "..;", "%2e", "%2E", "%2f", "%2F", "%3f", "%23", "%5c", "%25", "%41",
        "%00", "%0d%0a", "%ef%bc%8e", "%40", "api", "v1", "admin", "tsdb",
        "delete_series", "query", "label", "values", "9090", "evil.invalid",
    ]
)  # fmt: skip
# Path segments of characters a prefix may hold unescaped, and the tricky ones: a path
# built of them is often accepted, so the requests it makes are checked too.
_segment = st.one_of(
    st.from_regex(r"[A-Za-z0-9._~!$&'()*+,;=:@-]{1,8}", fullmatch=True),
    st.sampled_from(["..", ".", "..;", ".;x", "%2e%2e", "%252e", "%41", "api", "v1", "admin"]),
)
_path = st.lists(_segment, max_size=5).map(lambda segments: "/" + "/".join(segments))
_suffix = st.one_of(
    _path,
    _path.map(lambda path: path + "/"),
    st.lists(_piece, max_size=12).map("".join),
    st.text(max_size=12),
)
_label = st.one_of(
    st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True),
    st.just("__name__"),
    label_values,
    st.lists(_piece, max_size=6).map("".join),
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    for server in fake_server():
        server.responder = api_answer
        yield server


@settings(max_examples=100, deadline=None, derandomize=True)
@given(suffix=_suffix, label=_label)
def test_no_input_makes_a_request_off_the_allowlist(
    fake: FakeServer, suffix: str, label: str
) -> None:
    asked = len(fake.requests)
    to_fake = PooledTransport(parse_base_url(fake.url)[0], size=1)
    try:
        src = PrometheusSource(fake.url + suffix, retries=0, transport=to_fake)
    except ConfigurationError:
        event("base URL refused")
        assert len(fake.requests) == asked  # refused before any request
        return
    event("base URL accepted")
    prefix = urllib.parse.urlsplit(src.url).path
    calls: list[Callable[[], object]] = [
        lambda: src.info(),
        lambda: src.instant(UP, 0),
        lambda: src.range(UP, WINDOW, 15),
        lambda: src.raw(UP, WINDOW),
        lambda: src.series(UP, WINDOW),
        lambda: src.label_names(WINDOW),
        lambda: src.label_values(label, WINDOW),
        lambda: src.metadata(label),
    ]
    for call in calls:
        with contextlib.suppress(QueryFailed, ConfigurationError):
            call()  # a hostile label name is refused before its request
    src.close()
    made = fake.requests[asked:]
    assert len(made) >= 7
    event("label accepted" if len(made) == 8 else "label refused")
    assert allowlist_violations(made, prefix) == []
