"""A URL that answers, but not with the Prometheus HTTP API: exit 2 (fix it), never 4 (retry).

A scheduled job retries exit 4 (the source failed); a wrong URL would fail the
same way on every retry. Fakes (the scripted HTTP fake on 127.0.0.1) because
a real Prometheus cannot be made to answer an API path with an HTML page or a
404 without the API's JSON envelope: what another server at that URL (a
dashboard, an SSO proxy, a wrong path prefix) does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_USAGE
from inference_obs.errors import NotPrometheusAPI
from inference_obs.query import Selector
from inference_obs.source.prometheus import PrometheusSource
from tests.source.fault_servers import REPORT_WINDOW, api_answer, run_cli, small_deployments
from tests.source.test_prometheus_fakes import Answer, FakeServer, Recorded, fake_server

HTML = "text/html; charset=utf-8"
PLAIN = "text/plain; charset=utf-8"
PAGE = b"<!doctype html><html><title>Grafana</title></html>"
NOT_FOUND = b"404 page not found\n"  # Go net/http's NotFound, as a wrong path prefix gets it
SECRET = "s3cret-password"


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    yield from fake_server()


def everywhere(answer: Answer) -> Callable[[Recorded], Answer]:
    return lambda request: answer


def only_on_queries(answer: Answer) -> Callable[[Recorded], Answer]:
    """A server whose buildinfo is an API answer but whose query paths are not."""

    def respond(request: Recorded) -> Answer:
        return answer if "/api/v1/query" in request.path else api_answer(request)

    return respond


@pytest.mark.parametrize(
    ("responder", "status", "kind"),
    [
        (everywhere(Answer(200, PAGE, {"Content-Type": HTML})), 200, HTML),
        (everywhere(Answer(404, NOT_FOUND, {"Content-Type": PLAIN})), 404, PLAIN),
        (only_on_queries(Answer(404, NOT_FOUND, {"Content-Type": PLAIN})), 404, PLAIN),
        (only_on_queries(Answer(200, PAGE, {"Content-Type": HTML})), 200, HTML),
    ],
    ids=["html-200", "404", "404-on-query", "html-200-on-query"],
)
def test_cli_a_url_that_is_not_a_prometheus_api_exits_2(
    fake: FakeServer,
    tmp_path: Path,
    responder: Callable[[Recorded], Answer],
    status: int,
    kind: str,
) -> None:
    fake.responder = responder
    url = fake.url.replace("http://", f"http://reader:{SECRET}@")
    args = ["--deployments", str(small_deployments(tmp_path)), "--out", str(tmp_path / "out")]
    run = run_cli(["report", "--prometheus", url, *args, *REPORT_WINDOW], tmp_path)
    assert run.code == EXIT_USAGE, run.stderr
    [line] = run.stderr.splitlines()
    assert line.startswith(f"inference-obs: {fake.url} does not serve the Prometheus HTTP API")
    assert f"answered HTTP {status} with {kind!r}" in line
    assert SECRET not in line
    assert "reader" not in line
    assert not (tmp_path / "out").exists()
    # Not retried: no request was sent twice (a retry repeats the same path and body).
    sent = [(r.path, r.body) for r in fake.requests]
    assert len(set(sent)) == len(sent)


@pytest.mark.parametrize(
    "answer",
    [
        Answer(200, PAGE),  # HTML without a content type
        Answer(200, b'{"hello": "world"}', {"Content-Type": "text/plain"}),
        Answer(404, b'{"message": "Not Found"}', {"Content-Type": "application/json"}),
    ],
    ids=["html-untyped", "200-text-plain", "404-json-no-envelope"],
)
def test_an_answer_that_is_no_api_answer_is_not_retried(fake: FakeServer, answer: Answer) -> None:
    fake.script = [answer]
    with pytest.raises(NotPrometheusAPI, match="does not serve the Prometheus HTTP API"):
        PrometheusSource(fake.url, retries=3, backoff=0.01).instant(Selector("up"), 0)
    assert len(fake.requests) == 1
