"""samples.om read in one streamed pass, and the columnar cache of large ones."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from inference_obs.errors import DatasetError, TimeBudgetExceeded
from inference_obs.samples import SampleSet, Series
from inference_obs.source.dataset.manifest import Manifest
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.dataset.samples_file import SampleCache
from inference_obs.source.dataset.writer import write_dataset
from inference_obs.source.openmetrics.reader import OpenMetricsReader, read_openmetrics
from tests.source.test_dataset import MANIFEST, START


def _series() -> list[Series]:
    times = START + 15.0 * np.arange(40) + 0.001
    return [
        Series("m", {"pod": f"a-{i}", "le": le}, times, np.arange(40) * (i + 1) + j)
        for i in range(3)
        for j, le in enumerate(("1.0", "+Inf"))
    ] + [Series("g", {"pod": "a-0", "v": 'q"\\\n é'}, times, np.full(40, np.nan))]


def _write(path: Path) -> Dataset:
    return write_dataset(path, Manifest.model_validate(MANIFEST), _series())


def _same(a: SampleSet, b: SampleSet) -> None:
    assert a.names == b.names
    assert a.labels == b.labels
    for x, y in ((a.offsets, b.offsets), (a.t_ms, b.t_ms), (a.values, b.values)):
        assert x.dtype == y.dtype
        assert np.array_equal(x, y, equal_nan=True)


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.npz")) if cache.exists() else []


def _replace_samples(path: Path, text: bytes, *, update_manifest: bool) -> None:
    (path / "samples.om").write_bytes(text)
    if update_manifest:
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        manifest["files"]["samples.om"] = hashlib.sha256(text).hexdigest()
        (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def test_a_large_file_is_parsed_once_then_read_from_the_cache(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds")
    cache = SampleCache(tmp_path / "cache", min_bytes=0)
    first = read_dataset(written.path, cache=cache)
    (entry,) = _entries(tmp_path / "cache")
    assert entry.name.startswith(written.manifest.files["samples.om"])
    again = read_dataset(written.path, cache=cache)
    _same(first.samples, written.samples)
    _same(again.samples, written.samples)
    assert not again.samples.values.flags.writeable
    assert _entries(tmp_path / "cache") == [entry]


def test_small_files_and_no_cache_write_nothing(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds")
    read_dataset(written.path, cache=SampleCache(tmp_path / "small"))
    read_dataset(written.path, cache=None)
    assert _entries(tmp_path / "small") == []


def test_the_cache_never_answers_for_a_changed_file(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds")
    cache = SampleCache(tmp_path / "cache", min_bytes=0)
    read_dataset(written.path, cache=cache)
    text = (written.path / "samples.om").read_bytes()
    _replace_samples(written.path, text.replace(b" 1.0 ", b" 9.0 ", 1), update_manifest=False)
    with pytest.raises(DatasetError, match=r"samples\.om: SHA-256 is [0-9a-f]{64} but"):
        read_dataset(written.path, cache=cache)


def test_a_damaged_entry_is_ignored_and_rewritten(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds")
    cache = SampleCache(tmp_path / "cache", min_bytes=0)
    read_dataset(written.path, cache=cache)
    (entry,) = _entries(tmp_path / "cache")
    whole = entry.read_bytes()
    for damaged in (whole[: len(whole) // 2], whole[:-40] + b"\0" * 40, b"not a zip"):
        entry.write_bytes(damaged)
        _same(read_dataset(written.path, cache=cache).samples, written.samples)
        assert entry.read_bytes() == whole


def test_an_unwritable_cache_only_costs_time(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds")
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory would be", encoding="utf-8")
    got = read_dataset(written.path, cache=SampleCache(blocked / "cache", min_bytes=0))
    _same(got.samples, written.samples)


def test_a_changed_file_is_reported_as_changed_before_its_text(tmp_path: Path) -> None:
    path = _write(tmp_path / "ds").path
    _replace_samples(path, b"m 1 1\nm 2\n# EOF\n", update_manifest=False)
    with pytest.raises(DatasetError, match=r"samples\.om: SHA-256 is [0-9a-f]{64} but"):
        read_dataset(path, cache=None)
    _replace_samples(path, b"m 1 1\nm 2\n# EOF\n", update_manifest=True)
    with pytest.raises(DatasetError, match=r"samples\.om:2: no timestamp"):
        read_dataset(path, cache=None)


def test_the_default_cache_follows_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert SampleCache().path() == tmp_path / "inference-obs" / "samples"


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 1 << 20])
def test_any_block_size_and_any_split_read_the_same(block_bytes: int) -> None:
    text = b"".join(
        [
            b"# TYPE h histogram\n",
            *(b'h_bucket{le="1.0"} %d %d.0015\n' % (i, i) for i in range(30)),
            *(b'h_bucket{le="+Inf"} %d %d\n' % (i, i) for i in range(30)),
            b"h_sum 1.5 1\nh_sum NaN 2\n",
            *(b'g %d %d\ng{a="x y"} -Inf %d\n' % (i, i, i) for i in range(1, 9)),
            b"# EOF\n",
        ]
    )
    whole = read_openmetrics(text, source="s")
    for piece in (1, 5, 333):
        reader = OpenMetricsReader("s", block_bytes=block_bytes)
        for start in range(0, len(text), piece):
            reader.feed(text[start : start + piece])
        _same(reader.finish(), whole)


def test_streamed_problems_name_the_line_across_blocks() -> None:
    text = b"".join(b"m %d %d\n" % (i, i) for i in range(1, 200)) + b"m 1x 500\n# EOF\n"
    reader = OpenMetricsReader("s", block_bytes=64)
    with pytest.raises(DatasetError, match=r"^s:200: bad value '1x'"):
        reader.feed(text)


def _variant(path: Path, k: int) -> Dataset:
    """A dataset whose samples differ from the others' (so its cache entry does too)."""
    series = [Series(s.name, s.labels, s.timestamps, s.values + k) for s in _series()]
    return write_dataset(path, Manifest.model_validate(MANIFEST), series)


def test_entries_past_max_bytes_are_evicted_least_recently_used_first(tmp_path: Path) -> None:
    a, b, c = (_variant(tmp_path / name, k) for k, name in enumerate("abc"))
    unbounded = SampleCache(tmp_path / "cache", min_bytes=0)
    for dataset in (a, b):
        read_dataset(dataset.path, cache=unbounded)
    entries = {e.name.split("-")[0]: e for e in _entries(tmp_path / "cache")}
    digest = {d.path.name: d.manifest.files["samples.om"] for d in (a, b, c)}
    size = entries[digest["a"]].stat().st_size
    # a written long ago, b later; then a is read again (a cache hit marks it used).
    os.utime(entries[digest["a"]], (1_000, 1_000))
    os.utime(entries[digest["b"]], (2_000, 2_000))
    read_dataset(a.path, cache=unbounded)
    # Room for two entries: writing c's evicts b, the least recently used.
    two = SampleCache(tmp_path / "cache", min_bytes=0, max_bytes=2 * size + size // 2)
    read_dataset(c.path, cache=two)
    left = {e.name.split("-")[0] for e in _entries(tmp_path / "cache")}
    assert left == {digest["a"], digest["c"]}
    # The entry just written stays even when it alone is over the limit.
    read_dataset(b.path, cache=SampleCache(tmp_path / "cache", min_bytes=0, max_bytes=1))
    assert {e.name.split("-")[0] for e in _entries(tmp_path / "cache")} == {digest["b"]}


def _stamps(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.stamp")) if cache.exists() else []


# A deadline already passed stops any read of the text at its first block: a read that
# still succeeds did not read (hash) the file.
def _unread(path: Path, cache: SampleCache) -> Dataset:
    return read_dataset(path, cache=cache, deadline=time.monotonic() - 1.0)


def test_an_unchanged_file_is_vouched_for_by_its_stamp_without_hashing(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds")
    cache = SampleCache(tmp_path / "cache", min_bytes=0, settled_s=0.0)
    read_dataset(written.path, cache=cache)
    (stamp,) = _stamps(tmp_path / "cache")
    (entry,) = _entries(tmp_path / "cache")
    assert stamp.name.startswith(entry.stem + ".")
    _same(_unread(written.path, cache).samples, written.samples)
    stamp.unlink()  # without it the file is hashed, and the deadline stops that
    with pytest.raises(TimeBudgetExceeded):
        _unread(written.path, cache)


def test_a_changed_file_with_its_size_and_times_restored_is_hashed_again(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds")
    cache = SampleCache(tmp_path / "cache", min_bytes=0, settled_s=0.0)
    read_dataset(written.path, cache=cache)
    assert _stamps(tmp_path / "cache")
    file = written.path / "samples.om"
    before = file.stat()
    text = file.read_bytes()
    changed = text.replace(b" 1.0 ", b" 9.0 ", 1)
    assert changed != text
    assert len(changed) == len(text)
    with file.open("r+b") as same_inode:
        same_inode.write(changed)
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = file.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    with pytest.raises(DatasetError, match=r"samples\.om: SHA-256 is [0-9a-f]{64} but"):
        read_dataset(written.path, cache=cache)


def test_a_file_changed_just_before_its_hash_gets_no_stamp(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds")
    cache = SampleCache(tmp_path / "cache", min_bytes=0, settled_s=60.0)
    read_dataset(written.path, cache=cache)
    read_dataset(written.path, cache=cache)
    assert _entries(tmp_path / "cache")
    assert not _stamps(tmp_path / "cache")
    with pytest.raises(TimeBudgetExceeded):
        _unread(written.path, cache)


def test_a_copy_elsewhere_is_hashed_once_on_its_own(tmp_path: Path) -> None:
    written = _write(tmp_path / "ds")
    copy = tmp_path / "copy"
    shutil.copytree(written.path, copy)
    cache = SampleCache(tmp_path / "cache", min_bytes=0, settled_s=0.0)
    read_dataset(written.path, cache=cache)
    with pytest.raises(TimeBudgetExceeded):
        _unread(copy, cache)
    read_dataset(copy, cache=cache)
    assert len(_stamps(tmp_path / "cache")) == 2
    _same(_unread(copy, cache).samples, written.samples)


def test_stamps_go_with_their_evicted_entries(tmp_path: Path) -> None:
    a, b = (_variant(tmp_path / name, k) for k, name in enumerate("ab"))
    read_dataset(a.path, cache=SampleCache(tmp_path / "cache", min_bytes=0, settled_s=0.0))
    one = SampleCache(tmp_path / "cache", min_bytes=0, max_bytes=1, settled_s=0.0)
    read_dataset(b.path, cache=one)
    (entry,) = _entries(tmp_path / "cache")
    (stamp,) = _stamps(tmp_path / "cache")
    assert entry.name.startswith(b.manifest.files["samples.om"])
    assert stamp.name.startswith(entry.stem + ".")


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_an_entry_leaves_the_cyclic_collector_as_it_was(
    tmp_path: Path, enabled: bool
) -> None:
    written = _write(tmp_path / "ds")
    cache = SampleCache(tmp_path / "cache", min_bytes=0)
    read_dataset(written.path, cache=cache)  # parsed, then kept
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        _same(read_dataset(written.path, cache=cache).samples, written.samples)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
