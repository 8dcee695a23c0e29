"""The report's judgement: the Summary's findings, ranked, and what not to conclude.

A judging analysis, beside :mod:`~inference_obs.analyses.validity`,
:mod:`~inference_obs.analyses.timeline` and :mod:`~inference_obs.analyses.regime`:
it reads their results and each deployment's run
(:class:`~.model.Judged`, built by :func:`judged`), never a source or a report,
and returns typed results (:class:`Conclusions`, :class:`Cautions`) that the
report renders as they are. :mod:`.findings` and :mod:`.deployments` hold the Summary's finders,
:mod:`.cautions` what not to conclude, :mod:`.model` the inputs and results.
"""

from __future__ import annotations

from inference_obs.analyses.conclusions.cautions import CAUTIONS, cautions
from inference_obs.analyses.conclusions.findings import (
    DIFFERENCE,
    FINDERS,
    conclusions,
    lower,
    weighing,
)
from inference_obs.analyses.conclusions.model import (
    SECTIONS,
    Caution,
    Cautions,
    Conclusion,
    Conclusions,
    Judged,
    ScopeFacts,
    cited,
    judged,
)

__all__ = [
    "CAUTIONS",
    "DIFFERENCE",
    "FINDERS",
    "SECTIONS",
    "Caution",
    "Cautions",
    "Conclusion",
    "Conclusions",
    "Judged",
    "ScopeFacts",
    "cautions",
    "cited",
    "conclusions",
    "judged",
    "lower",
    "weighing",
]
