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

Numbers must be finite, and counts lie in a plausible range (:data:`LIMITS`):
``gpus_per_replica: 1e30`` is a typo, and would print tokens per GPU-hour as
``2.8e-26``. Names are told apart as a reader sees them: a name holding an
invisible or control character is refused, and so are two names that look
the same (:func:`look_alike`: ``H2O`` and ``H2\u039f`` with a Greek Omicron).

Two facts besides the series are the deployment's too, so every analysis reads
them from it: ``hardware.gpu_hour_price`` (the rent of one GPU for one hour,
which cost per token needs) and ``topology`` (the boxes' ``nvidia-smi topo -m``
wiring, which the configuration checks read). A deployments file may state the
price; the command line sets either per deployment (``--gpu-hour-price``,
``--topology``), and Python with :meth:`Deployment.with_facts`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from inference_obs.errors import ConfigurationError, QueryError
from inference_obs.query import Matcher, MatchOp
from inference_obs.topology import Topology, parse_topology

__all__ = [
    "EXPLICIT",
    "LIMITS",
    "MAX_GPU_HOUR_PRICE",
    "MAX_GPU_MEMORY_GIB",
    "REGEX_LOOKING",
    "DeclaredConfig",
    "Deployment",
    "Engine",
    "Hardware",
    "check_names",
    "compact_value",
    "look_alike",
    "parse_selector",
]

#: The largest plausible value of each count a deployment declares (the least is 1).
#: Each is far above any deployment known and far below a typo's 1e30.
LIMITS = {
    # The widest replicas (expert parallelism across NVL72 racks) span a few hundred GPUs.
    "gpus": 4096,
    # Tokens: the longest context offered is 10M tokens; a step or a context 10x that.
    "tokens": 100_000_000,
    # Running sequences per replica: vLLM's default is 256 to 1024.
    "sequences": 1_000_000,
    # Draft tokens per step: speculative methods propose a handful, n-gram a few dozen.
    "draft_tokens": 1024,
}
#: Rated GPU memory, GiB, at most: the largest GPU today holds 288 GB.
MAX_GPU_MEMORY_GIB = 16_384.0
#: Rent of one GPU for one hour, at most, in any currency: the dearest GPU rents for tens
#: of US dollars an hour, and the weakest currency in use trades at about 1e5 to the
#: dollar; 1e7 holds both, and still refuses a typo's 1e30 (which would print cost
#: per million tokens as 1e+27).
MAX_GPU_HOUR_PRICE = 10_000_000.0


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


def _not_a_truth_value(value: object) -> object:
    # pydantic reads true as 1: `gpus_per_replica: true` would be one GPU, silently.
    if isinstance(value, bool):
        raise ValueError(f"expected a number, not {str(value).lower()}")
    return value


#: A count (GPUs, tokens, sequences) and a size: numbers, never true or false.
Count = Annotated[int, BeforeValidator(_not_a_truth_value)]
Size = Annotated[float, BeforeValidator(_not_a_truth_value)]


class _Model(BaseModel):
    # NaN and infinity are not sizes: refused where any number is read.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Hardware(_Model):
    """What each replica runs on, as declared (and, where monitoring shows it, verified)."""

    gpu_model: str = Field(description="GPU product name, e.g. 'NVIDIA H20'.")
    gpu_memory_gib: Size | None = Field(
        None, gt=0, le=MAX_GPU_MEMORY_GIB, description="Rated memory per GPU, GiB."
    )
    gpus_per_replica: Count = Field(
        ge=1, le=LIMITS["gpus"], description="GPUs allocated to each replica."
    )
    interconnect: str | None = Field(None, description="e.g. 'NVSwitch', 'PCIe, NVLink pairs'.")
    # Left out of a dump when not given, so manifests and report.json written before
    # the price was a field read the same.
    gpu_hour_price: Size | None = Field(
        None,
        gt=0,
        le=MAX_GPU_HOUR_PRICE,
        exclude_if=lambda price: price is None,
        description="Rent of one GPU for one hour, in the currency costs are named in; "
        "cost per token is computed only with it.",
    )


class Engine(_Model):
    """The serving engine and its build."""

    name: Literal["vllm", "sglang"] = Field(description="Serving engine.")
    version: str | None = Field(None, description="Engine version, e.g. '0.33.0'.")
    image: str | None = Field(None, description="Container image tag (does not prove a build).")


class DeclaredConfig(_Model):
    """Configuration the deployment declares; not proof of what the process runs."""

    tensor_parallel_size: Count | None = Field(None, ge=1, le=LIMITS["gpus"])
    data_parallel_size: Count | None = Field(None, ge=1, le=LIMITS["gpus"])
    expert_parallel: bool | None = None
    kv_cache_dtype: str | None = Field(None, description="e.g. 'fp8', 'auto'.")
    max_num_batched_tokens: Count | None = Field(
        None, ge=1, le=LIMITS["tokens"], description="Tokens per step."
    )
    max_num_seqs: Count | None = Field(
        None, ge=1, le=LIMITS["sequences"], description="Running-sequence limit."
    )
    max_model_len: Count | None = Field(
        None, ge=1, le=LIMITS["tokens"], description="Context limit, tokens."
    )
    prefix_caching: bool | None = None
    speculative_method: str | None = Field(None, description="e.g. 'dspark', 'eagle'.")
    num_speculative_tokens: Count | None = Field(None, ge=1, le=LIMITS["draft_tokens"])
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
    # Parsed, and never dumped: its link matrix grows with the square of the devices, and
    # every manifest and report.json would repeat it; the report shows what it means
    # instead (the configuration section, and report.json's configuration and findings).
    topology: Topology | None = Field(
        None,
        exclude=True,
        description="The boxes' GPU wiring, as `nvidia-smi topo -m` prints it (text is parsed).",
    )

    @field_validator("name")
    @classmethod
    def _visible(cls, name: str) -> str:
        hidden = [c for c in name if unicodedata.category(c) in ("Cc", "Cf")]
        if hidden:
            raise ConfigurationError(
                f"{name!a} holds {hidden[0]!a}, a character that does not show; "
                "a name is read on screen and in file names: use visible characters only"
            )
        return name

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

    @field_validator("topology", mode="before")
    @classmethod
    def _parsed(cls, value: object) -> object:
        # A TopologyError is a ValueError: pydantic reports it as this field's, naming the line.
        return parse_topology(value) if isinstance(value, str) else value

    def with_facts(
        self, *, gpu_hour_price: float | None = None, topology: Topology | str | None = None
    ) -> Deployment:
        """This deployment with its GPU-hour price or topology set; what is not given is kept.

        Parameters
        ----------
        gpu_hour_price
            Rent of one GPU for one hour (> 0, at most :data:`MAX_GPU_HOUR_PRICE`).
        topology
            A parsed :class:`~inference_obs.topology.Topology`, or ``nvidia-smi topo -m`` text.

        Raises
        ------
        ConfigurationError
            Naming the deployment and the field: a price out of range, or text
            that is no topology (naming its line).
        """
        update: dict[str, object] = {}
        try:
            if gpu_hour_price is not None:
                update["hardware"] = Hardware.model_validate(
                    {**dict(self.hardware), "gpu_hour_price": gpu_hour_price}
                )
            if topology is not None:
                update["topology"] = (
                    parse_topology(topology) if isinstance(topology, str) else topology
                )
        except ValidationError as exc:
            problem = exc.errors()[0]
            raise ConfigurationError(
                f"{self.name}: hardware.gpu_hour_price: {problem['msg']}"
            ) from None
        except ValueError as exc:  # the topology's own error, naming the line
            raise ConfigurationError(f"{self.name}: topology: {exc}") from None
        return self.model_copy(update=update)

    @property
    def matchers(self) -> tuple[Matcher, ...]:
        """Matchers of the deployment's engine series."""
        return parse_selector(self.selector)

    @property
    def gpu_matchers(self) -> tuple[Matcher, ...]:
        """Matchers of the deployment's GPU series (the engine selector if none given)."""
        return parse_selector(self.gpu_selector or self.selector)


# Letters of other scripts that render as a Latin letter or digit (Unicode's confusables,
# UTS #39, restricted to Greek and Cyrillic, the scripts that share Latin's shapes).
_LOOK_ALIKE = str.maketrans(
    "\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7"
    "\u03bf\u03bd\u03b9"
    "\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0405\u0406\u0408"
    "\u04ae\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0455\u0456\u0458\u0501\u051b\u051d",
    "ABEZHIKMNOPTYXoviABEKMHOPCTXSIJYaeopcyxsijdqw",
)


def _skeleton(name: str) -> str:
    """What ``name`` looks like: NFKC-normalised, invisibles dropped, look-alikes as Latin."""
    shown = "".join(
        c
        for c in unicodedata.normalize("NFKC", name)
        if unicodedata.category(c) not in ("Cc", "Cf")
    )
    return " ".join(shown.translate(_LOOK_ALIKE).split())


def look_alike(names: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs of distinct names that a reader cannot tell apart, in order of appearance.

    Two names look alike when they are equal after Unicode NFKC normalisation
    (``ﬁ`` and ``fi``; a composed and a decomposed ``é``), with invisible
    characters removed and spaces collapsed, and with Greek and Cyrillic
    letters that render as Latin ones read as those (``H2\u039f``, with a
    Greek Omicron, and ``H2O``). Equal names are not pairs here: callers say
    a repeated name in words of their own.
    """
    first: dict[str, str] = {}
    pairs = []
    for name in names:
        seen = first.setdefault(_skeleton(name), name)
        if seen != name:
            pairs.append((seen, name))
    return pairs


def check_names(names: Sequence[str]) -> None:
    """Refuse deployment names that a reader cannot tell apart (see :func:`look_alike`).

    Raises
    ------
    ConfigurationError
        Showing both names escaped (``ascii()``), so the difference is visible.
    """
    for a, b in look_alike(names):
        raise ConfigurationError(
            f"deployment names {a!a} and {b!a} look the same but are different text "
            "(look-alike letters of another script, invisible characters or Unicode "
            "normalisation); rename one"
        )
