"""What the command line prints reaches a terminal as text: no control character from data."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_OK, main
from inference_obs.cli.terminal import printable_streams
from tests.report.hostile_dataset import CONTROLS as CONTROLS_TEXT, NAME, hostile_dataset

#: ESC, BEL, C1 CSI, bidi override, pop, isolate and its end, line separator, return:
#: each is in the hostile dataset's texts.
CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\u2066", "\u2069", "\u2028", "\r")


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font:UserWarning")
def test_a_report_prints_no_control_character_from_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = hostile_dataset(tmp_path / "dataset")
    argv = ["report", "--dataset", str(dataset), "--out", str(tmp_path / "out"), "--format", "md"]
    assert main(argv) == EXIT_OK
    out, err = capsys.readouterr()
    for control in CONTROLS:
        assert control not in out + err, repr(control)
    # The deployment's name (markup, no control: a name with one is refused) is printed
    # as written in its notes, and in its figures' file names with '%' and '/' encoded.
    assert f"inference-obs: {NAME}" in err
    assert f"figures/{NAME.replace('%', '%25').replace('/', '%2F')}-" in out


def test_a_deployment_name_holding_controls_is_refused_unprinted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = hostile_dataset(tmp_path / "dataset")
    manifest = json.loads((dataset / "manifest.json").read_text())
    manifest["deployments"][0]["name"] = f"PRO {CONTROLS_TEXT}"
    (dataset / "manifest.json").write_text(json.dumps(manifest))
    argv = ["report", "--dataset", str(dataset), "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    for control in CONTROLS:
        assert control not in err, repr(control)
    assert "does not show" in err


def test_an_error_naming_data_prints_no_control_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no\x1b]0;owned\x07dataset"
    assert main(["report", "--dataset", str(missing), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert "\x07" not in err
    assert "no\\u001b]0;owned\\u0007dataset" in err


def test_a_return_passes_alone_and_is_escaped_inside_a_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with printable_streams():
        sys.stderr.write("\r")  # a progress line going back to its start
        print("a\rb\tc\u2029d", file=sys.stderr)
    assert capsys.readouterr().err == "\ra\\u000db\tc\\u2029d\n"
    print("\x1b[0m")  # the streams are the test's own again
    assert capsys.readouterr().out == "\x1b[0m\n"
