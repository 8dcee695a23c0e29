"""TLS settings for a Prometheus-compatible API: one object, checked when it is made.

Examples
--------
>>> TLS()
TLS(ca_file=None, client_cert=None, client_key=None, verify=True)
>>> TLS(ca_file="/nonexistent/ca.pem").context()
Traceback (most recent call last):
...
inference_obs.errors.ConfigurationError: TLS ca_file /nonexistent/ca.pem: No such file or directory
"""

from __future__ import annotations

import os
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

from inference_obs.errors import ConfigurationError

__all__ = ["TLS"]


@dataclass(frozen=True, slots=True)
class TLS:
    """How an ``https`` server is verified and how the client proves itself.

    Parameters
    ----------
    ca_file
        CA bundle (PEM) to verify the server with; the system's CAs when None.
    client_cert, client_key
        Client certificate for mutual TLS, and its key when it is a separate
        file.
    verify
        False skips verifying the server (hostname and chain). Only for test
        servers: anyone on the path can then read the credentials.
    """

    ca_file: Path | str | None = None
    client_cert: Path | str | None = None
    client_key: Path | str | None = None
    verify: bool = True

    def __post_init__(self) -> None:
        if self.client_key is not None and self.client_cert is None:
            raise ConfigurationError("TLS client_key needs client_cert")

    def context(self) -> ssl.SSLContext:
        """A client :class:`ssl.SSLContext` for these settings.

        Raises
        ------
        ConfigurationError
            A file is missing, unreadable or not PEM; the message names the
            setting and the file.
        """
        for setting, path in (
            ("ca_file", self.ca_file),
            ("client_cert", self.client_cert),
            ("client_key", self.client_key),
        ):
            _check_regular(setting, path)
        try:
            context = ssl.create_default_context(
                cafile=str(self.ca_file) if self.ca_file is not None else None
            )
        except (OSError, ssl.SSLError) as exc:
            raise _unreadable("ca_file", self.ca_file, exc) from None
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert is not None:
            key = str(self.client_key) if self.client_key is not None else None
            try:
                context.load_cert_chain(str(self.client_cert), key)
            except (OSError, ssl.SSLError) as exc:
                what = "client_cert" if key is None else "client_cert/client_key"
                shown = self.client_cert if key is None else f"{self.client_cert}, {key}"
                raise _unreadable(what, shown, exc) from None
        return context


def _check_regular(setting: str, path: Path | str | None) -> None:
    """Refuse a file that is not a regular one before OpenSSL reads it.

    OpenSSL opens the file blocking: a named pipe with no writer would hold the
    program before its first request, with nothing said.
    """
    if path is None:
        return
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _unreadable(setting, path, exc) from None
    if not stat.S_ISREG(mode):
        raise ConfigurationError(
            f"TLS {setting} {path}: not a regular file (a pipe or a device is refused); "
            "give the PEM file itself"
        )


def _unreadable(setting: str, path: object, exc: OSError | ssl.SSLError) -> ConfigurationError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return ConfigurationError(f"TLS {setting} {path}: {reason}")
