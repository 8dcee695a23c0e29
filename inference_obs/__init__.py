"""inference_obs: defensible numbers about LLM serving fleets from Prometheus data.

The package tree is the data flow: :mod:`~inference_obs.query` (what to ask),
:mod:`~inference_obs.metrics` (the vLLM, SGLang and DCGM catalogue and its
builders), :mod:`~inference_obs.source` (where samples come from), then the
maths (:mod:`~inference_obs.engine`), the analyses and the report built on them.

The four lines of a first report, in Jupyter::

    import inference_obs as obs

    report = obs.report(obs.DatasetSource("datasets/pro5000-vs-h20"))
    report  # a summary; report.figure(name), report.section(title) show the rest

``obs.report`` is the function
:func:`~inference_obs.report.from_source.report`; the subpackage of the same
name is imported first, so the import system never rebinds the name to it.

Importing the package loads neither numpy, pandas, matplotlib, scipy nor the
analyses: ``analyses``, ``Report``, ``Window``, ``Source``, ``DatasetSource``,
``PrometheusSource``, ``read_dataset`` and ``load_deployments`` load their
modules when first read (module ``__getattr__``, PEP 562), and the modules that
need pandas or matplotlib import them where a frame is built or a figure is
drawn, so the commands that draw nothing (``lint``, ``queries``, ``capture``,
``discover``) load neither (but a dataset's ``requests.csv`` is read with pandas).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from inference_obs.deployment import DeclaredConfig, Deployment, Engine, Hardware
from inference_obs.errors import (
    Annotation,
    AnswerTooLarge,
    ConfigurationError,
    DatasetError,
    InferenceObsError,
    NoDataError,
    NotSupportedOffline,
    QueryError,
    QueryFailed,
    ScenarioError,
    SourceError,
    SourceUnavailable,
    TimeBudgetExceeded,
)
from inference_obs.metrics import FAMILIES, STANDARD_QUERIES, Family, MetricType, StandardQuery
from inference_obs.query import Expr, Matcher, Selector, to_promql
from inference_obs.report.from_source import report
from inference_obs.source import TLS, BasicAuth, BearerToken
from inference_obs.version import __version__

if TYPE_CHECKING:
    from inference_obs import analyses
    from inference_obs.report.model import Report
    from inference_obs.samples import Window
    from inference_obs.source.base import Source
    from inference_obs.source.dataset.reader import read_dataset
    from inference_obs.source.dataset.source import DatasetSource
    from inference_obs.source.deployments_file import load_deployments
    from inference_obs.source.prometheus import PrometheusSource

__all__ = [
    "FAMILIES",
    "STANDARD_QUERIES",
    "TLS",
    "Annotation",
    "AnswerTooLarge",
    "BasicAuth",
    "BearerToken",
    "ConfigurationError",
    "DatasetError",
    "DatasetSource",
    "DeclaredConfig",
    "Deployment",
    "Engine",
    "Expr",
    "Family",
    "Hardware",
    "InferenceObsError",
    "Matcher",
    "MetricType",
    "NoDataError",
    "NotSupportedOffline",
    "PrometheusSource",
    "QueryError",
    "QueryFailed",
    "Report",
    "ScenarioError",
    "Selector",
    "Source",
    "SourceError",
    "SourceUnavailable",
    "StandardQuery",
    "TimeBudgetExceeded",
    "Window",
    "__version__",
    "analyses",
    "load_deployments",
    "read_dataset",
    "report",
    "to_promql",
]


def __getattr__(name: str) -> object:
    # PEP 562: a name whose module loads numpy, the analyses, the local engine or the
    # HTTP client, read for the first time (see the module docstring).
    module: ModuleType
    if name == "analyses":
        import inference_obs.analyses

        return inference_obs.analyses  # the import bound it here; later reads find it
    if name == "Report":
        from inference_obs.report import model as module
    elif name == "Window":
        from inference_obs import samples as module
    elif name in {"DatasetSource", "PrometheusSource", "Source", "read_dataset"}:
        from inference_obs import source as module
    elif name == "load_deployments":
        from inference_obs.source import deployments_file as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(module, name)
    globals()[name] = value  # found directly from now on
    return value
