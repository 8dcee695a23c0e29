"""``dataset from-scrapes``: saved answers in both forms become the dataset a capture writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.cli import main
from inference_obs.errors import DatasetError
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.scrape_files import dataset_from_scrapes, read_scrape_files
from tests.source.fake_exporters import advancing, real_text

VLLM = real_text("vllm_v0_metrics_paste.prom")
DCGM = real_text("dcgm_2x_empty_pod_labels.prom")
T0 = 1_777_636_800  # 2026-05-01T12:00:00Z


def test_marked_file_with_several_targets(tmp_path: Path) -> None:
    saved = tmp_path / "scrapes.prom"
    parts = []
    for n in range(4):
        parts.append(f"# SCRAPE {T0 + 15 * n} vllm=http://10.0.0.1:8000/metrics\n")
        parts.append(advancing(VLLM, n))
        parts.append(f"# SCRAPE 2026-05-01T12:00:{15 * n:02d}.5Z dcgm=http://10.0.0.1:9400\n")
        parts.append(DCGM)
    saved.write_text("".join(parts))
    out = tmp_path / "ds"
    assert main(["dataset", "from-scrapes", str(saved), "--out", str(out)]) == 0
    dataset = read_dataset(out)
    manifest = dataset.manifest
    assert manifest.scrape_interval_seconds == 15
    assert manifest.synthetic is False
    assert [d.name for d in manifest.deployments] == ["mymodelname"]
    assert manifest.deployments[0].hardware.gpu_model == "NVIDIA TITAN V"
    (prompt,) = [s for s in dataset.samples if s.name == "vllm:prompt_tokens_total"]
    assert dict(prompt.labels) == {
        "instance": "10.0.0.1:8000",
        "job": "vllm",
        "model_name": "mymodelname",
    }
    assert prompt.t_ms.tolist() == [(T0 + 15 * n) * 1000 for n in range(4)]
    assert prompt.values.tolist() == [5.453083e06 + 7 * n for n in range(4)]
    (clock,) = [
        s for s in dataset.samples if s.name == "DCGM_FI_DEV_SM_CLOCK" and s.labels["gpu"] == "4"
    ]
    assert clock.labels["instance"] == "10.0.0.1:9400"  # http's default path and given port
    assert clock.t_ms.tolist() == [(T0 + 15 * n) * 1000 + 500 for n in range(4)]


def test_named_files_in_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "saved"
    folder.mkdir()
    for n in range(3):
        (folder / f"vllm=10.0.0.2:8000@{T0 + 30 * n}.prom").write_text(advancing(VLLM, n))
        (folder / f"10.0.0.2:9400@20260501T12{n:02d}00Z.txt").write_text(DCGM)
    dataset = dataset_from_scrapes([folder], tmp_path / "ds")
    assert dataset.manifest.scrape_interval_seconds == 45  # the median of 30 s and 60 s gaps
    (up,) = [s for s in dataset.samples if s.name == "up" and s.labels["job"] == "vllm"]
    assert up.values.tolist() == [1.0, 1.0, 1.0]
    jobs = {s.labels["job"] for s in dataset.samples}
    assert jobs == {"vllm", "capture"}


def test_marked_errors_name_file_and_line(tmp_path: Path) -> None:
    saved = tmp_path / "s.prom"
    saved.write_text(f"# SCRAPE {T0} http://h:1/metrics\nm 1\n# SCRAPE yesterday http://h:1/m\n")
    with pytest.raises(DatasetError, match=rf"^{saved}:3: time 'yesterday' is not unix seconds"):
        read_scrape_files([saved])
    saved.write_text(f"m 0\n# SCRAPE {T0} http://h:1/metrics\nm 1\n")
    with pytest.raises(DatasetError, match=rf"^{saved}:1: text before the first '# SCRAPE'"):
        read_scrape_files([saved])
    saved.write_text(f"# SCRAPE {T0} http://h:1/metrics\nm 1\nm{{a=}} 2\n")
    with pytest.raises(DatasetError, match=rf"^{saved}:3: series m: expected label"):
        dataset_from_scrapes([saved], tmp_path / "ds")


def test_a_file_without_marker_or_time_in_its_name(tmp_path: Path) -> None:
    saved = tmp_path / "metrics.txt"
    saved.write_text(VLLM)
    with pytest.raises(DatasetError, match=r"metrics\.txt: no '# SCRAPE TIME TARGET' line"):
        read_scrape_files([saved])


def test_one_scrape_needs_an_interval(tmp_path: Path) -> None:
    saved = tmp_path / f"h:1@{T0}.prom"
    saved.write_text(VLLM)
    with pytest.raises(DatasetError, match="give --interval"):
        dataset_from_scrapes([saved], tmp_path / "ds")
    dataset = dataset_from_scrapes([saved], tmp_path / "ds", interval_s=15)
    assert dataset.manifest.window.start.timestamp() == T0


def _files_holding(folder: Path, text: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_a_password_in_a_file_name_is_refused_unechoed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "saved"
    folder.mkdir()
    for n in range(2):
        name = f"vllm=bob:hunter2@10.0.0.2:8000@{T0 + 30 * n}.prom"
        (folder / name).write_text(advancing(VLLM, n))
    out = tmp_path / "ds"
    assert main(["dataset", "from-scrapes", str(folder), "--out", str(out)]) == 2
    printed = "".join(capsys.readouterr())
    assert "hunter2" not in printed
    # Refused as a marker's credentials are, the file named with them hidden.
    shown = f"vllm=<credentials>@10.0.0.2:8000@{T0}.prom"
    assert f"{folder / shown}: the name's target holds credentials" in printed
    assert not out.exists()


def test_a_password_in_a_marked_file_name_is_never_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The markers say when and where; the name is only the file's, yet it is named in the
    # methodology, so the userinfo is hidden there.
    saved = tmp_path / f"vllm=bob:hunter2@10.0.0.2:8000@{T0}.prom"
    saved.write_text(
        "".join(
            f"# SCRAPE {T0 + 15 * n} vllm=http://10.0.0.2:8000/metrics\n{advancing(VLLM, n)}"
            for n in range(2)
        )
    )
    out = tmp_path / "ds"
    assert main(["dataset", "from-scrapes", str(saved), "--out", str(out)]) == 0
    assert "hunter2" not in "".join(capsys.readouterr())
    assert _files_holding(out, "hunter2") == []
    (method, *_) = read_dataset(out).manifest.methodology
    assert f"vllm=<credentials>@10.0.0.2:8000@{T0}.prom" in method
