"""Errors raised by inference_obs, and the non-fatal :class:`Annotation`.

Every error derives from :class:`InferenceObsError` and also from the builtin
that fits it, so callers can catch either::

    InferenceObsError
    ├── ConfigurationError(ValueError) a bad argument or setting (a URL, a credential, a limit)
    ├── QueryError(ValueError)        bad builder input, raised when the expression is built
    │   └── ParseError                PromQL text that does not parse (names line and column)
    ├── ScenarioError(ValueError)     a simulator scenario file is missing or invalid
    ├── TopologyError(ValueError)     unreadable ``nvidia-smi topo -m`` text (names the line)
    ├── DocumentError(ValueError)     JSON or YAML nested too deep, a key twice, a non-finite number
    ├── LintInputError(ValueError)    a dashboard, rule or PromQL file that cannot be read
    │   └── NotLintable               JSON or YAML that is neither a dashboard nor a rule file
    ├── SourceError                   carries the expression and PromQL (never credentials)
    │   ├── SourceUnavailable         network, timeout, 429/5xx after bounded retries
    │   │   ├── AnswerTooLarge        an answer past the size limit (names the limit)
    │   │   └── TimeBudgetExceeded(TimeoutError) the caller's time budget ran out in a request
    │   ├── MalformedAnswer(ValueError) an answer that parses but cannot be data (says why)
    │   ├── NotPrometheusAPI          the URL answers, but not with the Prometheus HTTP API
    │   ├── AccessDenied              HTTP 401/403 without an API answer: credentials refused
    │   ├── QueryFailed               server said bad_data / execution; keeps error_type, error
    │   ├── NotSupportedOffline       the local engine has no rule for this node (names it)
    │   └── DatasetError              missing or corrupt dataset, manifest mismatch
    └── NoDataError(LookupError)      query fine, but no series where an analysis needs one

Conditions that do not stop a computation (forced bucket monotonicity, too few
samples to extrapolate, a server warning) are data, not exceptions: they travel
as :class:`Annotation` values on results.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AccessDenied",
    "Annotation",
    "AnswerTooLarge",
    "ConfigurationError",
    "DatasetError",
    "DocumentError",
    "InferenceObsError",
    "LintInputError",
    "MalformedAnswer",
    "NoDataError",
    "NotLintable",
    "NotPrometheusAPI",
    "NotSupportedOffline",
    "ParseError",
    "QueryError",
    "QueryFailed",
    "ScenarioError",
    "SourceError",
    "SourceUnavailable",
    "TimeBudgetExceeded",
    "TopologyError",
]


class InferenceObsError(Exception):
    """Base class of every error raised by inference_obs."""


class ConfigurationError(InferenceObsError, ValueError):
    """An argument or setting is invalid; the message names it and how to fix it.

    Never echoes a secret: a bad token or URL password is described, not shown.
    """


class QueryError(InferenceObsError, ValueError):
    """An expression could not be built: the message names the offending input."""


class ParseError(QueryError):
    """PromQL text could not be read into an expression.

    Attributes
    ----------
    text
        The whole text that was parsed.
    offset
        Where the problem is, as an index into ``text``.
    refused
        The expression class whose checks refused the text (for example
        ``HistogramQuantile`` when an aggregation drops ``le``), or None for a
        syntax error.
    operands
        The already-built operands of the refused expression, so a caller can
        still say what was meant (empty for a syntax error).
    """

    def __init__(
        self,
        message: str,
        *,
        text: str,
        offset: int,
        refused: type | None = None,
        operands: tuple[object, ...] = (),
    ) -> None:
        self.text = text
        self.offset = offset
        self.refused = refused
        self.operands = operands
        super().__init__(f"line {self.line}, column {self.column}: {message}")

    @property
    def line(self) -> int:
        """1-based line of :attr:`offset`."""
        return self.text.count("\n", 0, self.offset) + 1

    @property
    def column(self) -> int:
        """1-based column of :attr:`offset` (in characters)."""
        return self.offset - (self.text.rfind("\n", 0, self.offset) + 1) + 1


class ScenarioError(InferenceObsError, ValueError):
    """A scenario file is missing or invalid; the message names the file and the field."""


class TopologyError(InferenceObsError, ValueError):
    """``nvidia-smi topo -m`` text could not be read; the message names the line and the fault."""


class DocumentError(InferenceObsError, ValueError):
    """A JSON or YAML file parses but breaks a rule every file read must keep.

    Nested deeper than :data:`~inference_obs.documents.MAX_DEPTH`, a key twice
    in one object, or a number that is not finite (see
    :mod:`inference_obs.documents`). The message names the file and, where the
    parser knows it, the line. A reader that promises an error of its own
    (:class:`DatasetError`, :class:`LintInputError`) raises that one with the
    same message.
    """


class LintInputError(InferenceObsError, ValueError):
    """A file given to ``lint`` cannot be read; the message names the file, line and column.

    A dashboard that is not JSON, a rule file that is not YAML, a file that is
    neither. An expression that does not parse is not this error: it is a
    finding of the file that holds it.
    """


class NotLintable(LintInputError):
    """A readable JSON or YAML file that is not a Grafana dashboard or a rule file.

    Named on the command line it stops the run like any unreadable input;
    found in a folder it is skipped (and listed).
    """


class SourceError(InferenceObsError):
    """A source could not answer.

    Parameters
    ----------
    message
        What went wrong, in plain words.
    promql
        The PromQL text that was sent or evaluated, when there is one.
    """

    def __init__(self, message: str, *, promql: str | None = None) -> None:
        super().__init__(message)
        self.promql = promql

    def __str__(self) -> str:
        base = super().__str__()
        return f"{base} (query: {self.promql})" if self.promql else base


class SourceUnavailable(SourceError):
    """The source could not be reached, or kept failing after bounded retries."""


class AnswerTooLarge(SourceUnavailable):
    """An answer grew past the client's size limit (on the wire or decompressed)."""


class TimeBudgetExceeded(SourceUnavailable, TimeoutError):
    """The caller's time budget (a deadline given to the source) ran out during a request."""


class MalformedAnswer(SourceError, ValueError):
    """A server's answer parses but cannot be data; the message says what is wrong.

    A NaN timestamp, a point that is not a ``[time, value]`` pair, a vector
    where a matrix was asked for. A source turns it into
    :class:`SourceUnavailable` (never a number from it); the parsers of
    answer bodies (:mod:`inference_obs.source.frames`) raise it as it is.
    """


class NotPrometheusAPI(SourceError):
    """The URL answers, but not with the Prometheus HTTP API: a wrong URL, not an outage.

    An HTML page with status 200 (a dashboard, a login form), a 404 without
    the API's JSON envelope on an API path. Retrying will not help; the
    message names the URL (never its credentials) and what came back: the
    status and the content type.
    """


class AccessDenied(SourceError):
    """The server (or the proxy in front of it) refused the request's credentials.

    HTTP 401 or 403 without the API's JSON envelope: a missing, wrong or
    expired token, or a user without read access. Retrying will not help; the
    message names the URL and the status, never the credential.
    """


class QueryFailed(SourceError):
    """The server rejected or failed the query.

    ``error_type`` is the API's ``errorType`` (``bad_data``, ``execution``, ...).
    """

    def __init__(self, message: str, *, error_type: str, promql: str | None = None) -> None:
        super().__init__(message, promql=promql)
        self.error_type = error_type


class NotSupportedOffline(SourceError):
    """The local engine has no rule for an expression node; the message names it."""


class DatasetError(SourceError):
    """An observation dataset is missing, corrupt, or disagrees with its manifest."""


class NoDataError(InferenceObsError, LookupError):
    """The query was fine, but no series matched where an analysis needs one."""


@dataclass(frozen=True, slots=True)
class Annotation:
    """A non-fatal condition attached to a result.

    Attributes
    ----------
    kind
        A stable, machine-readable code such as ``"monotonicity_forced"``.
    message
        The condition in plain words, naming what it concerns.
    """

    kind: str
    message: str
