"""replicas.csv never hands a spreadsheet a formula taken from the data."""

from __future__ import annotations

import io

import pandas as pd

from inference_obs.report.write import replicas_csv


def test_text_cells_that_start_a_formula_are_quoted_and_numbers_are_not() -> None:
    frame = pd.DataFrame(
        {
            "deployment": ["PRO", '=HYPERLINK("https://evil.example","x")'],
            "replica": ["+1 pod", "@SUM(A1)"],
            "statistic": ["-kv_peak", "ttft_p50"],
            "value": [-0.3875, 1.5],
            "outlier": [False, True],
        }
    )
    back = pd.read_csv(io.StringIO(replicas_csv(frame)))
    assert back["deployment"].tolist() == ["PRO", '\'=HYPERLINK("https://evil.example","x")']
    assert back["replica"].tolist() == ["'+1 pod", "'@SUM(A1)"]
    assert back["statistic"].tolist() == ["'-kv_peak", "ttft_p50"]
    # A negative number is a number: unchanged, and read back as one.
    assert back["value"].tolist() == [-0.3875, 1.5]
    assert back["outlier"].tolist() == [False, True]


def test_tab_and_carriage_return_starts_are_quoted() -> None:
    frame = pd.DataFrame({"replica": ["\t=1+1", "\r=1+1", "ok"]})
    text = replicas_csv(frame)
    assert "'\t=1+1" in text
    assert "'\r=1+1" in text
    assert "\nok\n" in text
