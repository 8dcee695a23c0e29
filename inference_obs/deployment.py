"""A deployment: which series belong to it, and what it is declared to run.

The same schema describes deployments in a dataset's manifest and in the
YAML file a live report reads, so a published dataset can drive a report of
the same deployments against a live Prometheus.

A selector maps label names to values (``docs/deployments.md`` has the full
syntax and an example file). A value is one of:

- plain text: the label equals it exactly (``namespace: llm``);
- ``{regex: "pro-model-.*"}``: the label matches the regex, anchored at both
  ends as PromQL anchors it (``=~``); ``{not_regex: ...}`` (``!~``),
  ``{not: ...}`` (``!=``) and ``{equals: ...}`` (``=``, for a literal value
  that starts with ``~`` or ``!`` or looks like a regex) are the other forms;
- the compact shorthand that manifests use: ``"~x"`` regex, ``"!x"``
  not-equal, ``"!~x"`` not-regex, and ``"=x"`` the literal ``x`` (the escape
  for a literal value starting with ``~``, ``!`` or ``=``).

A plain value that looks like a regex (it holds ``*``, ``+``, ``?``, ``|``,
brackets, braces, ``^``, ``$`` or a backslash) is refused, naming the label:
``pod: "pro-model-.*"`` would otherwise select only a pod literally named so,
and a report of it would silently read nothing. The explicit forms are
stored in the compact shorthand, which is what a manifest and report.json show.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from inference_obs.errors import ConfigurationError, QueryError
from inference_obs.query import Matcher, MatchOp

__all__ = [
    "EXPLICIT",
    "REGEX_LOOKING",
    "DeclaredConfig",
    "Deployment",
    "Engine",
    "Hardware",
    "compact_value",
    "parse_selector",
]


#: The explicit forms of a selector value, and the compact prefix each is stored with.
EXPLICIT = {"equals": "=", "regex": "~", "not": "!", "not_regex": "!~"}
#: Characters that make a plain value look like a regex (``.`` alone does not: ``v4.1``).
REGEX_LOOKING = frozenset("*+?|()[]{}^$\\")


def compact_value(label: str, value: object) -> str:
    """One selector value (plain text or an explicit form) in the compact shorthand.

    Raises
    ------
    ConfigurationError
        Naming ``label``: a mapping that is not exactly one explicit form with
        a text value, or plain text that looks like a regex.
    """
    if isinstance(value, dict):
        if len(value) != 1 or next(iter(value)) not in EXPLICIT:
            forms = ", ".join(f"{{{k}: ...}}" for k in EXPLICIT)
            raise ConfigurationError(f"{label}: expected text or one of {forms}, not {value!r}")
        ((form, text),) = value.items()
        if not isinstance(text, str):
            raise ConfigurationError(f"{label}: {form} takes text, not {text!r}")
        return EXPLICIT[form] + text
    if not isinstance(value, str):
        raise ConfigurationError(f"{label}: expected text or {{regex: ...}}, not {value!r}")
    if not value.startswith(("~", "!", "=")) and REGEX_LOOKING & set(value):
        raise ConfigurationError(
            f"{label}: {value!r} would match only that exact text but looks like a regex; "
            f"write {{regex: {value!r}}} to match it as one, or {{equals: {value!r}}} if "
            "it is literal"
        )
    return value


def parse_selector(selector: dict[str, str]) -> tuple[Matcher, ...]:
    """Matchers from the compact form (see the module docstring), label by label."""
    matchers = []
    for label, text in selector.items():
        if text.startswith("="):  # an escape: the rest is literal ("=~x" is "~x")
            matchers.append(Matcher(label, MatchOp.EQ, text[1:]))
        elif text.startswith("!~"):
            matchers.append(Matcher(label, MatchOp.NRE, text[2:]))
        elif text.startswith("~"):
            matchers.append(Matcher(label, MatchOp.RE, text[1:]))
        elif text.startswith("!"):
            matchers.append(Matcher(label, MatchOp.NE, text[1:]))
        else:
            matchers.append(Matcher(label, MatchOp.EQ, text))
    return tuple(matchers)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Hardware(_Model):
    """What each replica runs on, as declared (and, where monitoring shows it, verified)."""

    gpu_model: str = Field(description="GPU product name, e.g. 'NVIDIA H20'.")
    gpu_memory_gib: float | None = Field(None, gt=0, description="Rated memory per GPU, GiB.")
    gpus_per_replica: int = Field(ge=1, description="GPUs allocated to each replica.")
    interconnect: str | None = Field(None, description="e.g. 'NVSwitch', 'PCIe, NVLink pairs'.")


class Engine(_Model):
    """The serving engine and its build."""

    name: Literal["vllm", "sglang"] = Field(description="Serving engine.")
    version: str | None = Field(None, description="Engine version, e.g. '0.33.0'.")
    image: str | None = Field(None, description="Container image tag (does not prove a build).")


class DeclaredConfig(_Model):
    """Configuration the deployment declares; not proof of what the process runs."""

    tensor_parallel_size: int | None = Field(None, ge=1)
    data_parallel_size: int | None = Field(None, ge=1)
    expert_parallel: bool | None = None
    kv_cache_dtype: str | None = Field(None, description="e.g. 'fp8', 'auto'.")
    max_num_batched_tokens: int | None = Field(None, ge=1, description="Tokens per step.")
    max_num_seqs: int | None = Field(None, ge=1, description="Running-sequence limit.")
    max_model_len: int | None = Field(None, ge=1, description="Context limit, tokens.")
    prefix_caching: bool | None = None
    speculative_method: str | None = Field(None, description="e.g. 'dspark', 'eagle'.")
    num_speculative_tokens: int | None = Field(None, ge=1)
    cpu_offload: str | None = Field(None, description="CPU offload in use, if any.")
    external_kv_cache: str | None = Field(None, description="e.g. 'mooncake', 'lmcache'.")


class Deployment(_Model):
    """A named group of replicas and the selectors that find its series."""

    name: str = Field(min_length=1, description="Short name used in reports, e.g. 'PRO'.")
    replicas: tuple[str, ...] = Field(
        default=(), description="Pseudonymous replica names, e.g. ('PRO-01',)."
    )
    selector: dict[str, str] = Field(
        min_length=1, description="Compact label selector of the deployment's vLLM series."
    )
    gpu_selector: dict[str, str] | None = Field(
        None, description="Selector of its DCGM series when their labels differ."
    )
    hardware: Hardware
    engine: Engine
    config: DeclaredConfig = DeclaredConfig()

    @field_validator("selector", "gpu_selector", mode="before")
    @classmethod
    def _compact(cls, value: object) -> object:
        if isinstance(value, dict):
            return {label: compact_value(str(label), text) for label, text in value.items()}
        return value

    @field_validator("selector", "gpu_selector")
    @classmethod
    def _valid_selector(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            try:
                parse_selector(value)
            except QueryError as exc:
                # A ValueError: pydantic reports it as this field's error.
                raise ConfigurationError(str(exc)) from exc
        return value

    @property
    def matchers(self) -> tuple[Matcher, ...]:
        """Matchers of the deployment's engine series."""
        return parse_selector(self.selector)

    @property
    def gpu_matchers(self) -> tuple[Matcher, ...]:
        """Matchers of the deployment's GPU series (the engine selector if none given)."""
        return parse_selector(self.gpu_selector or self.selector)
