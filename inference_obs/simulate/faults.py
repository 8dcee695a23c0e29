"""Faults a scenario can inject, each written as a mapping with a ``kind``.

========================  ==============================================================
kind                      effect
========================  ==============================================================
``restart``               the replica's server restarts at ``at``: live requests are
                          lost, nothing is scraped for ``downtime``, and every counter
                          and histogram of the replica starts again from 0
``stall``                 from ``start`` to ``end`` the replica's engines make no
                          progress: running requests stay running, new arrivals wait
                          (as ``reason``), and its GPUs are idle (utilisation 0)
``scrape_gap``            scrapes of the replica's ``app`` or ``gpu`` target in
                          ``[start, end)`` fail: no samples, ``up`` is 0
``gpu_stops``             GPU ``gpu`` of the replica has no samples from ``at`` on
``misaligned_scrapes``    the replica's GPU exporter is scraped ``offset`` seconds
                          away from its application scrapes
``missing_family``        ``family`` (any catalogue name) is not exported by
                          ``replicas`` (every replica when empty)
``host_starved``          from ``start`` to ``end`` every engine step of the replica
                          also waits ``host_ms`` on its host CPUs, GPUs idle meanwhile:
                          the container runs at its CPU limit and is throttled
                          (``cause: throttled``), or the API-server process is pinned
                          at one core (``cause: saturated``); needs the deployment's
                          ``host`` profile
``transfer_bound``        from ``start`` to ``end`` every engine step of the replica
                          also waits ``transfer_ms`` on host-to-device copies at the
                          PCIe link's full rate, GPUs idle meanwhile
``gpus_read_idle``        from ``start`` to ``end`` the replica's GPU exporter reads its
                          GPUs idle (activity fields 0, power at idle) while its engines
                          serve as usual: the exporter watches GPUs other than those the
                          server runs on (a device index or label mismatch)
========================  ==============================================================

Times are offsets from the window start (``"44m"``, ``-120``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from inference_obs.errors import ScenarioError
from inference_obs.metrics import family as catalogue_family
from inference_obs.simulate.durations import Offset, Seconds

__all__ = [
    "Fault",
    "GpuStops",
    "GpusReadIdle",
    "HostStarved",
    "MisalignedScrapes",
    "MissingFamily",
    "Restart",
    "ScrapeGap",
    "Stall",
    "TransferBound",
    "of_kind",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _OneReplica(_Model):
    replica: str = Field(description="Replica name, e.g. 'H20-02'.")

    def applies_to(self, replica: str) -> bool:
        """Whether this fault concerns ``replica``."""
        return self.replica == replica


class Restart(_OneReplica):
    """The replica's server restarts: counters reset, in-flight requests are lost."""

    kind: Literal["restart"]
    at: Offset = Field(description="When the process dies, offset from the window start.")
    downtime: Seconds = Field(30.0, description="Seconds until the new process serves.")


class _Stretch(_OneReplica):
    """A fault over ``[start, end)``."""

    start: Offset
    end: Offset

    @model_validator(mode="after")
    def _ordered(self) -> _Stretch:
        if self.end <= self.start:
            raise ScenarioError(f"end {self.end} s is not after start {self.start} s")
        return self


class Stall(_Stretch):
    """The engines hold their running requests but compute nothing (GPU idle)."""

    kind: Literal["stall"]
    reason: Literal["capacity", "deferred"] = Field(
        "deferred", description="waiting reason of requests arriving during the stall"
    )


class HostStarved(_Stretch):
    """Each engine step also waits on the host CPUs (tokenising, batching, detokenising)."""

    kind: Literal["host_starved"]
    host_ms: float = Field(gt=0, description="Wait added to every step, ms; GPUs idle.")
    cause: Literal["throttled", "saturated"] = Field(
        "throttled",
        description="throttled: the container at its CPU limit (CFS quota); saturated: the "
        "API-server process pinned at one core (the GIL).",
    )
    throttled_share: float = Field(
        0.8, gt=0, le=1, description="Share of CFS periods throttled (cause throttled)."
    )


class TransferBound(_Stretch):
    """Each engine step also waits on host-to-device copies (re-copied prompts, KV tensors)."""

    kind: Literal["transfer_bound"]
    transfer_ms: float = Field(
        gt=0, description="Copy time added to every step at the link's full rate, ms."
    )


class GpusReadIdle(_Stretch):
    """The GPU exporter reads the replica's GPUs idle while its engines serve."""

    kind: Literal["gpus_read_idle"]


class ScrapeGap(_Stretch):
    """Scrapes of one target fail for a while (no samples; ``up`` reads 0)."""

    kind: Literal["scrape_gap"]
    target: Literal["app", "gpu"] = Field(description="The vLLM server or the GPU exporter.")


class GpuStops(_OneReplica):
    """One GPU stops reporting: its series have no samples from ``at`` on."""

    kind: Literal["gpu_stops"]
    gpu: int = Field(ge=0, description="Index of the GPU within the replica.")
    at: Offset


class MisalignedScrapes(_OneReplica):
    """The GPU exporter's scrapes run ``offset`` seconds away from the app's."""

    kind: Literal["misaligned_scrapes"]
    offset: Offset = Field(description="Seconds added to the GPU target's scrape phase.")


class MissingFamily(_Model):
    """A metric family is absent (not exported, or dropped by relabelling)."""

    kind: Literal["missing_family"]
    family: str = Field(description="Catalogue name of the family, e.g. 'DCGM_FI_PROF_SM_ACTIVE'.")
    replicas: tuple[str, ...] = Field((), description="Replicas affected; all when empty.")

    def applies_to(self, replica: str) -> bool:
        """Whether this fault concerns ``replica``."""
        return not self.replicas or replica in self.replicas

    @field_validator("family")
    @classmethod
    def _known(cls, name: str) -> str:
        # Its ConfigurationError, a ValueError, is reported by pydantic as this field's error.
        return catalogue_family(name).name


Fault = Annotated[
    Restart
    | Stall
    | ScrapeGap
    | GpuStops
    | MisalignedScrapes
    | MissingFamily
    | HostStarved
    | TransferBound
    | GpusReadIdle,
    Field(discriminator="kind"),
]
"""Any fault a scenario may inject."""

F = TypeVar(
    "F",
    Restart,
    Stall,
    ScrapeGap,
    GpuStops,
    MisalignedScrapes,
    MissingFamily,
    HostStarved,
    TransferBound,
    GpusReadIdle,
)


def of_kind(faults: Sequence[BaseModel], kind: type[F], replica: str | None = None) -> list[F]:
    """The faults of one kind, optionally only those that concern ``replica``."""
    return [f for f in faults if isinstance(f, kind) and (replica is None or f.applies_to(replica))]
