"""parse_topology(): classes, NVLink groups and shapes of real ``nvidia-smi topo -m`` texts."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable

import pytest

from inference_obs.errors import TopologyError
from inference_obs.topology import (
    MAX_CLIQUE_STEPS,
    MAX_DEVICES,
    MAX_TEXT_CHARS,
    Interconnect,
    Parallelism,
    Path,
    Topology,
    parse_topology,
)

# As printed in a published H100 vs H200 write-up (8x H100 PCIe): NVLink pairs, PHB between.
H100_PAIRS = """
      GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7
GPU0    X   NV12   PHB   PHB   PHB   PHB   PHB   PHB
GPU1  NV12    X    PHB   PHB   PHB   PHB   PHB   PHB
GPU2   PHB   PHB    X   NV12   PHB   PHB   PHB   PHB
GPU3   PHB   PHB  NV12    X    PHB   PHB   PHB   PHB
GPU4   PHB   PHB   PHB   PHB    X   NV12   PHB   PHB
GPU5   PHB   PHB   PHB   PHB  NV12    X    PHB   PHB
GPU6   PHB   PHB   PHB   PHB   PHB   PHB    X   NV12
GPU7   PHB   PHB   PHB   PHB   PHB   PHB  NV12    X
"""

# An HGX box behind NVSwitch, laid out as recent drivers print it: tabs, two NIC columns and
# rows, three affinity columns (GPU NUMA ID is N/A), then the legends after a blank line.
_AFFINITY = ["0-47,96-143\t0\t\tN/A"] * 4 + ["48-95,144-191\t1\t\tN/A"] * 4
_NICS = [["PXB", "SYS"]] * 4 + [["SYS", "PXB"]] * 4
NV18_MESH = "\n".join(
    [
        "\t" + "\t".join(f"GPU{i}" for i in range(8)) + "\tNIC0\tNIC1\tCPU Affinity"
        "\tNUMA Affinity\tGPU NUMA ID",
        *(
            f"GPU{i}\t" + "\t".join(" X " if j == i else "NV18" for j in range(8)) + "\t"
            + "\t".join(_NICS[i]) + "\t" + _AFFINITY[i]
            for i in range(8)
        ),
        "NIC0\t" + "\t".join(["PXB"] * 4 + ["SYS"] * 4) + "\t X \tSYS",
        "NIC1\t" + "\t".join(["SYS"] * 4 + ["PXB"] * 4) + "\tSYS\t X ",
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
        "",
        "NIC Legend:",
        "",
        "  NIC0: mlx5_0",
        "  NIC1: mlx5_1",
        "",
    ]
)  # fmt: skip

# Four workstation cards without NVLink: two per CPU socket.
PCIE_FOUR = """\
        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NODE    SYS     SYS     0-31    0               N/A
GPU1    NODE     X      SYS     SYS     0-31    0               N/A
GPU2    SYS     SYS      X      NODE    32-63   1               N/A
GPU3    SYS     SYS     NODE     X      32-63   1               N/A

Legend:
  X    = Self
"""


def _shapes(box: Topology) -> dict[tuple[str, int], str]:
    return {(s.parallelism.value, s.gpus): s.path.value for s in box.shapes}


def test_h100_write_up_matrix_is_nvlink_pairs_with_pcie_between() -> None:
    box = parse_topology(H100_PAIRS)
    assert box.interconnect is Interconnect.NVLINK_ISLANDS
    assert box.gpu_count == 8
    assert box.nics == ()
    assert box.nvlink_groups == (
        ("GPU0", "GPU1"), ("GPU2", "GPU3"), ("GPU4", "GPU5"), ("GPU6", "GPU7"),
    )  # fmt: skip
    assert box.largest_nvlink_clique == 2
    assert box.links[0] == ("X", "NV12", "PHB", "PHB", "PHB", "PHB", "PHB", "PHB")
    assert box.links[3][2] == "NV12"
    # TP 2 fits one pair; TP 4 and 8 must join pairs over PHB; all-to-all lacks peer access.
    assert _shapes(box) == {
        ("tensor", 2): "nvlink", ("tensor", 4): "pcie", ("tensor", 8): "pcie",
        ("data_expert", 2): "nvlink", ("data_expert", 4): "pcie", ("data_expert", 8): "pcie",
    }  # fmt: skip
    tp8 = box.shape(Parallelism.TENSOR, 8)
    assert not tp8.fits
    assert "crosses PCIe (PHB)" in tp8.text
    assert "peer access" in box.shape("data_expert", 8).text
    assert "NVLink pairs" in box.description
    assert "tensor parallel up to 2 stays on NVLink" in box.description
    assert box.shape("tensor", 1).path is Path.NONE
    assert box.shape("tensor", 16).path is Path.UNAVAILABLE


def test_nv18_mesh_with_nics_affinity_and_legend() -> None:
    box = parse_topology(NV18_MESH)
    assert box.interconnect is Interconnect.NVLINK_MESH
    assert box.gpus == tuple(f"GPU{i}" for i in range(8))
    assert box.nics == ("NIC0", "NIC1")
    # NIC columns are left out of the GPU matrix.
    assert all(len(row) == 8 for row in box.links)
    assert box.nvlink_groups == (box.gpus,)
    assert box.largest_nvlink_clique == 8
    assert set(_shapes(box).values()) == {"nvlink"}
    assert {k for k, _ in _shapes(box)} == {"tensor", "data_expert"}
    assert {n for _, n in _shapes(box)} == {2, 4, 8}
    assert "NVLink between every pair (NV18)" in box.description


def test_pcie_only_box() -> None:
    box = parse_topology(PCIE_FOUR)
    assert box.interconnect is Interconnect.PCIE_ONLY
    assert box.nvlink_groups == ()
    assert box.largest_nvlink_clique == 1
    assert _shapes(box) == {
        ("tensor", 2): "pcie", ("tensor", 4): "pcie",
        ("data_expert", 2): "pcie", ("data_expert", 4): "pcie",
    }  # fmt: skip
    assert "PCIe only (NODE, SYS)" in box.description
    assert "no NVLink peer paths" in box.description


def test_partial_nvlink_and_single_gpu_and_old_soc_code() -> None:
    # A ring of four: each GPU on NVLink with two neighbours, never with the opposite one.
    ring = parse_topology(
        "     GPU0 GPU1 GPU2 GPU3\n"
        "GPU0  X   NV2  SOC  NV2\n"
        "GPU1 NV2   X   NV2  SOC\n"
        "GPU2 SOC  NV2   X   NV2\n"
        "GPU3 NV2  SOC  NV2   X\n"
    )
    assert ring.interconnect is Interconnect.NVLINK_PARTIAL
    assert ring.largest_nvlink_clique == 2
    assert ring.nvlink_groups == (("GPU0", "GPU1", "GPU2", "GPU3"),)
    assert ring.links[0][2] == "SYS"  # old drivers' SOC is today's SYS
    assert ring.shape("tensor", 4).path is Path.PCIE
    one = parse_topology("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-7\t0\n")
    assert one.interconnect is Interconnect.SINGLE_GPU
    assert one.shapes == ()


def test_topology_is_frozen() -> None:
    box = parse_topology(H100_PAIRS)
    with pytest.raises(ValueError, match="frozen"):
        box.interconnect = Interconnect.PCIE_ONLY  # type: ignore[misc]


_ROWS = H100_PAIRS.strip("\n").splitlines()  # header on line 1 once the text is stripped


def _with(line: int, text: str) -> str:
    rows = list(_ROWS)
    rows[line - 1] = text
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"line 1: no header"),
        ("\n\nGPU0  X  NV12\n", r"line 3: no header"),
        ("hello world\n", r"line 1: no header"),
        (_with(4, "GPU2   PHB   PHB    X   NV12   PHB   PHB   PHB"), r"line 4: .*7 link cells.*8"),
        (
            _with(5, "GPU3   PHB   PHB  NV12    X    PHB   PHB   PHB   PHB   PHB"),
            r"line 5: .*9 link",
        ),
        (
            _with(3, "GPU1  NV12    X    PHB   PHB   PHB   PHB   PHB   NVX"),
            r"line 3: unknown .*'NVX'",
        ),
        (_with(6, "GPU4   PHB   PHB   PHB   PHB   PHB   NV12   PHB   PHB"), r"line 6: GPU4's own"),
        (_with(6, "GPU4   PHB   PHB   PHB   PHB    X      X    PHB   PHB"), r"line 6: X outside"),
        (_with(4, "GPU2   PHB   NV12    X   NV12   PHB   PHB   PHB   PHB"), r"line 4: .*symmetric"),
        (_with(9, "GPU6   PHB   PHB   PHB   PHB   PHB   PHB  NV12    X"), r"line 9: row 'GPU6'"),
        ("\n".join(_ROWS[:7]) + "\n\nLegend:\n", r"line 8: no row for GPU6"),
        ("\n".join(_ROWS) + "\nGPU8 X\n", r"line 10: a row after the last"),
    ],
)
def test_malformed_text_names_the_line(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        parse_topology(text)


def test_asymmetry_names_both_lines() -> None:
    with pytest.raises(TopologyError) as info:
        parse_topology(_with(4, "GPU2   PHB   NV12    X   NV12   PHB   PHB   PHB   PHB"))
    message = str(info.value)
    assert "GPU2 -> GPU1 is NV12" in message
    assert "GPU1 -> GPU2 (line 3) is PHB" in message
    assert isinstance(info.value, ValueError)


def _matrix(n: int, linked: Callable[[int, int], bool]) -> str:
    """An ``nvidia-smi topo -m`` text of ``n`` GPUs, NV4 where ``linked``, SYS elsewhere."""
    names = [f"GPU{i}" for i in range(n)]
    lines = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity"]
    for i in range(n):
        cells = ["X" if i == j else "NV4" if linked(i, j) else "SYS" for j in range(n)]
        lines.append(f"{names[i]}\t" + "\t".join(cells) + "\t0-31\t0")
    return "\n".join(lines) + "\n"


def _linked_in(pairs: set[tuple[int, int]]) -> Callable[[int, int], bool]:
    return lambda i, j: (min(i, j), max(i, j)) in pairs


def _all_but_partner(i: int, j: int) -> bool:
    # GPUs 2k and 2k+1 are not linked; every other pair is.
    return i // 2 != j // 2


def test_a_48_gpu_matrix_with_many_groups_is_read_in_bounded_time() -> None:
    # Every pair linked but 24 disjoint partner pairs: a group may hold one GPU of each
    # pair, so the largest fully linked group is 24 GPUs; there are 2^24 such groups,
    # which the recursive search of every maximal group went through (minutes on main).
    start = time.perf_counter()
    box = parse_topology(_matrix(48, _all_but_partner))
    assert time.perf_counter() - start < 5.0
    assert box.largest_nvlink_clique == 24
    assert box.interconnect is Interconnect.NVLINK_PARTIAL
    assert box.shape("tensor", 24).path is Path.NVLINK
    assert box.shape("tensor", 48).path is Path.PCIE


def test_the_largest_group_is_exact_on_small_graphs() -> None:
    # Against every subset of GPUs, on seeded random link patterns of up to 10 GPUs.
    rng = random.Random(11)
    for _ in range(150):
        n, p = rng.randint(2, 10), rng.random()
        linked = {(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p}
        box = parse_topology(_matrix(n, _linked_in(linked)))
        expected = max(
            len(group)
            for k in range(1, n + 1)
            for group in itertools.combinations(range(n), k)
            if all(pair in linked for pair in itertools.combinations(group, 2))
        )
        assert box.largest_nvlink_clique == expected


def test_a_graph_too_irregular_to_search_is_refused_naming_the_limit() -> None:
    rng = random.Random(7)
    linked = {(i, j) for i in range(120) for j in range(i + 1, 120) if rng.random() < 0.8}
    start = time.perf_counter()
    with pytest.raises(TopologyError, match=f"within {MAX_CLIQUE_STEPS:,} search steps"):
        parse_topology(_matrix(120, _linked_in(linked)))
    assert time.perf_counter() - start < 5.0


def test_a_matrix_of_more_devices_than_the_limit_is_refused_naming_it() -> None:
    with pytest.raises(TopologyError, match=f"300 devices, more than are read \\({MAX_DEVICES}"):
        parse_topology(_matrix(300, lambda i, j: True))


def test_a_1100_gpu_mesh_is_refused_by_its_size() -> None:
    # On main the search recursed once per GPU: RecursionError.
    with pytest.raises(TopologyError, match="more than are read"):
        parse_topology(_matrix(1100, lambda i, j: True))


def test_a_mesh_at_the_limit_is_read_in_time_linear_in_its_text() -> None:
    # The text grows with the square of the GPUs: 4 times the cells at twice the GPUs.
    small, large = (
        _matrix(MAX_DEVICES // 2, lambda i, j: True),
        _matrix(MAX_DEVICES, lambda i, j: True),
    )
    parse_topology(small)
    seconds = []
    for text in (small, large):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            box = parse_topology(text)
            best = min(best, time.perf_counter() - start)
        seconds.append(best)
    assert box.largest_nvlink_clique == MAX_DEVICES
    assert box.interconnect is Interconnect.NVLINK_MESH
    assert seconds[1] / seconds[0] < 8.0


def test_a_text_past_the_size_limit_is_refused_naming_it() -> None:
    text = H100_PAIRS + "\nLegend:\n" + "  X    = Self\n" * (MAX_TEXT_CHARS // 10)
    with pytest.raises(TopologyError, match=f"more than are read \\({MAX_TEXT_CHARS:,}"):
        parse_topology(text)
