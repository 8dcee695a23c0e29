"""How a box's GPUs are wired, read from ``nvidia-smi topo -m``, and what that allows.

:func:`parse_topology` reads the text the command prints: a header naming
the devices (``GPU0 ... NIC0 ...`` then ``CPU Affinity``, ``NUMA Affinity``,
``GPU NUMA ID``), one row per device with a link code per column and the
affinities after them, then a blank line and the legends, which are ignored.
The link codes, nearest first:

- ``X``: the device itself (the diagonal);
- ``NV#``: a bonded set of ``#`` NVLinks;
- ``PIX``: at most one PCIe bridge; ``PXB``: several PCIe bridges;
- ``PHB``: through a PCIe host bridge (typically the CPU);
- ``NODE``: between PCIe host bridges within a NUMA node;
- ``SYS`` (``SOC`` in old drivers): across the link between NUMA nodes.

From the GPU-to-GPU links it classifies the box (:class:`Interconnect`) and
says, for each group size that tiles it, whether a tensor-parallel
all-reduce or a data/expert-parallel all-to-all stays on NVLink
(:class:`Shape`). A published H100 vs H200 write-up shows why this decides
a serving configuration: on eight H100 PCIe cards in NVLink pairs, tensor
parallel beyond 2 crosses PCIe and data-parallel plus expert-parallel
shapes lack the peer access they need, while an NVSwitch box has neither
limit.

Examples
--------
>>> text = '''
...         GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity
... GPU0     X      NV12    PHB     PHB     0-31    0
... GPU1    NV12     X      PHB     PHB     0-31    0
... GPU2    PHB     PHB      X      NV12    0-31    0
... GPU3    PHB     PHB     NV12     X      0-31    0
...
... Legend:
...   X    = Self
... '''
>>> box = parse_topology(text)
>>> box.interconnect.value, box.gpu_count, box.nvlink_groups
('nvlink_islands', 4, (('GPU0', 'GPU1'), ('GPU2', 'GPU3')))
>>> for s in box.shapes:
...     print(s.parallelism.value, s.gpus, s.path.value)
tensor 2 nvlink
tensor 4 pcie
data_expert 2 nvlink
data_expert 4 pcie
>>> box.shape("tensor", 8).path.value
'unavailable'
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.errors import TopologyError

__all__ = [
    "MAX_CLIQUE_STEPS",
    "MAX_DEVICES",
    "MAX_TEXT_CHARS",
    "Interconnect",
    "Parallelism",
    "Path",
    "Shape",
    "Topology",
    "parse_topology",
]

# PCIe codes from nearest to farthest; SOC is the name old drivers gave SYS.
PCIE_CODES: tuple[str, ...] = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
_NVLINK = re.compile(r"NV\d+")
# Where the affinity columns start in the header: device names stop there.
_AFFINITY = re.compile(r"\b(CPU Affinity|NUMA Affinity|GPU NUMA ID)\b")
_GPU = re.compile(r"GPU\d+")
# A link cell is a word; affinity values (0-31,64-95 / 0 / N/A) start with a digit or N/A.
_CELL = re.compile(r"[A-Za-z][A-Za-z0-9#]*")
_DECLARED_CODES = re.compile(r"\b(NV\d+|PIX|PXB|PHB|NODE|SYS)\b")

#: Devices (GPUs and NICs) a matrix may name. The matrix has one cell per pair,
#: so its text grows with the square of this; ``nvidia-smi`` shows one node,
#: which holds at most 16 GPUs and as many NICs today.
MAX_DEVICES: Final = 256

#: Characters of the text. A matrix of :data:`MAX_DEVICES` devices with its
#: affinity columns is about 450 KB; the legends after it are short.
MAX_TEXT_CHARS: Final = 2 * 1024 * 1024

#: Branches the search for the largest fully NVLinked group may take (see
#: ``_largest_clique``). A mesh or NVLink islands need none, a hybrid cube
#: mesh of 8 GPUs a few dozen; a graph that needs more is refused with a
#: TopologyError rather than searched for minutes (the problem is NP-hard).
MAX_CLIQUE_STEPS: Final = 20_000


class Interconnect(StrEnum):
    """How the GPUs of a box reach each other."""

    SINGLE_GPU = "single_gpu"
    #: NVLink between every pair of GPUs (NVSwitch, or a bridged pair).
    NVLINK_MESH = "nvlink_mesh"
    #: Groups with NVLink between every pair inside (pairs, typically), PCIe between groups.
    NVLINK_ISLANDS = "nvlink_islands"
    #: NVLink between some pairs that do not form such groups (e.g. a hybrid cube mesh).
    NVLINK_PARTIAL = "nvlink_partial"
    PCIE_ONLY = "pcie_only"


# Words of a declared interconnect and the class each names.
_CLASS_WORDS = (
    (re.compile(r"nvswitch|mesh", re.IGNORECASE), Interconnect.NVLINK_MESH),
    (re.compile(r"pair|bridge|island", re.IGNORECASE), Interconnect.NVLINK_ISLANDS),
    (re.compile(r"^(?!.*\bnv).*pcie", re.IGNORECASE), Interconnect.PCIE_ONLY),
)


class Parallelism(StrEnum):
    """The collective a parallel group runs on every step."""

    #: All-reduce among the tensor-parallel ranks, twice per transformer layer.
    TENSOR = "tensor"
    #: All-to-all among every rank of data-parallel engines with expert parallelism.
    DATA_EXPERT = "data_expert"


class Path(StrEnum):
    """What a group's collective travels over, placed as well as the box allows."""

    NONE = "none"  # one GPU: nothing is exchanged
    NVLINK = "nvlink"  # every pair of the group on NVLink
    PCIE = "pcie"  # some pair of the group only on PCIe
    UNAVAILABLE = "unavailable"  # more GPUs than the box has


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Shape(_Model):
    """One parallel group size on one box, and the path its collective takes."""

    parallelism: Parallelism
    gpus: int = Field(ge=1, description="GPUs in the group.")
    path: Path
    text: str = Field(description="The same in plain words.")

    @property
    def fits(self) -> bool:
        """Whether the group's collective stays on NVLink (or needs none)."""
        return self.path in (Path.NONE, Path.NVLINK)


class Topology(_Model):
    """A box's GPU interconnect as ``nvidia-smi topo -m`` shows it."""

    interconnect: Interconnect
    gpus: tuple[str, ...] = Field(description="GPU names in order (GPU0, GPU1, ...).")
    nics: tuple[str, ...] = Field(description="Other devices in the matrix (NICs).")
    links: tuple[tuple[str, ...], ...] = Field(description="GPU-to-GPU link codes, X diagonal.")
    nvlink_groups: tuple[tuple[str, ...], ...] = Field(
        description="GPUs joined by NVLink paths (connected components of 2 or more)."
    )
    largest_nvlink_clique: int = Field(
        ge=1, description="Most GPUs with NVLink between every pair of them."
    )
    shapes: tuple[Shape, ...] = Field(description="Each parallelism at each size dividing the box.")
    description: str = Field(description="The interconnect and its shapes in plain words.")

    @property
    def gpu_count(self) -> int:
        """Number of GPUs in the matrix."""
        return len(self.gpus)

    def shape(self, parallelism: Parallelism | str, gpus: int) -> Shape:
        """The path of a ``gpus``-GPU group running ``parallelism`` on this box.

        Placement is assumed the best the box allows: the group stays on
        NVLink when some ``gpus`` GPUs have NVLink between every pair.
        """
        n, clique = self.gpu_count, self.largest_nvlink_clique
        return _shape(Parallelism(parallelism), gpus, n, clique, _pcie_codes(self.links))

    def groups(
        self, tensor_parallel: int, data_parallel: int = 1, expert_parallel: bool = False
    ) -> tuple[Shape, ...]:
        """The groups an engine configuration exchanges in, on this box.

        The tensor-parallel group; with expert parallelism across several
        data-parallel engines, also the all-to-all among all their GPUs.

        Examples
        --------
        >>> box = parse_topology("  GPU0 GPU1\\nGPU0 X NV4\\nGPU1 NV4 X\\n")
        >>> [(g.parallelism.value, g.gpus, g.path.value) for g in box.groups(1, 2, True)]
        [('tensor', 1, 'none'), ('data_expert', 2, 'nvlink')]
        """
        groups = [self.shape(Parallelism.TENSOR, tensor_parallel)]
        if expert_parallel and data_parallel > 1:
            groups.append(self.shape(Parallelism.DATA_EXPERT, data_parallel * tensor_parallel))
        return tuple(groups)

    def agrees_with(self, declared: str) -> bool | None:
        """Whether a declared interconnect, in words, agrees with this box.

        ``NVSwitch``/``mesh`` name a full mesh, ``pairs``/``bridge`` NVLink
        islands, ``PCIe`` without ``NV`` PCIe only; every link code named
        (``NV12``, ``PHB``, ...) must be in the matrix. None when the text
        names neither a class nor a code.
        """
        named = {kind for words, kind in _CLASS_WORDS if words.search(declared)}
        codes = set(_DECLARED_CODES.findall(declared))
        if not (named or codes):
            return None
        present = {c for row in self.links for c in row}
        return (not named or self.interconnect in named) and codes <= present


def _pcie_codes(links: tuple[tuple[str, ...], ...]) -> str:
    found = {c for row in links for c in row if c in PCIE_CODES}
    return ", ".join(c for c in PCIE_CODES if c in found)


def _nvlink_codes(links: tuple[tuple[str, ...], ...]) -> str:
    found = {c for row in links for c in row if _NVLINK.fullmatch(c)}
    return ", ".join(sorted(found, key=lambda c: int(c[2:])))


def _shape(parallelism: Parallelism, gpus: int, n: int, clique: int, pcie: str) -> Shape:
    """The path of a ``gpus``-GPU group on ``n`` GPUs whose largest NVLink clique is ``clique``."""
    if gpus < 1:
        raise TopologyError(f"a parallel group needs at least 1 GPU, not {gpus}")
    over = f"over {gpus} GPU{'s' if gpus > 1 else ''}"
    what = (
        f"tensor parallel {over}"
        if parallelism is Parallelism.TENSOR
        else f"data/expert-parallel all-to-all {over}"
    )
    if gpus == 1:
        path, text = Path.NONE, "exchanges nothing"
    elif gpus > n:
        path, text = Path.UNAVAILABLE, f"needs more GPUs than the {n} on this box"
    elif gpus <= clique:
        path, text = Path.NVLINK, "stays on NVLink"
    elif parallelism is Parallelism.TENSOR:
        path, text = Path.PCIE, f"crosses PCIe ({pcie}): no NVLink between every pair"
    else:
        path, text = (
            Path.PCIE,
            f"lacks NVLink peer access between every pair: crosses PCIe ({pcie})",
        )
    return Shape(parallelism=parallelism, gpus=gpus, path=path, text=f"{what} {text}")


def _largest_clique(adjacent: list[set[int]]) -> int:
    """Size of the largest set of GPUs all pairwise adjacent.

    Where every NVLink group is a clique (a mesh, islands, no NVLink) that is
    the largest group, in linear time. Otherwise a branch and bound search
    (Tomita's MCQ: a branch whose candidates a greedy colouring shows cannot
    beat the best found is cut), iterative, on bit sets, and stopped after
    :data:`MAX_CLIQUE_STEPS`
    branches with a TopologyError: the problem is NP-hard in general, and a
    real partial NVLink box (a hybrid cube mesh of 8) needs a few dozen.
    """
    groups = _components(adjacent)
    if all(len(adjacent[v]) == len(g) - 1 for g in groups for v in g):
        return max((len(g) for g in groups), default=1 if adjacent else 0)
    masks = [sum(1 << u for u in near) for near in adjacent]
    best, steps = 1, 0
    # Each branch: (GPUs chosen so far, GPUs linked to all of them, not yet tried).
    stack = [(0, (1 << len(adjacent)) - 1)]
    while stack:
        size, candidates = stack.pop()
        steps += 1
        if steps > MAX_CLIQUE_STEPS:
            raise TopologyError(
                f"the NVLink links of these {len(adjacent)} GPUs are too irregular to find "
                f"the largest fully linked group within {MAX_CLIQUE_STEPS:,} search steps"
            )
        best = max(best, size)
        # Colours of a greedy colouring bound the clique among the candidates.
        if size + _colours(candidates, masks) <= best:
            continue
        branches = []
        for v in _members(candidates):
            branches.append((size + 1, candidates & masks[v]))
            candidates &= ~(1 << v)
        stack += reversed(branches)  # the first, with the most candidates, is searched first
    return best


def _colours(candidates: int, masks: list[int]) -> int:
    """Colours a greedy colouring gives ``candidates`` (no two linked GPUs share one)."""
    colours = 0
    while candidates:
        colours += 1
        free = candidates
        while free:
            v = (free & -free).bit_length() - 1
            candidates &= ~(1 << v)
            free &= ~(1 << v) & ~masks[v]
    return colours


def _members(bits: int) -> list[int]:
    """The indices of the set bits of ``bits``."""
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


def _components(adjacent: list[set[int]]) -> list[list[int]]:
    seen: set[int] = set()
    groups = []
    for start in range(len(adjacent)):
        if start in seen or not adjacent[start]:
            continue
        stack, group = [start], set()
        while stack:
            v = stack.pop()
            if v not in group:
                group.add(v)
                stack.extend(adjacent[v] - group)
        seen |= group
        groups.append(sorted(group))
    return groups


def _classify(adjacent: list[set[int]]) -> Interconnect:
    n = len(adjacent)
    groups = _components(adjacent)
    if n == 1:
        return Interconnect.SINGLE_GPU
    if not groups:
        return Interconnect.PCIE_ONLY
    if all(len(adjacent[v]) == n - 1 for v in range(n)):
        return Interconnect.NVLINK_MESH
    cliques = all(len(adjacent[v]) == len(g) - 1 for g in groups for v in g)
    return Interconnect.NVLINK_ISLANDS if cliques else Interconnect.NVLINK_PARTIAL


def _describe(
    kind: Interconnect,
    links: tuple[tuple[str, ...], ...],
    groups: tuple[tuple[str, ...], ...],
    clique: int,
) -> str:
    n, nv, pcie = len(links), _nvlink_codes(links), _pcie_codes(links)
    if kind is Interconnect.SINGLE_GPU:
        return "1 GPU: nothing is exchanged between GPUs."
    if kind is Interconnect.PCIE_ONLY:
        return (
            f"{n} GPUs joined by PCIe only ({pcie}): every tensor-parallel all-reduce and "
            "data/expert-parallel all-to-all crosses PCIe; no NVLink peer paths."
        )
    if kind is Interconnect.NVLINK_MESH:
        return (
            f"{n} GPUs with NVLink between every pair ({nv}): tensor parallel up to {n} and "
            f"data/expert-parallel all-to-all over up to {n} GPUs stay on NVLink."
        )
    named = "NVLink pairs" if {len(g) for g in groups} == {2} else "NVLink groups"
    if kind is Interconnect.NVLINK_PARTIAL:
        named = "NVLink between some pairs"
    members = "; ".join("+".join(g) for g in groups)
    return (
        f"{n} GPUs in {named} ({members}; {nv}), PCIe ({pcie}) elsewhere: tensor parallel up "
        f"to {clique} stays on NVLink, beyond {clique} crosses PCIe; data/expert-parallel "
        f"all-to-all has no NVLink peer access beyond {clique} GPUs."
    )


def _is_code(cell: str) -> bool:
    return cell == "X" or cell in PCIE_CODES or _NVLINK.fullmatch(cell) is not None


def _read_row(number: int, line: str, devices: list[str], expected: str) -> list[str]:
    tokens = line.split()
    if tokens[0] != expected:
        raise TopologyError(f"line {number}: row {tokens[0]!r} where {expected!r} was expected")
    cells: list[str] = []
    for token in tokens[1:]:
        if not _CELL.fullmatch(token):
            break  # the affinity columns start here
        cells.append(token)
    if len(cells) != len(devices):
        raise TopologyError(
            f"line {number}: row {expected} has {len(cells)} link cells, the header names "
            f"{len(devices)} devices (a ragged row)"
        )
    for device, cell in zip(devices, cells, strict=True):
        if not _is_code(cell):
            raise TopologyError(
                f"line {number}: unknown link code {cell!r} in row {expected}, column {device} "
                f"(known: X, NV#, {', '.join(PCIE_CODES)})"
            )
    return ["SYS" if c == "SOC" else c for c in cells]


def _check_row(
    number: int, row: int, cells: list[str], rows: list[tuple[int, list[str]]], devices: list[str]
) -> None:
    """Diagonal X, no X elsewhere, and agreement with every earlier row (symmetry)."""
    name = devices[row]
    for column, cell in enumerate(cells):
        if column == row and cell != "X":
            raise TopologyError(
                f"line {number}: {name}'s own cell is {cell!r}: the diagonal must be X"
            )
        if column != row and cell == "X":
            raise TopologyError(
                f"line {number}: X outside the diagonal ({name} -> {devices[column]})"
            )
        if column < row:
            other_line, other = rows[column]
            if other[row] != cell:
                raise TopologyError(
                    f"line {number}: {name} -> {devices[column]} is {cell} but "
                    f"{devices[column]} -> {name} (line {other_line}) is {other[row]}: the "
                    "matrix must be symmetric"
                )


def parse_topology(text: str) -> Topology:
    """Read the output of ``nvidia-smi topo -m``.

    Parameters
    ----------
    text
        The command's output: the header line first (blank lines before it
        are skipped), one row per device, then anything after a blank line
        or a ``Legend`` line (ignored).

    Returns
    -------
    Topology
        The GPU link matrix, its class, NVLink groups and the path of each
        parallel shape; NIC rows and columns are checked, then left out.

    Raises
    ------
    TopologyError
        Naming the line: no header, a row out of order or missing, a ragged
        row, an unknown code, a diagonal that is not X, or an asymmetric matrix;
        or a text past :data:`MAX_TEXT_CHARS`, :data:`MAX_DEVICES` or :data:`MAX_CLIQUE_STEPS`.
    """
    if len(text) > MAX_TEXT_CHARS:
        raise TopologyError(
            f"line 1: {len(text):,} characters, more than are read ({MAX_TEXT_CHARS:,}; "
            "nvidia-smi topo -m prints one node's matrix)"
        )
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise TopologyError("line 1: no header: the text is empty")
    header = lines[first]
    devices = _AFFINITY.split(header, maxsplit=1)[0].split()
    if not devices or _GPU.fullmatch(devices[0]) is None or any(map(_is_code, devices)):
        raise TopologyError(
            f"line {first + 1}: no header: expected the device columns (GPU0 GPU1 ...), "
            f"got {header.strip()!r}"
        )
    if len(devices) > MAX_DEVICES:
        raise TopologyError(
            f"line {first + 1}: the header names {len(devices)} devices, more than are read "
            f"({MAX_DEVICES}; nvidia-smi shows one node's devices)"
        )
    rows: list[tuple[int, list[str]]] = []
    for index in range(first + 1, len(lines)):
        line = lines[index]
        if not line.strip() or line.strip().startswith("Legend"):
            break
        if len(rows) == len(devices):
            raise TopologyError(
                f"line {index + 1}: a row after the last device the header names "
                f"({devices[-1]}): {line.strip()!r}"
            )
        cells = _read_row(index + 1, line, devices, devices[len(rows)])
        _check_row(index + 1, len(rows), cells, rows, devices)
        rows.append((index + 1, cells))
    if len(rows) < len(devices):
        raise TopologyError(
            f"line {first + len(rows) + 2}: no row for {devices[len(rows)]}: the matrix ends "
            f"after {len(rows)} of {len(devices)} rows"
        )
    gpu_at = [i for i, d in enumerate(devices) if _GPU.fullmatch(d)]
    gpus = tuple(devices[i] for i in gpu_at)
    links = tuple(tuple(rows[i][1][j] for j in gpu_at) for i in gpu_at)
    adjacent = [{j for j, c in enumerate(row) if _NVLINK.fullmatch(c)} for row in links]
    groups = tuple(tuple(gpus[v] for v in g) for g in _components(adjacent))
    kind, clique = _classify(adjacent), _largest_clique(adjacent)
    sizes = [k for k in range(2, len(gpus) + 1) if len(gpus) % k == 0]
    pcie = _pcie_codes(links)
    return Topology(
        interconnect=kind,
        gpus=gpus,
        nics=tuple(d for d in devices if not _GPU.fullmatch(d)),
        links=links,
        nvlink_groups=groups,
        largest_nvlink_clique=clique,
        shapes=tuple(_shape(p, k, len(gpus), clique, pcie) for p in Parallelism for k in sizes),
        description=_describe(kind, links, groups, clique),
    )
