"""Engine steps over a stretch of constant batch: step time and decode progress.

Within a stretch ``(t0, t1]`` every step takes ``s`` seconds. A decoding
request whose next step completes at ``c = t0 + f * s`` (``f`` the fraction
of its current step still to run) completes steps at ``c, c + s, ...`` up
to ``t1``. Its inter-token latencies are the gaps between its outputs: the
first reaches back to its previous token (across stalls and earlier
stretches), the others are ``s`` each, so a request's latencies add up to
its decode time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inference_obs.samples import Floats, Ints
from inference_obs.simulate.engine_spec import StepModel

__all__ = ["STEP_EPS", "DecodeStretch", "decode_stretch", "engine_steps", "step_time"]

STEP_EPS = 1e-9
"""Rounding allowed (in steps) when counting completions that land on an event time."""


def step_time(
    model: StepModel, prefill_tokens: float, decoders: int, spec_tokens: int, context: float
) -> tuple[float, float]:
    """Seconds per step, and the share of it spent on computed tokens (tensor work).

    ``decoders`` sequences each verify one token plus ``spec_tokens`` drafts;
    ``context`` is the tokens they read (prompt plus output so far).
    """
    tokens = prefill_tokens + decoders * (1 + spec_tokens)
    compute_ms = model.per_token_ms * tokens
    ms = (
        model.base_ms
        + compute_ms
        + model.per_sequence_ms * decoders
        + model.per_kilo_context_ms * context / 1000.0
    )
    return ms / 1000.0, compute_ms / ms


def engine_steps(frac_left: float, t0: float, t1: float, s: float) -> tuple[int, float]:
    """Engine steps completed in ``(t0, t1]``, and the fraction of a step left after it."""
    first = t0 + frac_left * s
    steps = int(np.floor((t1 - first) / s + STEP_EPS)) + 1 if first <= t1 else 0
    return steps, min(max((first + steps * s - t1) / s, 0.0), 1.0)


@dataclass(frozen=True, slots=True)
class DecodeStretch:
    """What decoding requests did in one stretch (arrays aligned with the requests)."""

    steps: Ints
    """Steps each completed."""
    tokens: Ints
    """Output tokens each produced."""
    last_token: Floats
    """Time of each one's latest output (unchanged where no step completed)."""
    frac_left: Floats
    """Fraction of each one's current step still to run at ``t1``."""
    finished: npt.NDArray[np.bool_]
    """Which completed their last step (at ``last_token``)."""
    itl_values: Floats
    itl_weights: Floats
    """Inter-token latencies observed: ``itl_weights[i]`` times ``itl_values[i]``."""


def decode_stretch(
    frac_left: Floats,
    last_token: Floats,
    steps_done: Ints,
    steps_total: Ints,
    after_first: Ints,
    t0: float,
    t1: float,
    s: float,
) -> DecodeStretch:
    """Advance decoding requests through ``(t0, t1]`` at ``s`` seconds per step.

    ``after_first`` are the output tokens each produces after its first one,
    spread evenly over its ``steps_total`` steps (several per step with
    speculative decoding); ``steps_done`` those already completed.
    """
    crossing = t0 + frac_left * s
    left = steps_total - steps_done
    count = np.floor((t1 - crossing) / s + STEP_EPS).astype(np.int64) + 1
    k = np.minimum(left, np.maximum(count, 0))
    divisor = np.maximum(steps_total, 1)
    made = ((steps_done + k) * after_first) // divisor - (steps_done * after_first) // divisor
    last = crossing + (k - 1) * s
    return DecodeStretch(
        steps=k,
        tokens=made,
        last_token=np.where(k > 0, last, last_token),
        frac_left=np.minimum(np.maximum((crossing + k * s - t1) / s, 0.0), 1.0),
        finished=(k == left) & (k > 0),
        itl_values=np.concatenate((crossing - last_token, np.full(k.size, s))),
        itl_weights=np.concatenate(((k > 0).astype(np.float64), np.maximum(k - 1, 0))),
    )
