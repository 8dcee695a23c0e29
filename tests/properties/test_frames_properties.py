"""parse_matrix_body (raw bytes) and parse_matrix (after json.loads) agree on any matrix."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import given, settings, strategies as st

from inference_obs.source.frames import parse_matrix, parse_matrix_body

_text = st.lists(
    st.sampled_from([*'ab"\\]}{[,:ü日 \n', '{"metric":', ',"values":[', "]]}"]), max_size=6
).map("".join)
_value = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "0", "1e+06", "-2.5e-300"]),
)
_t = st.one_of(
    st.integers(min_value=0, max_value=4_000_000_000),
    st.floats(min_value=0, max_value=4e9, allow_nan=False),
)
_series = st.fixed_dictionaries(
    {
        "metric": st.dictionaries(_text, _text, max_size=4),
        "values": st.lists(st.tuples(_t, _value).map(list), max_size=6),
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_series, max_size=5), st.booleans(), st.booleans())
def test_body_and_json_paths_agree(result: list[Any], ascii_only: bool, warn: bool) -> None:
    doc: dict[str, Any] = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    if warn:
        doc["warnings"] = ['w"]]}']
    body = json.dumps(doc, separators=(",", ":"), ensure_ascii=ascii_only).encode()
    want = parse_matrix(json.loads(body)["data"]["result"])
    got, envelope = parse_matrix_body(body)
    assert got.labels == want.labels
    assert np.array_equal(got.offsets, want.offsets)
    assert np.array_equal(got.t_ms, want.t_ms)
    assert np.array_equal(got.values, want.values, equal_nan=True)
    assert envelope.get("warnings") == doc.get("warnings")
    assert envelope["data"] == {"resultType": "matrix", "result": []}
