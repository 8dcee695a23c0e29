"""Which engine's rules the local maths follows.

Prometheus 2.x and 3.x differ at window boundaries (closed vs left-open) and
in extrapolation order; VictoriaMetrics does not extrapolate ``increase`` and
reads the last sample before a window. A result says which rules produced it.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Rules"]


class Rules(StrEnum):
    """A rule set for the local engine."""

    #: Prometheus 2.42: range and lookback windows closed at both ends
    #: (``start <= t <= end``); extrapolation clamps at zero before the 110% test.
    PROMETHEUS_2 = "prometheus-2"
    #: Prometheus 3.x: left-open windows (``start < t <= end``); the 110% test
    #: comes before the zero clamp (changed in 2.51).
    PROMETHEUS_3 = "prometheus-3"
    #: VictoriaMetrics (MetricsQL): left-open windows, no extrapolation, the
    #: last sample before the window used as the base of increase/rate.
    VICTORIAMETRICS = "victoriametrics"

    @property
    def left_open(self) -> bool:
        """Whether a sample exactly at a window's start is excluded."""
        return self is not Rules.PROMETHEUS_2
