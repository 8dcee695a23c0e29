"""HOW analyses read a source: Measurements, counter changes, tiles and aligned rows.

The layer between the source and the questions. A
:class:`~inference_obs.reading.measurement.Measurement` is a number with its
unit, window, status and the PromQL behind it; the other modules read what
many analyses need alike: exact counter changes and ratios
(:mod:`~.counter_totals`, :mod:`~.counter_ratios`, :mod:`~.counter_resets`),
the tile width a scope is read at (:mod:`~.resolution`), and replicas' app
scrapes aligned with their GPUs (:mod:`~.alignment`, :mod:`~.rows`). An
analysis asks through its :class:`~.context.Reading` alone (``r.ask``,
``r.soon``, ...); the run's threads are a :class:`~.schedule.Pool`.
"""
