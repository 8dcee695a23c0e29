"""The scrape parser on real exporter text (tests/fixtures/real), and its grammar's edges."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from inference_obs.errors import DatasetError, TimeBudgetExceeded
from inference_obs.samples import Series
from inference_obs.source.openmetrics.exposition import ExpositionFormat, parse_exposition
from inference_obs.source.openmetrics.reader import read_openmetrics
from inference_obs.source.openmetrics.writer import write_openmetrics

FIXTURES = Path(__file__).parents[1] / "fixtures"
REAL = sorted((FIXTURES / "real").glob("*.prom"))


def _parse(text: str, form: ExpositionFormat = ExpositionFormat.TEXT) -> list[tuple[object, ...]]:
    scrape = parse_exposition(text.encode(), source="s", form=form)
    return [(s.name, dict(s.labels), s.value, s.t_ms) for s in scrape.samples]


@pytest.mark.parametrize("path", [*REAL, *sorted((FIXTURES / "exposition").glob("*.prom"))])
def test_every_real_exposition_parses(path: Path) -> None:
    scrape = parse_exposition(path.read_bytes(), source=path.name)
    sample_lines = [
        line for line in path.read_text().splitlines() if line and not line.startswith("#")
    ]
    assert len(scrape.samples) == len(sample_lines)
    assert scrape.repeated == 0


def test_vllm_before_0_10_has_its_itl_family() -> None:
    scrape = parse_exposition(
        (FIXTURES / "real" / "vllm_v0_metrics_paste.prom").read_bytes(), source="v0"
    )
    names = {s.name for s in scrape.samples}
    assert "vllm:time_per_output_token_seconds_bucket" in names
    assert scrape.types["vllm:time_per_output_token_seconds"] == "histogram"
    (prompt,) = [s for s in scrape.samples if s.name == "vllm:prompt_tokens_total"]
    assert prompt.value == 5.453083e06
    # lora_requests_info's empty adapter lists are dropped, as Prometheus drops them.
    (lora,) = [s for s in scrape.samples if s.name == "vllm:lora_requests_info"]
    assert dict(lora.labels) == {"max_lora": "0"}


def test_empty_label_values_are_dropped() -> None:
    scrape = parse_exposition(
        (FIXTURES / "real" / "dcgm_2x_empty_pod_labels.prom").read_bytes(), source="2x"
    )
    assert all(not {"pod", "namespace", "container"} & set(s.labels) for s in scrape.samples)
    four = parse_exposition(
        (FIXTURES / "real" / "dcgm_4x_pod_uid_empty.prom").read_bytes(), source="4x"
    )
    workload = [s for s in four.samples if "pod" in s.labels]
    assert len(workload) == 3
    assert all("pod_uid" not in s.labels for s in four.samples)


def test_untyped_and_millisecond_timestamps() -> None:
    scrape = parse_exposition(
        (FIXTURES / "real" / "federate_untyped_ms_timestamps.prom").read_bytes(), source="f"
    )
    assert scrape.types == {"cadvisor_version_info": "unknown"}
    assert [s.t_ms for s in scrape.samples] == [1601919222492, 1601919216595, 1601919222037]


def test_the_text_format_s_liberties() -> None:
    text = (
        "# a comment\n"
        "\n"
        "# HELP m line one\\nline two \\\\ done\n"
        "# TYPE m gauge\n"
        'm{ a = "x" , b="y",} 1e+06\n'
        'm {c="\\"q\\" \\\\ \\n \\t"} -Inf\n'
        "m_nan NaN\r\n"
        "m_inf +inf 17\n"
    )
    assert _parse(text) == [
        ("m", {"a": "x", "b": "y"}, 1e6, None),
        ("m", {"c": '"q" \\ \n \\t'}, -np.inf, None),
        ("m_nan", {}, pytest.approx(np.nan, nan_ok=True), None),
        ("m_inf", {}, np.inf, 17),
    ]


def test_openmetrics_answers_use_seconds_and_end_at_eof() -> None:
    text = 'c_total{a="1"} 3 1700000000.5 # {trace_id="x"} 1 1700000000\n# EOF\n'
    assert _parse(text, ExpositionFormat.OPENMETRICS) == [
        ("c_total", {"a": "1"}, 3.0, 1_700_000_000_500)
    ]
    assert (
        ExpositionFormat.of("application/openmetrics-text; version=1.0.0")
        is ExpositionFormat.OPENMETRICS
    )
    assert ExpositionFormat.of("text/plain; version=0.0.4") is ExpositionFormat.TEXT
    assert ExpositionFormat.of(None) is ExpositionFormat.TEXT


def test_a_repeated_series_keeps_its_first_sample() -> None:
    scrape = parse_exposition(b'm{a="1"} 1\nm{a="1",b=""} 2\n', source="s")
    assert [s.value for s in scrape.samples] == [1.0]
    assert scrape.repeated == 1


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("m 1\n1m 2\n", 2, "invalid metric name"),
        ('m{a="1" 1\n', 1, "expected ',' or '}'"),
        ("m{a=1} 1\n", 1, 'expected label="value"'),
        ('m{a="1",a="2"} 1\n', 1, "label a appears twice"),
        ('m{__name__="x"} 1\n', 1, "__name__ is not allowed"),
        ("m\n", 1, "expected ' value \\[timestamp\\]'"),
        ("m 1 2 3\n", 1, "expected ' value \\[timestamp\\]'"),
        ("m 0x10\n", 1, "bad value '0x10'"),
        ("m 1_000\n", 1, "bad value '1_000'"),
        ("m 1e999\n", 1, "out of range"),
        ("m 1 1.5\n", 1, "bad timestamp '1.5'; expected whole ms"),
        ("# TYPE m nonsense\n", 1, "unknown metric type 'nonsense'"),
        ("# TYPE m\n", 1, "expected '# TYPE name type'"),
    ],
)
def test_problems_name_source_and_line(text: str, line: int, problem: str) -> None:
    with pytest.raises(DatasetError, match=rf"^s:{line}: .*{problem}"):
        parse_exposition(text.encode(), source="s")


def test_invalid_utf8_names_its_line() -> None:
    with pytest.raises(DatasetError, match=r"^s:2: the line is not valid UTF-8"):
        parse_exposition(b'm 1\nm{a="\xff"} 1\n', source="s")


def test_text_after_eof_in_openmetrics() -> None:
    with pytest.raises(DatasetError, match=r"^s:3: text after '# EOF' \(line 2\)"):
        parse_exposition(b"m 1\n# EOF\nm 2\n", source="s", form=ExpositionFormat.OPENMETRICS)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_text_as_dataset_samples_reads_back(path: Path) -> None:
    # Every real series, stamped and written as a dataset's samples.om, reads back the same.
    scrape = parse_exposition(path.read_bytes(), source=path.name)
    series = [
        Series(s.name, s.labels, [1.0 if s.t_ms is None else s.t_ms / 1000], [s.value])
        for s in scrape.samples
    ]
    out = io.StringIO()
    write_openmetrics(series, out)
    back = read_openmetrics(out.getvalue().encode(), source=path.name)
    assert set(zip(back.names, back.labels, strict=True)) == {(s.name, s.labels) for s in series}


def _in_a_child(code: str, timeout_s: float) -> tuple[str, float]:
    """Run ``code`` in a fresh interpreter; its stdout and seconds, failing the test past
    ``timeout_s`` (a parser that does not end would otherwise hang the test run)."""
    began = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still parsing after {timeout_s} s")
    assert done.returncode == 0, done.stderr
    return done.stdout, time.monotonic() - began


def test_a_line_of_350000_labels_is_refused_at_once() -> None:
    # Once read label by label, each step copying the rest of the line: hours.
    code = (
        "import time\n"
        "from inference_obs.errors import DatasetError\n"
        "from inference_obs.source.openmetrics.exposition import parse_exposition\n"
        "labels = ','.join(f'l{i}=\"v\"' for i in range(350_000))\n"
        "data = ('up 1\\nvllm:x{' + labels + '} 1\\n').encode()\n"
        "began = time.monotonic()\n"
        "try:\n"
        "    parse_exposition(data, source='s')\n"
        "except DatasetError as exc:\n"
        "    print(f'{time.monotonic() - began:.3f}', exc)\n"
    )
    out, _ = _in_a_child(code, timeout_s=60)
    took, message = out.split(" ", 1)
    assert float(took) < 1.0
    # 350,000 pairs 'lN="v"' (5 characters and N's digits: 1,988,890 digits for N from 0
    # to 349,999), 349,999 commas, 'vllm:x{' and '} 1': 4,088,899 characters.
    assert message.strip() == (
        "s:2: a line of 4,088,899 characters, more than the 65,536 an exporter writes"
    )


def test_a_sample_of_more_than_256_labels_is_refused() -> None:
    def line(labels: int) -> str:
        return "vllm:x{" + ",".join(f'l{i}="v"' for i in range(labels)) + "} 1\n"

    (sample,) = parse_exposition(line(256).encode(), source="s").samples
    assert len(sample.labels) == 256
    with pytest.raises(DatasetError, match=r"^s:1: series vllm:x: more than 256 labels"):
        parse_exposition(line(257).encode(), source="s")


def test_a_long_line_of_many_labels_reads_in_linear_time() -> None:
    # 255 labels whose values fill a line just under 64 KiB: milliseconds, not seconds.
    value = "v" * 240
    text = "vllm:x{" + ",".join(f'l{i}="{value}"' for i in range(255)) + "} 1\n"
    assert 60_000 < len(text) < 65_536
    began = time.monotonic()
    (sample,) = parse_exposition(text.encode(), source="s").samples
    assert time.monotonic() - began < 0.5
    assert sample.labels["l254"] == value


def test_reading_stops_at_its_deadline() -> None:
    text = "".join(f'vllm:x{{i="{i}"}} 1\n' for i in range(20_000)).encode()
    with pytest.raises(TimeBudgetExceeded, match=r"^s:4096: the deadline passed while reading"):
        parse_exposition(text, source="s", deadline=time.monotonic() - 1)
    # A deadline not reached reads everything.
    read = parse_exposition(text, source="s", deadline=time.monotonic() + 600)
    assert len(read.samples) == 20_000
