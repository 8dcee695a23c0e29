"""The scenario file: what to simulate, validated before anything runs.

A scenario is YAML holding one :class:`Scenario`. Every mapping forbids keys
it does not know, and an error names the field by its path, e.g.
``deployments[0].workload[1].rate_per_second``. The scenarios shipped with
the package live in ``inference_obs/simulate/scenarios/`` and load by name
(:func:`load_scenario`); see those files for complete, commented examples.

Layout of a scenario (times are offsets from the window start)::

    name, title, seed, window {start, duration},
    scrape {interval, jitter, warmup, lead_in, collect_interval, util_sample,
            drop_buckets, drop_families, gpu_families},
    deployments: [{name, replicas, pod_prefix, namespace, model_name,
                   replicas_per_node, hardware, engine, config, kv_cache, step,
                   gpu, host, custom_histogram_buckets, workload: [traffic classes]}],
    faults: [...], methodology: [...], targets: {...}

Traffic classes are :mod:`~inference_obs.simulate.workload`, engine
behaviour and host CPUs :mod:`~inference_obs.simulate.engine_spec`, faults
:mod:`~inference_obs.simulate.faults`, random distributions
:mod:`~inference_obs.simulate.distributions`.

A deployment's ``hardware``, ``engine`` and ``config`` are the manifest's
:class:`~inference_obs.deployment.Deployment` sections: the simulator obeys
the declared ``config`` (sequence and token limits, data-parallel engines,
speculative tokens), so what a dataset declares is what produced it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from inference_obs.deployment import DeclaredConfig, Deployment, Engine, Hardware
from inference_obs.documents import yaml_document
from inference_obs.errors import DocumentError, ScenarioError
from inference_obs.metrics import Family, MetricType, dcgm, family as catalogue_family
from inference_obs.samples import Window
from inference_obs.simulate.durations import Seconds
from inference_obs.simulate.engine_spec import (
    BucketFamily,
    GpuProfile,
    HostProfile,
    KvCache,
    StepModel,
)
from inference_obs.simulate.faults import Fault, GpuStops, HostStarved
from inference_obs.simulate.workload import TrafficClass

__all__ = [
    "DEFAULT_GPU_FAMILIES",
    "GPU_FAMILIES",
    "DeploymentSpec",
    "Scenario",
    "ScenarioError",
    "ScenarioWindow",
    "Scrape",
    "load_scenario",
    "parse_scenario",
    "scenario_names",
]

_PACKAGE = "inference_obs.simulate"

GPU_FAMILIES: tuple[Family, ...] = (
    dcgm.GPU_UTIL,
    dcgm.PROF_GR_ENGINE_ACTIVE,
    dcgm.PROF_PIPE_TENSOR_ACTIVE,
    dcgm.PROF_DRAM_ACTIVE,
    dcgm.PROF_SM_ACTIVE,
    dcgm.PROF_SM_OCCUPANCY,
    dcgm.POWER_USAGE,
    dcgm.FB_USED,
    dcgm.FB_FREE,
    dcgm.PROF_PCIE_TX_BYTES,
    dcgm.PROF_PCIE_RX_BYTES,
)
"""The DCGM families the simulated exporter can export."""
DEFAULT_GPU_FAMILIES: tuple[Family, ...] = GPU_FAMILIES[:-2]
"""The DCGM families exported unless a scenario lists its own: all but PCIe."""


def _known(name: str) -> Family:
    # Its ConfigurationError, a ValueError, is reported by pydantic as the field's error.
    return catalogue_family(name)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


class DeploymentSpec(_Model):
    """A deployment to simulate: the manifest description plus how it behaves."""

    name: str = Field(min_length=1)
    replicas: tuple[str, ...] = Field(min_length=1, description="Replica names, e.g. 'H20-01'.")
    pod_prefix: str = Field(
        min_length=1, description="Pod names are '<prefix>-01', '<prefix>-02', ..."
    )
    namespace: str = "inference"
    model_name: str = Field(min_length=1, description="The model_name label of vLLM series.")
    replicas_per_node: int = Field(1, ge=1, description="Replicas sharing a node (GPU exporter).")
    hardware: Hardware
    engine: Engine
    config: DeclaredConfig
    kv_cache: KvCache
    step: StepModel
    gpu: GpuProfile
    host: HostProfile | None = Field(
        None, description="Host CPUs; process, cAdvisor and node series exist only when set."
    )
    workload: tuple[TrafficClass, ...] = Field(min_length=1)
    custom_histogram_buckets: dict[BucketFamily, tuple[float, ...]] = Field(
        default_factory=dict,
        description="vLLM's --custom-histogram-buckets (0.33+): bounds per bucket family.",
    )

    @field_validator("custom_histogram_buckets")
    @classmethod
    def _increasing(
        cls, value: dict[BucketFamily, tuple[float, ...]]
    ) -> dict[BucketFamily, tuple[float, ...]]:
        for key, bounds in value.items():
            if not bounds or list(bounds) != sorted(set(bounds)) or bounds[0] <= 0:
                raise ScenarioError(f"{key}: bounds must be positive and strictly increasing")
        return value

    @model_validator(mode="after")
    def _runnable(self) -> DeploymentSpec:
        config = self.config
        for field in ("max_num_seqs", "max_num_batched_tokens"):
            if getattr(config, field) is None:
                raise ScenarioError(f"config.{field} must be set: the simulated scheduler obeys it")
        if self.engine.name != "vllm":
            raise ScenarioError("engine.name: only 'vllm' can be simulated")
        if self.hardware.gpus_per_replica % self.engines_per_replica:
            raise ScenarioError(
                f"hardware.gpus_per_replica {self.hardware.gpus_per_replica} is not a multiple "
                f"of config.data_parallel_size {self.engines_per_replica}"
            )
        if (config.speculative_method is None) != (config.num_speculative_tokens is None):
            raise ScenarioError(
                "config.speculative_method and config.num_speculative_tokens go together"
            )
        return self

    @property
    def engines_per_replica(self) -> int:
        """Data-parallel engines per replica (each has its own scheduler and KV pool)."""
        return self.config.data_parallel_size or 1

    @property
    def speculative_tokens(self) -> int:
        """Draft tokens per verification step, 0 without speculative decoding."""
        return self.config.num_speculative_tokens or 0

    def pod(self, replica: int) -> str:
        """The pod name of replica ``replica`` (0-based)."""
        return f"{self.pod_prefix}-{replica + 1:02d}"

    def deployment(self) -> Deployment:
        """The manifest's description of this deployment."""
        return Deployment(
            name=self.name,
            replicas=self.replicas,
            selector={"namespace": self.namespace, "pod": f"~{self.pod_prefix}-.*"},
            hardware=self.hardware,
            engine=self.engine,
            config=self.config,
        )


class Scrape(_Model):
    """How Prometheus scrapes the replicas and GPU exporters."""

    interval: Seconds = Field(15.0, gt=0, description="Scrape interval of every target, s.")
    jitter: Seconds = Field(0.005, description="Each scrape lands up to this far off its slot, s.")
    warmup: Seconds = Field(
        600.0, description="Traffic simulated before the first sample (servers started then)."
    )
    lead_in: Seconds = Field(0.0, description="Samples kept from this long before the window.")
    collect_interval: Seconds = Field(
        30.0, gt=0, description="dcgm-exporter collect interval: GPU values change this often."
    )
    util_sample: Seconds = Field(
        1.0, gt=0, description="NVML utilisation sample period behind DCGM_FI_DEV_GPU_UTIL."
    )
    drop_buckets: tuple[str, ...] = Field(
        (),
        description="vLLM histograms whose _bucket series metric relabelling drops "
        "(their _sum and _count are kept).",
    )
    drop_families: tuple[str, ...] = Field(
        (), description="vLLM families metric relabelling drops entirely."
    )
    gpu_families: tuple[str, ...] = Field(
        tuple(f.name for f in DEFAULT_GPU_FAMILIES),
        description="DCGM families the exporter exports (its counters CSV); PCIe only if listed.",
    )

    @field_validator("drop_families")
    @classmethod
    def _vllm(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        families = [_known(name) for name in names]
        for f in families:
            if f.exporter != "vllm":
                raise ScenarioError(f"{f.name} is not a vLLM family")
        return tuple(f.name for f in families)

    @field_validator("drop_buckets")
    @classmethod
    def _histograms(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        families = [_known(name) for name in names]
        for f in families:
            if f.type is not MetricType.HISTOGRAM or f.exporter != "vllm":
                raise ScenarioError(f"{f.name} is not a vLLM histogram")
        return tuple(f.name for f in families)

    @field_validator("gpu_families")
    @classmethod
    def _simulated(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        families = [_known(name) for name in names]
        for f in families:
            if f not in GPU_FAMILIES:
                simulated = ", ".join(g.name for g in GPU_FAMILIES)
                raise ScenarioError(f"{f.name} is not simulated; choose from {simulated}")
        return tuple(f.name for f in families)

    @model_validator(mode="after")
    def _warm(self) -> Scrape:
        if self.warmup < self.lead_in:
            raise ScenarioError(f"warmup {self.warmup} s is shorter than lead_in {self.lead_in} s")
        return self


class ScenarioWindow(_Model):
    """The observed window."""

    start: AwareDatetime = Field(description="ISO 8601 with offset, e.g. 2026-10-19T17:40:00+08:00")
    duration: Seconds = Field(gt=0)

    def window(self) -> Window:
        """As a :class:`~inference_obs.samples.Window`."""
        return Window.parse(self.start, self.duration)


class Scenario(_Model):
    """A simulated observation: deployments, their traffic, scrapes and faults."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="Also the dataset folder name.")
    title: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(ge=0, description="Default random seed.")
    window: ScenarioWindow
    scrape: Scrape = Scrape()
    deployments: tuple[DeploymentSpec, ...] = Field(min_length=1)
    faults: tuple[Fault, ...] = ()
    methodology: tuple[str, ...] = ()
    targets: dict[str, float | str] = Field(
        default_factory=dict,
        description="Headline numbers of the observation the scenario is shaped after.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        names = [r for d in self.deployments for r in d.replicas]
        if len(set(names)) != len(names):
            raise ScenarioError(f"replica names repeat across deployments: {names}")
        for i, deployment in enumerate(self.deployments):
            for j, traffic in enumerate(deployment.workload):
                for k, cluster in enumerate(traffic.clusters):
                    if cluster.replica is not None and cluster.replica not in deployment.replicas:
                        raise ScenarioError(
                            f"deployments[{i}].workload[{j}].clusters[{k}].replica: "
                            f"{cluster.replica!r} is not a replica of {deployment.name}"
                        )
        for i, fault in enumerate(self.faults):
            named = (fault.replica,) if hasattr(fault, "replica") else fault.replicas
            unknown = [r for r in named if r not in names]
            if unknown:
                raise ScenarioError(f"faults[{i}]: unknown replica(s) {unknown}; replicas: {names}")
            if isinstance(fault, GpuStops):
                spec = self.deployment_of(fault.replica)
                if fault.gpu >= spec.hardware.gpus_per_replica:
                    raise ScenarioError(
                        f"faults[{i}].gpu: {fault.gpu} but {fault.replica} has "
                        f"{spec.hardware.gpus_per_replica} GPUs"
                    )
            if isinstance(fault, HostStarved) and self.deployment_of(fault.replica).host is None:
                raise ScenarioError(
                    f"faults[{i}]: host_starved on {fault.replica}, whose deployment has no "
                    "host profile: set deployments[].host so its CPUs are simulated"
                )
        return self

    def deployment_of(self, replica: str) -> DeploymentSpec:
        """The deployment a replica belongs to."""
        return next(d for d in self.deployments if replica in d.replicas)


def scenario_names() -> tuple[str, ...]:
    """Names of the scenarios shipped with the package."""
    folder = resources.files(_PACKAGE).joinpath("scenarios")
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")))


# Tags of the discriminated unions, which pydantic inserts into error paths.
_TAGS = frozenset(
    {"constant", "uniform", "lognormal", "choice", "beta"}
    | {"restart", "stall", "scrape_gap", "gpu_stops", "misaligned_scrapes", "missing_family"}
    | {"host_starved", "transfer_bound"}
)


def _location(loc: tuple[int | str, ...]) -> str:
    """An error path as ``deployments[0].workload[1].rate_per_second``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part not in _TAGS and not part.startswith("function-"):
            text += f".{part}" if text else part
    return text or "(top level)"


def parse_scenario(text: str, where: str) -> Scenario:
    """A scenario from YAML text; ``where`` names its origin in error messages."""
    try:
        data = yaml_document(text, where)
    except DocumentError as exc:
        raise ScenarioError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{where}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: a scenario is a mapping, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # A failed item also makes its tuple "too short": report the item only.
        deeper = [e["loc"] for e in errors]
        lines = [
            f"{_location(e['loc'])}: {e['msg']}"
            for e in errors
            if e["type"] != "too_short"
            or not any(len(d) > len(e["loc"]) and d[: len(e["loc"])] == e["loc"] for d in deeper)
        ]
        raise ScenarioError(f"{where}: invalid scenario\n  " + "\n  ".join(lines)) from None


def load_scenario(scenario: str | Path) -> Scenario:
    """A shipped scenario by name (``"pro5000-vs-h20"``) or a scenario YAML file by path.

    Raises
    ------
    ScenarioError
        When the file is missing, is not YAML, or does not validate; the
        message names the file and each offending field.
    """
    path = Path(scenario)
    if isinstance(scenario, Path) or path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ScenarioError(f"scenario file {str(path)!r} does not exist")
        return parse_scenario(path.read_text(encoding="utf-8"), str(path))
    if scenario not in scenario_names():
        raise ScenarioError(
            f"no scenario named {scenario!r}; shipped: {', '.join(scenario_names())}, "
            "or give the path of a YAML file"
        )
    text = resources.files(_PACKAGE).joinpath(f"scenarios/{scenario}.yaml").read_text("utf-8")
    return parse_scenario(text, f"scenario {scenario!r}")
