"""TLS: a private CA bundle and a client certificate reach the server.

A fake HTTPS server is used because the test needs certificates a real
Prometheus would also need configuring for; the certificates are made here
with the ``openssl`` command line (a throwaway CA, a server certificate for
127.0.0.1, and a client certificate), all under pytest's temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from inference_obs.errors import ConfigurationError, SourceUnavailable
from inference_obs.query import Selector
from inference_obs.samples import Labels, Vector
from inference_obs.source.prometheus import PrometheusSource
from inference_obs.source.tls import TLS

BODY = json.dumps(
    {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {"__name__": "up"}, "value": [1, "1"]}],
        },
    }
).encode()


def _openssl(*args: str, cwd: Path) -> None:
    binary = shutil.which("openssl")
    assert binary, "openssl is missing (Debian's openssl package)"
    subprocess.run([binary, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        cwd=d,
    )
    for name, extra in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "")):
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/CN={name}",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            cwd=d,
        )
        (d / f"{name}.ext").write_text(extra + "\n" if extra else "basicConstraints=CA:FALSE\n")
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.pem",
            cwd=d,
        )
    return d


@pytest.fixture
def https_server(certs: Path) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")
    context.load_verify_locations(certs / "ca.pem")
    context.verify_mode = ssl.CERT_REQUIRED  # the client must present a certificate
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_ca_bundle_and_client_certificate(https_server: str, certs: Path) -> None:
    source = PrometheusSource(
        https_server,
        tls=TLS(
            ca_file=certs / "ca.pem",
            client_cert=certs / "client.pem",
            client_key=certs / "client.key",
        ),
        retries=0,
    )
    result = source.instant(Selector("up"), 1.0)
    assert isinstance(result.value, Vector)
    assert result.value.as_dict() == {Labels({"__name__": "up"}): 1.0}


def test_unknown_ca_is_refused(https_server: str, certs: Path) -> None:
    source = PrometheusSource(
        https_server,
        tls=TLS(client_cert=certs / "client.pem", client_key=certs / "client.key"),
        retries=0,
    )
    with pytest.raises(SourceUnavailable, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify"):
        source.instant(Selector("up"), 1.0)


def test_missing_client_certificate_is_refused(https_server: str, certs: Path) -> None:
    source = PrometheusSource(https_server, tls=TLS(ca_file=certs / "ca.pem"), retries=0)
    with pytest.raises(SourceUnavailable):
        source.instant(Selector("up"), 1.0)


@pytest.mark.parametrize("setting", ["ca_file", "client_cert"])
def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path, setting: str) -> None:
    pipe = tmp_path / "bundle.pem"
    os.mkfifo(pipe)
    outcome: list[BaseException | None] = []

    def build() -> None:
        try:
            tls = TLS(ca_file=pipe) if setting == "ca_file" else TLS(client_cert=pipe)
            tls.context()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=build, daemon=True)
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():  # OpenSSL is waiting on the pipe: release it, then fail
        with open(pipe, "wb"):
            pass
        worker.join(timeout=10)
        pytest.fail(f"TLS {setting} waited on a named pipe")
    assert len(outcome) == 1
    assert isinstance(outcome[0], ConfigurationError)
    assert f"TLS {setting} {pipe}: not a regular file" in str(outcome[0])
