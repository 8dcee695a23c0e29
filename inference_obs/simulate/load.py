"""A scenario under more (or less) traffic: every arrival rate scaled by one factor."""

from __future__ import annotations

import math

from inference_obs.simulate.scenario import Scenario, ScenarioError

__all__ = ["with_load"]


def with_load(scenario: Scenario, factor: float) -> Scenario:
    """``scenario`` with every traffic class's ``rate_per_second`` multiplied by ``factor``.

    Bursts keep their multipliers (so they scale too) and clusters their
    counts; everything else, the seed included, is unchanged. The name gets
    a ``-load-x<factor>`` suffix (a ``.`` written ``p``: ``-load-x1p5``) and
    the methodology a line saying so, so a dataset made from it does not
    claim to be the scenario's own.

    Raises
    ------
    ScenarioError
        When ``factor`` is not a finite number above 0.

    Examples
    --------
    >>> from inference_obs.simulate import load_scenario
    >>> heavier = with_load(load_scenario("r1-decode"), 1.5)
    >>> heavier.name, heavier.deployments[0].workload[0].rate_per_second
    ('r1-decode-load-x1p5', 0.9299999999999999)
    """
    if not (math.isfinite(factor) and factor > 0):
        raise ScenarioError(f"load factor {factor!r}: expected a number above 0, e.g. 1.5")
    deployments = tuple(
        d.model_copy(
            update={
                "workload": tuple(
                    w.model_copy(update={"rate_per_second": w.rate_per_second * factor})
                    for w in d.workload
                )
            }
        )
        for d in scenario.deployments
    )
    return scenario.model_copy(
        update={
            "name": f"{scenario.name}-load-x{factor:g}".replace(".", "p"),
            "title": f"{scenario.title} (traffic x{factor:g})",
            "deployments": deployments,
            "methodology": (
                *scenario.methodology,
                f"Every arrival rate of scenario {scenario.name!r} multiplied by {factor:g}.",
            ),
        }
    )
