"""The API envelope as a pydantic model: its cost next to decoding the answer it wraps.

The client validates every answer's envelope (``status``, ``errorType``,
``warnings``, ``isPartial``...) with :class:`~inference_obs.source.http.Envelope`
after ``json.loads``. Data: a generated instant-vector answer of ``--series``
series with dcgm-exporter-like labels (about 4.7 MB at 50,000). Both sides
interleaved in one process (:func:`benchmarks.common.interleave`), medians of
``--repeats`` rounds:

- ours: ``Envelope.model_validate`` of the decoded answer (``data`` is kept
  as it is, not walked), timed 1,000 at a time (one takes about a
  microsecond);
- peer: ``json.loads`` of the body, which every answer needs anyway.

Goal: validation costs no measurable time on large answers (under 0.1 % of
the decoding).

Run from the repository root::

    python -m benchmarks.envelope [--series 50000] [--repeats 21]
"""

from __future__ import annotations

import argparse
import json

from benchmarks.common import interleave, mode_line, timed_table
from inference_obs.source.http import Envelope


def answer(series: int) -> bytes:
    """An instant-vector answer of ``series`` series, as Prometheus encodes it."""
    result = [
        {
            "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "pod": f"p{i // 8}", "gpu": str(i % 8)},
            "value": [1_700_000_000.0, str(i % 100)],
        }
        for i in range(series)
    ]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}},
        separators=(",", ":"),
    ).encode()


#: Validations per timed call: one takes about a microsecond, near the clock's own cost.
BATCH = 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--series", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=21, help="timed rounds")
    args = parser.parse_args(argv)
    body = answer(args.series)
    decoded = json.loads(body)

    def validate() -> None:
        for _ in range(BATCH):
            Envelope.model_validate(decoded)

    found = interleave({"loads": lambda: json.loads(body), "validate": validate}, args.repeats)
    print(f"answer: {args.series:,} series, {len(body) / 1e6:.1f} MB")
    labels = {
        "loads": "peer  json.loads",
        "validate": f"ours  Envelope.model_validate x {BATCH:,}",
    }
    print(timed_table(found, labels, "ms"))
    loads = found.sides["loads"].median
    validate_one = found.sides["validate"].median / BATCH
    print(f"one validation: {validate_one * 1e3:.5f} ms")
    print(f"validation / decoding = {validate_one / loads:.5%} (goal < 0.1 %)")
    print(mode_line(found.mode()))


if __name__ == "__main__":
    main()
