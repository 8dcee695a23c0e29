"""The base URL of a Prometheus-compatible API, parsed once and refused when unsafe.

A base URL is a scheme, a host, a port and an optional path prefix
(``https://prom.example:9090/prometheus``). It is parsed once, when a source
is made, and every request path is the prefix followed by one allowlisted API
path. Anything that could change what a request reaches is refused before any
request is sent:

- a scheme other than ``http`` or ``https`` (``ftp://`` would time out, a
  missing scheme would be read as a path);
- a query string or a fragment: ``http://h/api/v1/admin/tsdb/delete_series?x=``
  would turn ``POST {base}/api/v1/query`` into a POST to the admin API;
- ``.`` or ``..`` segments (plain, percent-encoded, or with a ``;``
  parameter: Tomcat and Jetty read ``..;`` as ``..``), encoded ``/ ? # \\``,
  backslashes, whitespace, control and non-ASCII characters in the path
  (raw or percent-encoded);
- a path prefix ending in ``/api/v1`` (the client adds it).

``user:password@`` becomes :class:`~inference_obs.source.auth.BasicAuth` and
leaves the URL. The userinfo ends at the last ``@`` (a password may hold an
unencoded ``@``); a ``/``, ``?``, ``#`` or ``\\`` before that ``@`` is refused:
other parsers end the host there, so ``http://prom/?@evil/`` would reach one
host here and pass another's checks elsewhere (a password holding them writes
them percent-encoded). Messages about a refused URL show it through
:func:`redact_url`, which never prints a password.

Examples
--------
>>> endpoint, auth = parse_base_url("https://ann:s3cret@prom.example:9443/prom/")
>>> endpoint.url, endpoint.path("/api/v1/query")
('https://prom.example:9443/prom', '/prom/api/v1/query')
>>> auth
BasicAuth(user='ann', password=<hidden>)
>>> parse_base_url("http://h/api/v1/admin/tsdb/delete_series?match[]=up&x=")
Traceback (most recent call last):
...
inference_obs.errors.ConfigurationError: base URL http://h/api/v1/admin/tsdb/delete_series?…: \
has a query string; give the server's address and path prefix only
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from inference_obs.errors import ConfigurationError
from inference_obs.source.auth import BasicAuth

__all__ = ["Endpoint", "parse_base_url", "redact_url"]

_SCHEMES = {"http": 80, "https": 443}
# RFC 3986 reg-name as hosts are written in practice, or an IPv6 literal in brackets.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]+\]")
# Path characters that need no escaping (RFC 3986 pchar without '%'), and '/'.
_PATH = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/]*")
# Escapes whose decoded character could change the path's meaning on some server or proxy:
# '.', '/', '#', '?', '\\', controls, and any non-ASCII byte (refused raw too), since servers
# that normalise Unicode (NFKC) read fullwidth U+FF0E U+FF0F (%EF%BC%8E...) as '.' and '/'.
_UNSAFE_ESCAPE = re.compile(
    r"%(?:2[eEfF3]|3[fF]|5[cC]|[01][0-9A-Fa-f]|7[fF]|[89a-fA-F][0-9A-Fa-f])"
)
# A local ``refuse``: the fault in words -> the error to raise, the URL redacted in it.
_Refuse = Callable[[str], ConfigurationError]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where requests go: scheme, host, port and path prefix; holds no credential.

    Attributes
    ----------
    scheme
        ``http`` or ``https``.
    host
        Host name or address (an IPv6 address without brackets).
    port
        TCP port (the scheme's default when the URL names none).
    prefix
        Path prefix without a trailing slash (``""`` or ``/prometheus``).
    """

    scheme: Literal["http", "https"]
    host: str
    port: int
    prefix: str = ""

    @property
    def url(self) -> str:
        """The base URL, without credentials: safe to print."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = _SCHEMES[self.scheme] == self.port
        return f"{self.scheme}://{host}{'' if default else f':{self.port}'}{self.prefix}"

    def path(self, api_path: str) -> str:
        """The request path of ``api_path`` (which starts with ``/``) under the prefix."""
        return self.prefix + api_path


def parse_base_url(text: str) -> tuple[Endpoint, BasicAuth | None]:
    """The :class:`Endpoint` of ``text`` and the basic auth its userinfo held, if any.

    Raises
    ------
    ConfigurationError
        When the URL is not a plain ``http``/``https`` base URL (see the
        module's docstring); the message names the fault and shows the URL
        with its secrets redacted.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(
            "base URL is empty: give the server's address, e.g. http://prometheus:9090"
        )
    shown = redact_url(text)

    def refuse(fault: str) -> ConfigurationError:
        return ConfigurationError(f"base URL {shown}: {fault}")

    scheme, sep, rest = text.partition("://")
    if not sep:
        raise refuse(
            "no scheme (only http and https are supported); write it in full, e.g. http://prometheus:9090"
        )
    scheme = scheme.lower()
    if scheme not in _SCHEMES:  # not shown: what follows may not even be a URL
        raise ConfigurationError(f"base URL: only http and https are supported, not {scheme!r}")
    userinfo, at, rest = rest.rpartition("@")
    if at and any(ch in userinfo for ch in "/?#\\"):
        raise refuse(
            "has an '@' after a '/', '?', '#' or '\\', so parsers disagree on its host; "
            "percent-encode these characters in a user name or password (%2F %3F %23 %5C)"
        )
    auth = _basic_auth(userinfo, refuse) if at else None
    if any(ch in rest for ch in "?#"):
        raise refuse(
            f"has a {'query string' if '?' in rest else 'fragment'}; "
            "give the server's address and path prefix only"
        )
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F or ord(ch) > 0x7E for ch in rest):
        raise refuse("holds whitespace, a control character or a non-ASCII character")
    authority, slash, path = rest.partition("/")
    host, port = _host_port(authority, scheme, refuse)
    prefix = _prefix(slash + path, refuse)
    return Endpoint(scheme, host, port, prefix), auth  # type: ignore[arg-type]


def _basic_auth(userinfo: str, refuse: _Refuse) -> BasicAuth:
    user, _, password = userinfo.partition(":")
    if not user:
        raise refuse("has an '@' but no user name before it")
    return BasicAuth(urllib.parse.unquote(user), urllib.parse.unquote(password))


def _host_port(authority: str, scheme: str, refuse: _Refuse) -> tuple[str, int]:
    if not authority or authority.startswith(":"):
        raise refuse("has no host")
    if _IPV6.match(authority):
        end = authority.index("]") + 1
        host, port_text = authority[1 : end - 1], authority[end:]
    else:
        host, colon, port_text = authority.partition(":")
        port_text = colon + port_text
        if not _HOST.fullmatch(host):
            raise refuse(f"host {host!r} is not a host name or address")
    if not host:
        raise refuse("has no host")
    if not port_text:
        return host, _SCHEMES[scheme]
    digits = port_text[1:]
    if not port_text.startswith(":") or not digits.isdigit() or not 0 < int(digits) < 65536:
        raise refuse(f"port {port_text[1:]!r} is not a number from 1 to 65535")
    return host, int(digits)


def _prefix(path: str, refuse: _Refuse) -> str:
    if not _PATH.fullmatch(path.replace("%", "")) or _UNSAFE_ESCAPE.search(path):
        raise refuse(
            "path holds a character or escape that could change where requests go "
            "(backslash, encoded '/', '?', '#', '.', a control or a non-ASCII character)"
        )
    if re.search(r"%(?![0-9A-Fa-f]{2})", path):
        raise refuse("path holds a '%' that starts no escape")
    segments = [s for s in path.split("/") if s]
    # A segment's parameters (after ';') are dropped by servlet containers: '..;x' is '..'.
    if any(s.partition(";")[0] in (".", "..") for s in segments):
        raise refuse("path holds a '.' or '..' segment")
    prefix = "/" + "/".join(segments) if segments else ""
    if prefix.endswith("/api/v1"):
        raise refuse("ends in /api/v1; give the base URL without it (the client adds it)")
    return prefix


def redact_url(text: str) -> str:
    """``text`` with its userinfo and query values hidden, for messages.

    >>> redact_url("https://bob:pa#ss@prom:9090/p?access_token=abc&x=1#top")
    'https://<credentials>@prom:9090/p?…'
    """
    if not isinstance(text, str):
        return "<not a string>"
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    if "@" in rest:
        rest = "<credentials>@" + rest.rpartition("@")[2]
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    shown = "".join(ch if 0x20 < ord(ch) < 0x7F else "\N{REPLACEMENT CHARACTER}" for ch in rest)
    if cut >= 0:
        shown = shown[:cut] + "?…"
    return f"{scheme}://{shown}" if sep else shown
