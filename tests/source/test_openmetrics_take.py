"""OpenMetricsReader.take(): a text read block by block, its samples handed out as they come."""

from __future__ import annotations

import numpy as np
import pytest

from inference_obs.errors import DatasetError
from inference_obs.samples import SampleSet
from inference_obs.source.openmetrics.reader import OpenMetricsReader, read_openmetrics

# Three families; the histogram's series interleave (as OpenMetrics histograms may),
# so a block's runs are not in series order.
TEXT = (
    "# TYPE a gauge\n"
    + "".join(f'a{{i="{i % 3}"}} {i} {1000 + i}\n' for i in range(0, 60, 3))
    + "".join(f'a{{i="1"}} {i} {2000 + i}\n' for i in range(40))
    + "# TYPE h histogram\n"
    + "".join(
        f'h_bucket{{le="1"}} {k} {3000 + k}\nh_bucket{{le="+Inf"}} {2 * k} {3000 + k}\n'
        for k in range(30)
    )
    + "".join(f"z {k / 7!r} {4000 + k}.5\n" for k in range(25))
    + "# EOF\n"
).encode()


def _taken(piece: int, block: int) -> list[SampleSet]:
    reader = OpenMetricsReader("t.om", block_bytes=block)
    parts = []
    for start in range(0, len(TEXT), piece):
        reader.feed(TEXT[start : start + piece])
        parts.append(reader.take())
    parts.append(reader.finish())
    return parts


@pytest.mark.parametrize(("piece", "block"), [(7, 64), (100, 64), (333, 200), (10_000, 1 << 20)])
def test_the_samples_taken_in_pieces_are_every_sample_of_the_text(piece: int, block: int) -> None:
    whole = read_openmetrics(TEXT, source="t.om")
    parts = _taken(piece, block)
    assert sum(int(p.offsets[-1]) for p in parts) == int(whole.offsets[-1]) == 20 + 40 + 60 + 25
    for i, (name, labels) in enumerate(zip(whole.names, whole.labels, strict=True)):
        t, v = [], []
        for part in parts:
            if i < len(part.names):
                assert (part.names[i], part.labels[i]) == (name, labels)
                lo, hi = int(part.offsets[i]), int(part.offsets[i + 1])
                t.append(part.t_ms[lo:hi])
                v.append(part.values[lo:hi])
        lo, hi = int(whole.offsets[i]), int(whole.offsets[i + 1])
        assert np.array_equal(np.concatenate(t), whole.t_ms[lo:hi]), (name, labels)
        assert np.array_equal(np.concatenate(v), whole.values[lo:hi]), (name, labels)


def test_small_blocks_hand_out_samples_before_the_end() -> None:
    parts = _taken(100, 64)
    assert sum(int(p.offsets[-1]) > 0 for p in parts[:-1]) > 10


def test_a_step_back_across_blocks_is_refused_naming_its_line() -> None:
    # Line 3 steps back from line 2's 2000 ms; 13-byte blocks (a line each) take them apart.
    text = b'm{a="x"} 1 1\nm{a="x"} 2 2\nm{a="x"} 3 1.5\n# EOF\n'
    reader = OpenMetricsReader("t.om", block_bytes=13)
    reader.feed(text[:26])  # the first two lines, parsed and taken
    assert reader.take().t_ms.tolist() == [1000, 2000]
    reader.feed(text[26:])
    with pytest.raises(DatasetError, match=r"t.om:3: .*1500 ms is not after .*2000 ms") as caught:
        reader.take()
    assert "earlier block" in str(caught.value)


def test_a_step_back_within_a_take_is_refused_as_before() -> None:
    text = b'm{a="x"} 1 2\nm{a="x"} 2 1\n# EOF\n'
    reader = OpenMetricsReader("t.om")
    reader.feed(text)
    with pytest.raises(DatasetError, match=r"t.om:2: .*1000 ms is not after .*2000 ms \(line 1\)"):
        reader.finish()
