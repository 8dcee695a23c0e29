"""Crafted base URLs and label names: refused before any request, or only allowlisted requests.

A recording fake (the scripted HTTP fake answering every API path) because a
real Prometheus would answer an admin request rather than record that it was
asked: the point is what reaches the server, not what it does with it. Hosts
other than the fake's are never contacted: where a URL names one, it is only
parsed, or the transport is pinned to the fake.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator

import pytest

from inference_obs.errors import ConfigurationError, QueryFailed
from inference_obs.query import Selector
from inference_obs.samples import Window
from inference_obs.source.endpoint import parse_base_url
from inference_obs.source.prometheus import PrometheusSource
from inference_obs.source.transport import PooledTransport
from tests.source.fault_servers import allowlist_violations, api_answer
from tests.source.test_prometheus_fakes import FakeServer, fake_server

WINDOW = Window.parse("2026-01-01T00:00+00:00", 60.0)
UP = Selector("up")

# Each written with {h} for the fake's host:port; all must be refused before any request.
REFUSED = [
    "http://{h}/api/v1/admin/tsdb/delete_series?match[]=up&x=",
    "http://{h}/prom?x=1",
    "http://{h}/#/api/v1/admin/tsdb/delete_series",
    "http://{h}/prom/../api/v1/admin/tsdb/delete_series",
    "http://{h}/prom/..",
    "http://{h}/prom/./x",
    "http://{h}/prom/%2e%2e/admin",
    "http://{h}/prom/%2E%2E/admin",
    "http://{h}/prom/.%2e/admin",
    "http://{h}/prom/..;/api/v1/admin/tsdb/delete_series",  # Tomcat reads '..;' as '..'
    "http://{h}/prom/.;x/admin",
    "http://{h}/prom/%EF%BC%8E%EF%BC%8E/admin",  # fullwidth '..' after NFKC
    "http://{h}/prom%2fapi",
    "http://{h}/prom%2Fapi",
    "http://{h}/prom%3fx=1",
    "http://{h}/prom%23x",
    "http://{h}/prom%5capi",
    "http://{h}/prom%00",
    "http://{h}/prom%0d%0aX-Injected:%201",
    "http://{h}/prom%",
    "http://{h}/prom%zz",
    "http://{h}/prom\\..\\api",
    "http://{h}/prom\r\nX-Injected: 1",
    "http://{h}/prom\nx",
    "http://{h}/prom x",
    "http://{h}/prom\t",
    "http://{h}/préfix",
    "http://{h}/api/v1",
    "http://{h}/prom/api/v1/",
    "ftp://{h}/",
    "file:///etc/passwd",
    "{h}/prom",
    "//{h}/",
    "http:/{h}/",
    "javascript:alert(1)//{h}",
    "",
    "   ",
    "http://",
    "http:///prom",
    "http://@{h}/",
    # '@' tricks where parsers disagree on the host: here and elsewhere it must be one host.
    "http://{h}\\@evil.invalid/",
    "http://{h}/?@evil.invalid/",
    "http://{h}#@evil.invalid/",
    "http://{h}/prom@evil.invalid/",
    # ports
    "http://127.0.0.1:0/",
    "http://127.0.0.1:65536/",
    "http://127.0.0.1:-1/",
    "http://127.0.0.1:+80/",
    "http://127.0.0.1:80a/",
    "http://127.0.0.1: 80/",
    "http://127.0.0.1:99999999999999999999/",
    "http://127.0.0.1:\uff18\uff10/",  # fullwidth digits: str.isdigit() says yes
    "http://127.0.0.1:/",
    # hosts
    "http://[::1/",
    "http://[::1]]:80/",
    "http://[::1]x/",
    "http://[fe80::1%25eth0]/",
    "http://::1/",
    "http://[]/",
    "http://exa_mple.com/",
    "http://-evil.com/",
]

# Each accepted: every request must be allowlisted under the prefix shown.
ACCEPTED = [
    ("http://{h}", ""),
    ("http://{h}/", ""),
    ("HTTP://{h}/prom/", "/prom"),
    ("http://{h}//prom//x//", "/prom/x"),
    ("http://{h}/%41pi", "/%41pi"),
    ("http://{h}/%252e%252e/", "/%252e%252e"),  # a literal '%2e%2e' segment, decoded once
    ("http://{h}/..a/.b./", "/..a/.b."),
    ("http://{h}/API/V1", "/API/V1"),
    # A Kubernetes API server's service proxy: /api/v1 inside the prefix is fine.
    ("http://{h}/api/v1/namespaces/monitoring/services/prometheus:9090/proxy", None),
    ("http://{h}/prom;v=1/", "/prom;v=1"),
    ("http://evil.invalid@{h}/", ""),  # 'evil.invalid' is a user name here, as everywhere
    ("http://evil.invalid:1@{h}/", ""),
    ("http://user:p@ss@{h}/prom", "/prom"),
    ("http://127.0.0.1:0{port}/", ""),
]

HOSTILE_LABELS = [
    "../../admin/tsdb/delete_series",
    "a/b",
    "%2e%2e",
    "..",
    "a?b",
    "a#b",
    "",
    "é",
    "a\r\nb",
    " job",
    "job ",
    "up{job}",
    "1abc",
    "__name__/../..",
    "job%2fvalues",
]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    for server in fake_server():
        server.responder = api_answer
        yield server


def filled(template: str, fake: FakeServer) -> str:
    port = fake.url.rsplit(":", 1)[1]
    return template.format(h=f"127.0.0.1:{port}", port=port)


def exercise(src: PrometheusSource) -> None:
    """Every public method, with well-formed and hostile label names and metric names."""
    src.info()
    src.instant(UP, 0)
    src.range(UP, WINDOW, 15)
    src.raw(UP, WINDOW)
    src.series(UP, WINDOW)
    src.label_names(WINDOW)
    src.label_values("job", WINDOW)
    src.label_values("__name__", WINDOW)
    src.metadata()
    src.metadata("../admin?x=1#y")
    for label in HOSTILE_LABELS:
        with pytest.raises((QueryFailed, ConfigurationError)):
            src.label_values(label, WINDOW)


@pytest.mark.parametrize("template", REFUSED)
def test_a_crafted_base_url_is_refused_before_any_request(fake: FakeServer, template: str) -> None:
    """The transport is pinned to the fake: a URL wrongly accepted reaches it, no other host."""
    asked = len(fake.requests)
    to_fake = PooledTransport(parse_base_url(fake.url)[0])
    with pytest.raises(ConfigurationError, match=r"base URL|no scheme"):
        PrometheusSource(filled(template, fake), transport=to_fake, retries=0).instant(UP, 0)
    assert len(fake.requests) == asked


@pytest.mark.parametrize(("template", "prefix"), ACCEPTED)
def test_an_accepted_base_url_makes_only_allowlisted_requests(
    fake: FakeServer, template: str, prefix: str | None
) -> None:
    url = filled(template, fake)
    src = PrometheusSource(url, retries=0)
    shown = urllib.parse.urlsplit(src.url).path
    assert shown == (prefix if prefix is not None else urllib.parse.urlsplit(url).path)
    asked = len(fake.requests)
    exercise(src)
    made = fake.requests[asked:]
    assert len(made) == 10  # one per call above; none for a hostile label
    assert allowlist_violations(made, shown) == []
    # The metric name travels as a form value, never as part of the path.
    [metadata] = [r for r in made if "metric=" in r.path]
    query = urllib.parse.urlsplit(metadata.path).query
    assert urllib.parse.parse_qs(query) == {"metric": ["../admin?x=1#y"]}


@pytest.mark.parametrize(
    ("url", "host", "port", "user"),
    [
        ("http://trusted.example@evil.invalid:1/", "evil.invalid", 1, "trusted.example"),
        ("http://[::1]:9090/prom", "::1", 9090, None),
        ("https://[2001:db8::1]/", "2001:db8::1", 443, None),
        ("http://prom.example.:9090/", "prom.example.", 9090, None),
    ],
)
def test_hosts_are_read_as_every_parser_reads_them(
    url: str, host: str, port: int, user: str | None
) -> None:
    """Parsed only (these hosts are not the fake): the host is the one after the last '@'."""
    endpoint, auth = parse_base_url(url)
    assert (endpoint.host, endpoint.port) == (host, port)
    assert (auth.user if auth is not None else None) == user
    split = urllib.parse.urlsplit(url)
    assert (split.hostname, split.port or port) == (host.lower(), port)
