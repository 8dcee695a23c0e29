"""The API envelope as a pydantic model: its cost next to decoding the answer it wraps.

The client validates every answer's envelope (``status``, ``errorType``,
``warnings``, ``isPartial``...) with :class:`~inference_obs.source.http.Envelope`
after ``json.loads``. Data: a generated instant-vector answer of ``--series``
series with dcgm-exporter-like labels (about 4.7 MB at 50,000). Medians of
``--repeats`` runs in one process:

- ours: ``Envelope.model_validate`` of the decoded answer (``data`` is kept
  as it is, not walked);
- peer: ``json.loads`` of the body, which every answer needs anyway.

Goal: validation costs no measurable time on large answers (under 0.1 % of
the decoding).

Run from the repository root::

    python -m benchmarks.envelope [--series 50000] [--repeats 21]
"""

from __future__ import annotations

import argparse
import json

from benchmarks.common import median_seconds
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--series", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    body = answer(args.series)
    decoded = json.loads(body)
    loads = median_seconds(lambda: json.loads(body), args.repeats)
    validate = median_seconds(lambda: Envelope.model_validate(decoded), args.repeats * 10)
    print(f"answer: {args.series:,} series, {len(body) / 1e6:.1f} MB")
    print(f"peer  json.loads              {loads * 1e3:10.3f} ms")
    print(f"ours  Envelope.model_validate {validate * 1e3:10.4f} ms")
    print(f"validation / decoding = {validate / loads:.5%} (goal < 0.1 %)")


if __name__ == "__main__":
    main()
