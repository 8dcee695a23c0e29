"""Every bound on what is read or written, in one place: captures, scrapes, answers, loads.

A capture runs unattended (a CronJob, a terminal left open) against endpoints it
does not control, so nothing it reads may make it run past ``--duration``, grow
without bound, or hang: each bound below is what keeps one such input finite,
and each is named in the error a refused input gets.
"""

from __future__ import annotations

__all__ = [
    "BATCH_SAMPLES",
    "EXPOSED_TIME_TOLERANCE_S",
    "MAX_ANSWER_BYTES",
    "MAX_LABELS_PER_SAMPLE",
    "MAX_LINE_CHARS",
    "MAX_SCRAPE_ANSWER_BYTES",
    "MAX_TOKEN_FILE_BYTES",
    "MIN_INTERVAL_S",
    "PARSE_CLOCK_LINES",
]

#: The shortest time between scrape rounds, in seconds. A round of scrapes takes
#: milliseconds at best; below this the loop would only schedule rounds it cannot
#: start on time (``--interval 1e-6`` asked a million rounds per second).
MIN_INTERVAL_S = 0.1

#: The largest Prometheus API answer read by default, in bytes (``--max-answer-mb``
#: raises it): the largest answer a fleet report needs is a few MB; a raw fetch of a
#: big fleet's family can reach tens of MB.
MAX_ANSWER_BYTES = 256 * 1024 * 1024

#: The largest ``/metrics`` answer a capture accepts by default, in bytes, on the
#: wire and decompressed (``--max-answer-mb`` raises it). A vLLM, SGLang or
#: dcgm-exporter answer is 50 to 500 KiB; 8 MiB is some 80,000 series, which take
#: about 3 s and 400 MiB to read and keep, where a 24 MiB answer took 1.3 GiB.
MAX_SCRAPE_ANSWER_BYTES = 8 * 2**20

#: The most labels one sample line may carry. Exporters write under 30 (a DCGM
#: series about 15); Prometheus's ``label_limit`` is off by default, so a line of
#: 350,000 labels would otherwise be read, slowly, as one series.
MAX_LABELS_PER_SAMPLE = 256

#: The longest line of a ``/metrics`` answer, in characters. The longest lines
#: exporters write (``vllm:cache_config_info`` and other info series) are under
#: 4 KiB; a longer line is not one an exporter meant.
MAX_LINE_CHARS = 64 * 1024

#: A parser reading against a deadline looks at the clock every this many lines
#: (a few milliseconds of work), so a large answer cannot outlast ``--duration``.
PARSE_CLOCK_LINES = 4096

#: The largest bearer-token file read, in bytes. A Kubernetes service-account token
#: (a JWT) is 1 to 2 KiB; the bound keeps a device or a huge file from being read
#: whole on every request.
MAX_TOKEN_FILE_BYTES = 64 * 1024

#: How far, in seconds, an exposed sample timestamp may lie before a capture's first
#: scrape or after the scrape that read it and still be kept: an exporter's clock
#: may differ a little from ours, and a federated value is up to its own scrape
#: interval old. Further out (a timestamp of 1970), the sample is dropped and counted.
EXPOSED_TIME_TOLERANCE_S = 60.0

#: Default samples in one request of a dataset load: about 1 MB of remote-write protobuf
#: with the labels of a few hundred series, well within every store's request limits
#: (Prometheus reads any size; Mimir's default distributor limit is 100 MB).
BATCH_SAMPLES = 50_000
