"""Credentials for a Prometheus-compatible API: one ``auth=`` object, never printed.

:class:`BearerToken` takes its token from a value, an environment variable or
a file (re-read on every request, so rotated service-account tokens work; a
regular file of at most :data:`~inference_obs.source.limits.MAX_TOKEN_FILE_BYTES`,
so a named pipe or a device can never hold a request up);
:class:`BasicAuth` holds a user and a password. Their reprs name where a
secret comes from, never the secret, and so do their errors.

A token must be printable ASCII without spaces (RFC 6750's ``b64token``
alphabet is narrower still): a newline, a control character or a non-ASCII
character would either split the request's headers or surface the token in a
low-level encoding error. Such a token is refused, the message giving the
position of the first bad character but not the token.

Examples
--------
>>> BearerToken(env="PROM_TOKEN")
BearerToken(env='PROM_TOKEN')
>>> BearerToken("abc.def")
BearerToken(value=<hidden>)
>>> BearerToken("abc\\ndef")
Traceback (most recent call last):
...
inference_obs.errors.ConfigurationError: the bearer token given as a value holds a \
control character at position 3; a token is printable ASCII without spaces
"""

from __future__ import annotations

import base64
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from inference_obs.errors import ConfigurationError
from inference_obs.source.limits import MAX_TOKEN_FILE_BYTES

__all__ = ["Auth", "BasicAuth", "BearerToken", "read_token_file"]


@dataclass(frozen=True, slots=True, repr=False)
class BearerToken:
    """A bearer token from exactly one of a value, an environment variable or a file.

    Parameters
    ----------
    value
        The token itself.
    env
        Name of an environment variable holding it (read on every request).
    file
        A file holding it, surrounding whitespace ignored (read on every
        request: Kubernetes rotates service-account tokens in place). It must be
        a regular file (or a link to one) of at most ``MAX_TOKEN_FILE_BYTES``.
    """

    value: str | None = field(default=None)
    env: str | None = None
    file: Path | str | None = None

    def __post_init__(self) -> None:
        given = [name for name in ("value", "env", "file") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ConfigurationError(
                "a BearerToken takes exactly one of value, env and file "
                f"({'none' if not given else ' and '.join(given)} given)"
            )
        if self.file is not None:
            object.__setattr__(self, "file", Path(self.file).expanduser())
        if self.value is not None:
            _check_token(self.value, "given as a value")

    def __repr__(self) -> str:
        if self.value is not None:
            return "BearerToken(value=<hidden>)"
        if self.env is not None:
            return f"BearerToken(env={self.env!r})"
        return f"BearerToken(file={str(self.file)!r})"

    def header(self) -> str:
        """The ``Authorization`` header value, read afresh.

        Raises
        ------
        ConfigurationError
            The variable is unset, the file unreadable, not a regular file or too
            large, or the token is not printable ASCII (the message locates the
            fault, never shows it).
        """
        if self.value is not None:
            token, where = self.value, "given as a value"
        elif self.env is not None:
            where = f"in environment variable {self.env}"
            env_token = os.environ.get(self.env)
            if env_token is None:
                raise ConfigurationError(f"environment variable {self.env} is not set")
            token = env_token.strip()
        else:
            where = f"in file {self.file}"
            token = read_token_file(Path(str(self.file)))
        _check_token(token, where)
        return f"Bearer {token}"


@dataclass(frozen=True, slots=True, repr=False)
class BasicAuth:
    """HTTP basic auth; the password is never shown.

    Parameters
    ----------
    user
        User name (no ``:``, no control characters).
    password
        Password (any text: it travels base64-encoded as UTF-8).
    """

    user: str
    password: str = field(default="")

    def __post_init__(self) -> None:
        if not self.user or ":" in self.user or _first_bad(self.user, allow_non_ascii=True) >= 0:
            raise ConfigurationError(
                "a basic-auth user name must be non-empty, without ':' or control characters"
            )

    def __repr__(self) -> str:
        return f"BasicAuth(user={self.user!r}, password=<hidden>)"

    def header(self) -> str:
        """The ``Authorization`` header value."""
        pair = f"{self.user}:{self.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


def read_token_file(path: Path) -> str:
    """The text of a token file, surrounding whitespace removed; never waits for a writer.

    Raises
    ------
    ConfigurationError
        The file cannot be opened, is not a regular file (a named pipe would be
        read without end), holds more than ``MAX_TOKEN_FILE_BYTES`` bytes, or is
        not UTF-8 text. The message names the file, never its content.
    """
    try:
        # Non-blocking: opening a named pipe without a writer would wait for one.
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigurationError(f"cannot read token file {path}: {exc.strerror}") from None
    with os.fdopen(handle, "rb") as file:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise ConfigurationError(
                f"token file {path} is not a regular file (a pipe or a device is refused: it "
                "could be read without end)"
            )
        try:
            data = file.read(MAX_TOKEN_FILE_BYTES + 1)
        except OSError as exc:
            raise ConfigurationError(f"cannot read token file {path}: {exc.strerror}") from None
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise ConfigurationError(
            f"token file {path} holds more than {MAX_TOKEN_FILE_BYTES:,} bytes; a token is a "
            "few KiB"
        )
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigurationError(f"cannot read token file {path}: not UTF-8 text") from None


#: What ``auth=`` takes.
Auth = BearerToken | BasicAuth


def _first_bad(text: str, *, allow_non_ascii: bool = False) -> int:
    """Index of the first control, whitespace or (unless allowed) non-ASCII character, or -1."""
    for i, ch in enumerate(text):
        code = ord(ch)
        if code <= 0x20 or code == 0x7F or (code > 0x7E and not allow_non_ascii):
            return i
    return -1


def _check_token(token: str, where: str) -> None:
    if not token:
        raise ConfigurationError(f"the bearer token {where} is empty")
    bad = _first_bad(token)
    if bad >= 0:
        code = ord(token[bad])
        kind = "a non-ASCII character" if code > 0x7F else "a control character"
        kind = "a space" if code == 0x20 else kind
        raise ConfigurationError(
            f"the bearer token {where} holds {kind} at position {bad}; "
            "a token is printable ASCII without spaces"
        )
