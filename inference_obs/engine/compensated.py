"""Prometheus's compensated sums and means, bit for bit, without a Python step per sample.

Prometheus adds a window's samples with Neumaier's compensated addition
(``kahanSumInc``): a running sum ``t`` and a compensation ``c`` that collects
each addition's rounding error; the result is ``t + c``. Three ways of getting
exactly that result are chosen per window, cheapest first:

1. *Exact windows* (:meth:`~inference_obs.engine.facts.Facts.exactly_summable`):
   no addition rounds, so ``c`` stays 0 and any order of addition gives the
   exact sum: one numpy reduction.
2. *Finite windows whose sums cannot overflow*: ``t`` is the plain
   left-to-right running sum, computed one vectorised addition per sample
   position across all windows; each step's error is exact (Knuth's TwoSum
   gives the same unique value as Neumaier's branch, barring overflow) and
   is computed for a whole block at once, and ``c`` is their left-to-right
   sum (:mod:`~inference_obs.engine.blocks`).
3. *The rest* (NaN, infinities, possible overflow): Prometheus's own step
   (:func:`add_242`, :func:`add_254`) folded over positions.

The 2.42 ``avg_over_time`` feeds each step's rounded mean into the next
(``mean += x/k - mean/k``), so no sum can stand in for it: for finite windows
the recurrence runs as one vectorised step per sample *position* (three numpy
calls across all windows), its errors are found per block as in 2 (or in two
passes, exactly as Prometheus's first branch computes them, where the
increments are proven no larger than the mean), and summed in order; other
windows take way 3.

Every way gives Prometheus's bits, not an approximation of them;
``tests/engine/test_fast_paths.py`` checks each against scalar loops written
from the Go code.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from inference_obs.engine.blocks import Blocks, fold_rows, two_sum_error
from inference_obs.engine.facts import count_between
from inference_obs.engine.segments import fold_positions, segment_reduce
from inference_obs.engine.windows import Windows
from inference_obs.samples import Floats, Ints, SampleSet

__all__ = ["add_242", "add_254", "mean_35", "mean_242", "plain_sum", "sum_242", "sum_254"]


def add_242(x: Floats, total: Floats, c: Floats) -> tuple[Floats, Floats]:
    """Prometheus 2.42 ``kahanSumInc``: Neumaier's compensated addition of ``x``."""
    with np.errstate(invalid="ignore", over="ignore"):
        t = total + x
        # Neumaier: the rounding error is recovered from the larger operand.
        error = np.where(np.abs(total) >= np.abs(x), (total - t) + x, (x - t) + total)
        return t, c + error


def add_254(x: Floats, total: Floats, c: Floats) -> tuple[Floats, Floats]:
    """Prometheus 2.54+ ``kahanSumInc``: as 2.42, but an infinite sum zeroes the compensation."""
    t, c = add_242(x, total, c)
    # Commit fd6bdf5230: once the sum is infinite the compensation is
    # meaningless (it would be NaN) and is reset.
    return t, np.where(np.isinf(t), 0.0, c)


# Up to this many windows, add.accumulate down the positions beats one vectorised
# addition per position (which costs a numpy call per sample position, however
# narrow); wider, the per-position additions win: accumulate walks each column
# alone (measured on 1,441 positions: 32 windows 0.4 vs 0.7 ms, 128: 1.7 vs 0.7).
_ACCUMULATE_WIDEST = 48


def _running_sums(values: Floats, lo: Ints, hi: Ints) -> tuple[Floats, Floats]:
    """Per window (finite, cannot overflow): the left-to-right sum from 0 and its compensation."""
    layout = Blocks(values, lo, hi)
    total, c = np.zeros(layout.width), np.zeros(layout.width)
    for k0, k1, x in layout.blocks():
        rows, wide = k1 - k0, x.shape[1]
        # running[j + 1] = running[j] + x[j]; past its end a window adds 0,
        # so its sum and compensation stay put.
        running = np.empty((rows + 1, wide))
        running[0] = total[:wide]
        samples = np.array(x, order="C")
        with np.errstate(invalid="ignore", over="ignore"):
            if wide <= _ACCUMULATE_WIDEST:
                # The same additions in the same order (accumulate is sequential,
                # unlike add.reduce, which sums pairwise), in one numpy call.
                running[1:] = samples
                np.add.accumulate(running, axis=0, out=running)
            else:
                for j in range(rows):
                    np.add(running[j], samples[j], out=running[j + 1])
        # Row 0 carries the compensation so far; fold_rows adds the rest to it in order.
        errors = np.empty((rows + 1, wide))
        errors[0] = c[:wide]
        two_sum_error(running[:-1], samples, running[1:], errors[1:])
        total[:wide] = running[rows]
        c[:wide] = fold_rows(errors)
    return layout.unsort(total), layout.unsort(c)


def _ways(samples: SampleSet, windows: Windows) -> tuple[Ints, Ints, Ints]:
    """Indices of the non-empty windows summed in ways 1, 2 and 3 (see the module notes)."""
    facts = windows.facts_for(samples)
    lo, hi = windows.lo, windows.hi
    nonempty = hi > lo
    exact = facts.exactly_summable(lo, hi) & nonempty
    finite = facts.safe_for_sums(lo, hi) & nonempty & ~exact
    rest = nonempty & ~exact & ~finite
    return np.flatnonzero(exact), np.flatnonzero(finite), np.flatnonzero(rest)


def sum_242(samples: SampleSet, windows: Windows) -> Floats:
    """Prometheus 2.42 ``sum_over_time``: the compensated sum, or the sum alone if infinite."""
    return _compensated_sum(samples, windows, add_242)


def sum_254(samples: SampleSet, windows: Windows) -> Floats:
    """Prometheus 2.54+ ``sum_over_time``: as :func:`sum_242`, with :func:`add_254`'s step.

    Zeroing the compensation once the sum is infinite cannot change the
    result (an infinite sum is returned alone), so both give the same bits;
    each follows its version's code.
    """
    return _compensated_sum(samples, windows, add_254)


def _compensated_sum(
    samples: SampleSet,
    windows: Windows,
    add: Callable[[Floats, Floats, Floats], tuple[Floats, Floats]],
) -> Floats:
    """The compensated sum per window, ``add`` being the version's ``kahanSumInc`` (way 3)."""
    values, lo, hi = samples.values, windows.lo, windows.hi
    exact, finite, rest = _ways(samples, windows)
    out = np.zeros(lo.shape)
    # Adding 0.0 turns a sum of negative zeros into +0, as 0 + x does.
    out[exact] = segment_reduce(np.add, values, lo[exact], hi[exact], empty=0.0) + 0.0
    if finite.size:
        total, c = _running_sums(values, lo[finite], hi[finite])
        out[finite] = total + c
    if rest.size:

        def step(x: Floats, k: float, state: tuple[Floats, ...]) -> tuple[Floats, ...]:
            return add(x, state[0], state[1])

        zeros = np.zeros(rest.size)
        total, c = fold_positions(values, lo[rest], hi[rest], (zeros, zeros), step)
        with np.errstate(invalid="ignore", over="ignore"):
            # An infinite sum is returned as is (adding the compensation could make it NaN).
            out[rest] = np.where(np.isinf(total), total, total + c)
    return out


def plain_sum(samples: SampleSet, windows: Windows) -> Floats:
    """VictoriaMetrics: an uncompensated sum, added strictly left to right from 0."""
    values, lo, hi = samples.values, windows.lo, windows.hi
    exact, finite, rest = _ways(samples, windows)
    out = np.zeros(lo.shape)
    # Adding 0.0 turns a sum of negative zeros into +0, as 0 + x does.
    out[exact] = segment_reduce(np.add, values, lo[exact], hi[exact], empty=0.0) + 0.0
    nonempty = np.sort(np.concatenate((finite, rest)))
    if nonempty.size:
        # Adding rows in order is the fold itself, specials included.
        layout = Blocks(values, lo[nonempty], hi[nonempty])
        total = np.zeros(layout.width)
        for k0, k1, x in layout.blocks():
            stack = np.empty((k1 - k0 + 1, x.shape[1]))
            stack[0] = total[: x.shape[1]]
            stack[1:] = x
            total[: x.shape[1]] = fold_rows(stack)
        out[nonempty] = layout.unsort(total)
    return out


def mean_35(samples: SampleSet, windows: Windows) -> Floats:
    """Prometheus 3.5+ ``avg_over_time``: compensated sum / count, incremental only on overflow."""
    values, lo, hi = samples.values, windows.lo, windows.hi
    exact, finite, rest = _ways(samples, windows)
    counts = windows.counts.astype(np.float64)
    out = np.zeros(lo.shape)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # Ways 1 and 2 never overflow, so the sum stays direct: sum/n + c/n.
        total = segment_reduce(np.add, values, lo[exact], hi[exact], empty=0.0)
        out[exact] = total / counts[exact] + 0.0 / counts[exact]
        if finite.size:
            total, c = _running_sums(values, lo[finite], hi[finite])
            out[finite] = total / counts[finite] + c / counts[finite]
    if rest.size:
        out[rest] = _fold_mean_35(values, lo[rest], hi[rest])
    return out


def _fold_mean_35(values: Floats, lo: Ints, hi: Ints) -> Floats:
    def step(x: Floats, k: float, state: tuple[Floats, ...]) -> tuple[Floats, ...]:
        total, c, mean, incremental = state
        if k == 1:
            # The first sample starts the sum.
            return x.copy(), c, mean, incremental
        with np.errstate(invalid="ignore", over="ignore"):
            new_total, new_c = add_254(x, total, c)
            direct = incremental == 0
            # The direct sum carries on while it stays finite ...
            keep_direct = direct & ~np.isinf(new_total)
            # ... and on overflow the state becomes the mean so far and its
            # compensation, and the mean is updated incrementally from here on.
            switch = direct & np.isinf(new_total)
            mean = np.where(switch, total / (k - 1), mean)
            c = np.where(switch, c / (k - 1), c)
            q = (k - 1) / k
            inc_mean, inc_c = add_254(x / k, q * mean, q * c)
        return (
            np.where(keep_direct, new_total, total),
            np.where(keep_direct, new_c, inc_c),
            np.where(keep_direct, mean, inc_mean),
            np.where(keep_direct, incremental, 1.0),
        )

    zeros = np.zeros(lo.size)
    total, c, mean, incremental = fold_positions(values, lo, hi, (zeros,) * 4, step)
    counts = (hi - lo).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out: Floats = np.where(incremental == 1, mean + c, total / counts + c / counts)
    return out


def mean_242(samples: SampleSet, windows: Windows) -> Floats:
    """Prometheus 2.42 ``avg_over_time``: ``mean += x/k - mean/k``, compensated."""
    values, lo, hi = samples.values, windows.lo, windows.hi
    nonempty = hi > lo
    safe_mask = windows.facts_for(samples).safe_for_means(lo, hi)
    safe, rest = np.flatnonzero(safe_mask & nonempty), np.flatnonzero(~safe_mask & nonempty)
    out = np.zeros(lo.shape)
    if safe.size:
        a, b = lo[safe], hi[safe]
        # Counter-like windows (never decreasing, from >= 0) let most steps'
        # errors be taken the way Prometheus's first branch takes them.
        rising = (count_between(windows.facts_for(samples).drops, a, b - 1) == 0) & (values[a] >= 0)
        out[safe] = _recurrence_242(values, a, b, rising)
    if rest.size:
        out[rest] = _fold_mean_242(values, lo[rest], hi[rest])
    return out


def _neumaier_first_branch(
    before: Floats, first: Floats, last: Floats, k0: int, rising: bool
) -> bool:
    """Whether ``|mean| >= |x/k - mean/k|`` at every step ``k`` of a block, for every window.

    Then Prometheus's ``kahanSumInc`` always takes its first branch, and the
    block's errors are ``(mean - t) + inc`` (two passes instead of TwoSum's
    five). ``before`` is each window's mean before the block, ``first`` and
    ``last`` its samples at the block's first and last positions (k0 + 1 and
    k1, 1-based); all windows run through the block.

    Proof, for windows whose samples never decrease and start at >= 0: with
    ``L = min(before, first)`` (``first`` alone when ``k0 == 0``, since the
    first step sets the mean to the first sample exactly) and
    ``U = max(before, last)``, every sample of the block lies in ``[L, U]``,
    and one rounded step of ``mean += x/k - mean/k`` keeps the mean within
    ``[L (1 - 4u), U (1 + 4u)]`` (u = 2**-53), so over R <= 2**16 steps within
    a relative 2**-35 of ``[L, U]``. The increment is at most ``max(x, mean)
    (1 + u)**2 / k``, so ``U (1 + 1e-9) <= k L (1 - 1e-9)`` for the block's
    smallest ``k`` needing it (k = 1 has mean 0, where both branches give 0)
    proves the claim.
    """
    if not rising:
        return False
    low = first if k0 == 0 else np.minimum(before, first)
    high = np.maximum(before, last)
    smallest_k = max(k0 + 1, 2)
    return bool(np.all(high * (1 + 1e-9) <= smallest_k * low * (1 - 1e-9)))


def _recurrence_242(values: Floats, lo: Ints, hi: Ints, rising: npt.NDArray[np.bool_]) -> Floats:
    """The 2.42 incremental mean of finite windows that cannot overflow, step for step.

    Without infinities the step is ``t = mean + (x/k - mean/k)`` (each
    operation rounded, as in Go) with the error of that last addition added
    to ``c``; the mean sequence is computed one position at a time across all
    windows, the errors and their sum afterwards, per block.
    """
    layout = Blocks(values, lo, hi)
    width, active, most = layout.width, layout.active, layout.rows
    rising_sorted = rising[layout.order]
    c, final, part = np.zeros(width), np.zeros(width), np.empty(width)
    # Reused by every block. scaled is stored like the blocks (window by
    # window), so dividing into it reads and writes memory in order.
    means = np.zeros((most + 1, width))
    steps = np.empty((most, width))
    errors_buffer = np.empty((most + 1, width))
    scaled_buffer = np.empty((width, most)).T
    # numpy converts a Python float divisor on every call; 0-d arrays it takes as they are.
    zero_d = [(j, ...) for j in range(min(most, layout.length))]
    divide, subtract, add = np.divide, np.subtract, np.add
    for k0, k1, x in layout.blocks():
        rows, wide = k1 - k0, x.shape[1]
        counts = np.arange(k0 + 1, k1 + 1, dtype=np.float64)
        scaled = divide(x, counts[:, None], out=scaled_buffer[:rows, :wide])
        if active[k1 - 1] == wide:
            # Every window runs through the block: whole rows, taken as views once.
            before, now = list(means[: rows + 1, :wide]), part[:wide]
            divisors = map(counts.__getitem__, zero_d[:rows])
            for previous, after, a, step, k in zip(
                before, before[1:], scaled, steps[:rows, :wide], divisors, strict=False
            ):
                divide(previous, k, now)
                subtract(a, now, step)
                add(previous, step, after)
        else:
            for j, count in enumerate(counts.tolist()):
                n = int(active[k0 + j])
                previous, now = means[j, :n], part[:n]
                divide(previous, count, now)
                subtract(scaled[j, :n], now, steps[j, :n])
                add(previous, steps[j, :n], means[j + 1, :n])
        # Row 0 carries the compensation so far; fold_rows adds the rest to it in order.
        errors = errors_buffer[: rows + 1, :wide] if wide == width else np.empty((rows + 1, wide))
        errors[0] = c[:wide]
        previous, step, after = means[:rows, :wide], steps[:rows, :wide], means[1 : rows + 1, :wide]
        if active[k1 - 1] == wide and _neumaier_first_branch(
            previous[0], x[0], x[rows - 1], k0, bool(rising_sorted[:wide].all())
        ):
            np.add(np.subtract(previous, after, out=errors[1:]), step, out=errors[1:])
        else:
            two_sum_error(previous, step, after, errors[1:])
        ending = slice(int(active[k1]), wide)
        if ending.start < wide:
            # Windows ending in this block: their mean after their last
            # sample; their errors past it (made of stale cells) count 0.
            last_rows = layout.sizes[ending] - k0
            final[ending] = means[last_rows, np.arange(ending.start, wide)]
            past = np.arange(k0, k1)[:, None] >= layout.sizes[None, :wide]
            errors[1:][past] = 0.0
        c[:wide] = fold_rows(errors)
        means[0, :wide] = means[rows, :wide]
    # Finite windows never reach an infinite mean: the result is mean + c.
    return layout.unsort(final + c)


def _fold_mean_242(values: Floats, lo: Ints, hi: Ints) -> Floats:
    def step(x: Floats, k: float, state: tuple[Floats, ...]) -> tuple[Floats, ...]:
        mean, c = state
        with np.errstate(invalid="ignore", over="ignore"):
            infinite = np.isinf(mean)
            # An infinite mean stays as it is for an infinity of the same sign
            # (Inf - Inf would be NaN) ...
            same_infinity = np.isinf(x) & ((mean > 0) == (x > 0))
            # ... and for any finite sample (Inf += x - Inf would be NaN too).
            skip = infinite & (same_infinity | np.isfinite(x))
            new_mean, new_c = add_242(x / k - mean / k, mean, c)
        return np.where(skip, mean, new_mean), np.where(skip, c, new_c)

    zeros = np.zeros(lo.size)
    mean, c = fold_positions(values, lo, hi, (zeros, zeros), step)
    with np.errstate(invalid="ignore", over="ignore"):
        # An infinite mean is returned as is.
        out: Floats = np.where(np.isinf(mean), mean, mean + c)
    return out
