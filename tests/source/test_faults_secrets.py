"""Credentials: each malformed one is refused or used as meant, and no secret is ever shown.

Fakes (the scripted HTTP fake and :mod:`tests.source.fault_servers`) because a
real Prometheus neither checks credentials nor echoes them back in an error
page, an error envelope, a warning or a broken status line, as proxies in
front of one may. "Shown" means any exception message or repr along the
chain, any repr of a source or credential, any log record at DEBUG, the
fake's own log, and the CLI's stdout and stderr.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inference_obs.cli import EXIT_USAGE, main
from inference_obs.errors import AccessDenied, ConfigurationError, QueryFailed, SourceUnavailable
from inference_obs.query import Selector
from inference_obs.source.auth import BasicAuth, BearerToken
from inference_obs.source.prometheus import PrometheusSource
from tests.source.fault_servers import (
    REPORT_WINDOW,
    RawServer,
    run_cli,
    small_deployments,
)
from tests.source.test_prometheus_fakes import Answer, FakeServer, Recorded, envelope, fake_server

UP = Selector("up")
VECTOR = envelope({"resultType": "vector", "result": [{"metric": {}, "value": [1, "2"]}]})
# Every secret here holds this word, so any piece of one that leaks is found.
MARK = "SECRET"
TOKEN = f"tok-{MARK}-7f3a"


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    yield from fake_server()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def chain(exc: BaseException) -> list[str]:
    """str and repr of ``exc`` and of every exception it was raised from or during."""
    texts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None:
        texts += [str(seen), repr(seen)]
        seen = seen.__cause__ or seen.__context__
    return texts


def assert_hidden(*texts: str, secrets: tuple[str, ...] = (MARK,)) -> None:
    joined = "\n".join(texts)
    for secret in secrets:
        assert secret not in joined


def shown(logs: pytest.LogCaptureFixture, *extra: str) -> list[str]:
    return [record.getMessage() for record in logs.records] + list(extra)


# --- tokens ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "kind"),
    [
        (f"tok\n{MARK}: x", "a control character at position 3"),
        (f"tok-{MARK}\r\nX-Injected: 1", "a control character at position 10"),
        (f"tok-{MARK}-€", "a non-ASCII character at position 11"),  # not Latin-1
        (f"tök-{MARK}", "a non-ASCII character at position 1"),  # Latin-1, not ASCII
        (f"tok {MARK}", "a space at position 3"),
    ],
    ids=["lf", "crlf", "euro", "latin-1", "space"],
)
@pytest.mark.parametrize("where", ["value", "env", "file"])
def test_a_malformed_token_is_refused_before_any_request(
    fake: FakeServer,
    logs: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    token: str,
    kind: str,
    where: str,
) -> None:
    texts: list[str] = []
    monkeypatch.setenv("PROM_TOKEN", token)
    (tmp_path / "token").write_text(token, encoding="utf-8")

    def ask() -> None:
        """Refused when made (a value) or at the first request (read afresh each time)."""
        auth = {
            "value": lambda: BearerToken(token),
            "env": lambda: BearerToken(env="PROM_TOKEN"),
            "file": lambda: BearerToken(file=tmp_path / "token"),
        }[where]()
        src = PrometheusSource(fake.url, auth=auth, retries=0)
        texts.extend([repr(auth), repr(src), str(src)])
        src.instant(UP, 0)

    with pytest.raises(ConfigurationError, match=f"holds {kind}") as info:
        ask()
    assert fake.requests == []
    assert_hidden(*texts, *chain(info.value), *shown(logs, *fake.log_lines))


@pytest.mark.parametrize("where", ["env", "file"])
def test_a_token_ending_in_a_newline_is_used_without_it(
    fake: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    """``echo $TOKEN > file`` and ``kubectl create token`` end with a newline: not part of it."""
    fake.script = [Answer(body=VECTOR)]
    if where == "env":
        monkeypatch.setenv("PROM_TOKEN", TOKEN + "\n")
        auth = BearerToken(env="PROM_TOKEN")
    else:
        (tmp_path / "token").write_text(TOKEN + "\r\n")
        auth = BearerToken(file=tmp_path / "token")
    PrometheusSource(fake.url, auth=auth).instant(UP, 0)
    assert fake.requests[0].headers["authorization"] == f"Bearer {TOKEN}"


# --- secrets in the URL ------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"http://bob:pa#{MARK}@{{host}}/",
        f"http://bob:pa/{MARK}@{{host}}/",
        f"http://bob:pa?{MARK}@{{host}}/",
        f"http://bob:pa\\{MARK}@{{host}}/",
        f"http://{{host}}/?access_token={MARK}",
        f"http://{{host}}/api?x=1&access_token={MARK}",
        f"http://{{host}}/#access_token={MARK}",
        f"http://bob:{MARK}@{{host}}/\r\n",
        f"http://bob\r\nX: {MARK}@{{host}}/",
    ],
    ids=["hash", "slash", "question", "backslash", "query", "query-2", "fragment", "crlf", "user"],
)
def test_a_url_carrying_a_secret_it_cannot_use_is_refused_unshown(
    fake: FakeServer, logs: pytest.LogCaptureFixture, url: str
) -> None:
    host = fake.url.removeprefix("http://")
    with pytest.raises(ConfigurationError) as info:
        PrometheusSource(url.format(host=host))
    assert fake.requests == []
    assert_hidden(*chain(info.value), *shown(logs))


@pytest.mark.parametrize(
    ("url", "password"),
    [
        (
            f"http://bob:p@{MARK}@{{host}}/",
            f"p@{MARK}",
        ),  # '@' needs no escape: the last one ends it
        (f"http://bob:p%23%2F%3F%40%5C{MARK}@{{host}}/", f"p#/?@\\{MARK}"),
        (f"http://bob:{MARK}%E2%82%AC@{{host}}/", f"{MARK}€"),
    ],
    ids=["at", "escaped", "utf-8"],
)
def test_a_url_password_is_used_as_meant_and_never_shown(
    fake: FakeServer, logs: pytest.LogCaptureFixture, url: str, password: str
) -> None:
    fake.script = [Answer(500, b"down")]
    src = PrometheusSource(url.format(host=fake.url.removeprefix("http://")), retries=0)
    with pytest.raises(SourceUnavailable) as info:
        src.instant(UP, 0)
    pair = base64.b64encode(f"bob:{password}".encode()).decode()
    assert fake.requests[0].headers["authorization"] == f"Basic {pair}"
    texts = [repr(src), str(src), *chain(info.value), *shown(logs, *fake.log_lines)]
    assert_hidden(*texts, secrets=(MARK, pair))


# --- headers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"X-Scope-OrgID": f"team\r\nAuthorization: {MARK}"}, "X-Scope-OrgID: its value holds"),
        ({"X-Scope-OrgID": f"team\n{MARK}"}, "X-Scope-OrgID: its value holds"),
        ({"X-Api-Key": f"{MARK}-€"}, "X-Api-Key: its value holds"),
        ({f"Bearer {MARK}": "x"}, "header number 1: its name is not an HTTP token"),
        ({"X-A": "1", f"X-{MARK}\r\nX-B": "x"}, "header number 2: its name is not an HTTP token"),
    ],
    ids=["crlf", "lf", "euro", "token-as-name", "crlf-in-name"],
)
def test_a_header_that_would_split_the_request_is_refused_unshown(
    fake: FakeServer, logs: pytest.LogCaptureFixture, headers: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        PrometheusSource(fake.url, headers=headers)
    assert fake.requests == []
    assert_hidden(*chain(info.value), *shown(logs))


# --- a server that echoes the credentials back ----------------------------------------


def echoing(status: int, envelope_error: bool = False, pad: int = 0) -> Any:
    """Answers ``status`` with the request's Authorization header in the page or envelope.

    ``pad`` characters come before it in a page (12 more for ``<html><body>``).
    """

    def respond(request: Recorded) -> Answer:
        sent = request.headers.get("authorization", "")
        text = f"credentials {sent} (token {sent.partition(' ')[2]}) refused"
        if envelope_error:
            body = {"status": "error", "errorType": "bad_data", "error": text}
            return Answer(status, json.dumps(body).encode())
        return Answer(status, f"<html><body>{'x' * pad}{text}</body></html>".encode())

    return respond


AUTHS: dict[str, tuple[BearerToken | BasicAuth, tuple[str, ...]]] = {
    "bearer": (BearerToken(TOKEN), (MARK,)),
    "basic": (
        BasicAuth("bob", f"pw-{MARK}"),
        (MARK, base64.b64encode(f"bob:pw-{MARK}".encode()).decode()),
    ),
}


@pytest.mark.parametrize("auth", sorted(AUTHS))
@pytest.mark.parametrize(
    ("status", "in_envelope", "error"),
    [
        (401, False, AccessDenied),  # a refused credential: input, not an outage
        (403, False, AccessDenied),
        (403, True, QueryFailed),
        (503, False, SourceUnavailable),  # retried, then given up: logged at DEBUG meanwhile
    ],
    ids=["401-page", "403-page", "403-envelope", "503-page"],
)
def test_credentials_a_server_echoes_are_hidden(
    fake: FakeServer,
    logs: pytest.LogCaptureFixture,
    auth: str,
    status: int,
    in_envelope: bool,
    error: type[Exception],
) -> None:
    credential, secrets = AUTHS[auth]
    fake.responder = echoing(status, in_envelope)
    src = PrometheusSource(fake.url, auth=credential, retries=1, backoff=0.01)
    with pytest.raises(error, match=r"credentials <hidden> \(token <hidden>\)") as info:
        src.instant(UP, 0)
    assert len(fake.requests) == (2 if status == 503 else 1)  # 401/403: not retried
    texts = [repr(src), repr(credential), *chain(info.value), *shown(logs, *fake.log_lines)]
    assert_hidden(*texts, secrets=secrets)


def test_a_token_cut_by_the_end_of_the_snippet_is_hidden_too(
    fake: FakeServer, logs: pytest.LogCaptureFixture
) -> None:
    """Pages are shown up to 200 characters; here the token starts at the 196th."""
    prefix = len("<html><body>") + len("credentials Bearer ")
    fake.responder = echoing(401, pad=195 - prefix)
    with pytest.raises(AccessDenied, match="xcredentials <hidden>") as info:
        PrometheusSource(fake.url, auth=BearerToken(TOKEN), retries=0).instant(UP, 0)
    assert_hidden(*chain(info.value), *shown(logs), secrets=(TOKEN[:4],))


def test_credentials_echoed_in_a_warning_are_hidden(fake: FakeServer) -> None:
    fake.responder = lambda r: Answer(
        body=envelope(
            {"resultType": "vector", "result": []},
            warnings=[f"tenant of {r.headers['authorization']} is over quota"],
        )
    )
    result = PrometheusSource(fake.url, auth=BearerToken(TOKEN)).instant(UP, 0)
    assert [note.message for note in result.annotations] == ["tenant of <hidden> is over quota"]


def test_credentials_echoed_in_a_broken_status_line_are_hidden(
    logs: pytest.LogCaptureFixture,
) -> None:
    def serve(server: RawServer, conn: socket.socket) -> None:
        request = server.read_request(conn)
        if request is not None:
            conn.sendall(f"HTTP/1.1 {request.headers['authorization']}\r\n\r\n".encode())

    with RawServer(serve) as server:
        src = PrometheusSource(server.url, auth=BearerToken(TOKEN), retries=1, backoff=0.01)
        with pytest.raises(SourceUnavailable, match="BadStatusLine") as info:
            src.instant(UP, 0)
        assert_hidden(*chain(info.value), *shown(logs, *server.log))


# --- the CLI ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--token-file", "{token_file}"], "holds a control character at position 3"),
        (["--token-env", "PROM_TOKEN"], "holds a non-ASCII character at position 11"),
        (["--header", f"X-Scope-OrgID: a\r\nAuthorization: {MARK}"], "its value holds"),
        (["--header", f"Bearer {MARK}:x"], "its name is not an HTTP token"),
        (["--prometheus", f"http://{{host}}/?access_token={MARK}"], "has a query string"),
        (["--prometheus", f"http://bob:p#{MARK}@{{host}}/"], "percent-encode"),
    ],
    ids=["token-file", "token-env", "header-value", "header-name", "url-query", "url-password"],
)
def test_cli_refuses_a_bad_credential_in_one_line_unshown(
    fake: FakeServer,
    logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    options: list[str],
    message: str,
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"tok\n{MARK}\n")
    monkeypatch.setenv("PROM_TOKEN", f"tok-{MARK}-€")
    host = fake.url.removeprefix("http://")
    options = [o.format(token_file=token_file, host=host) for o in options]
    url = [] if "--prometheus" in options else ["--prometheus", fake.url]
    deployments = ["--deployments", str(small_deployments(tmp_path))]
    out = ["--out", str(tmp_path / "out")]
    assert main(["report", *url, *options, *deployments, *out, *REPORT_WINDOW]) == EXIT_USAGE
    stdout, stderr = capsys.readouterr()
    [line] = stderr.splitlines()
    assert line.startswith("inference-obs: ")
    assert message in line
    assert stdout == ""
    assert fake.requests == []
    assert_hidden(stdout, stderr, *shown(logs))


def test_cli_hides_a_token_the_server_echoes(fake: FakeServer, tmp_path: Path) -> None:
    """End to end in a child process: the token comes from a file, the 401 page echoes it."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    fake.responder = echoing(401)
    run = run_cli(
        [
            "report",
            "--prometheus",
            fake.url,
            "--token-file",
            str(tmp_path / "token"),
            "--deployments",
            str(small_deployments(tmp_path)),
            "--out",
            str(tmp_path / "out"),
            *REPORT_WINDOW,
        ],
        tmp_path,
    )
    assert run.code == EXIT_USAGE, run.stderr  # a refused token: retrying will not help
    assert fake.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    [line] = run.stderr.splitlines()
    assert "HTTP 401, the credentials were refused" in line
    assert "credentials <hidden> (token <hidden>) refused" in line
    assert_hidden(run.stdout, run.stderr, *fake.log_lines)
