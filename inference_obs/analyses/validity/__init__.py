"""Comparison validity: which cross-deployment comparisons mean something, and why.

:mod:`~.verdicts` runs the checks of :mod:`~.checks` and :mod:`~.checks_setup`
on every pair of deployments' :mod:`~.profile`\\ s; :mod:`~.findings` lists the
finding codes and the comparisons they weigh on; :mod:`~.matched_load`
recomputes latency over intervals of matched load.
"""

from __future__ import annotations

from inference_obs.analyses.validity.verdicts import (
    ComparisonVerdict,
    PairValidity,
    ValidityResult,
    Verdict,
    compare_profiles,
    validity,
    windows_by_name,
)

__all__ = [
    "ComparisonVerdict",
    "PairValidity",
    "ValidityResult",
    "Verdict",
    "compare_profiles",
    "validity",
    "windows_by_name",
]
