"""Hypothesis strategies shared by the property tests and the real-server round trip."""

from __future__ import annotations

from hypothesis import strategies as st

#: Characters that break naive quoting, always mixed into generated values.
AWKWARD = "\"\\\n\r\t}{,=~!'`$.*+?()[]|^ \x00\x7f\x85\u2028é中😀"

#: Any Unicode text a label value can hold: every code point but lone surrogates
#: (no UTF-8 form), biased towards the characters that break naive quoting.
label_values = st.text(
    alphabet=st.one_of(
        st.sampled_from(AWKWARD),
        st.characters(exclude_categories=["Cs"]),
    ),
    min_size=1,
    max_size=24,
)
