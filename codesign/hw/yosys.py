"""Out-of-context Yosys synthesis for Xilinx parts: cell counts by resource category and logic depth.

Why Yosys and not Vivado: it is open, scriptable and fast enough to sweep a
parameter (e.g. the FP-MAC's MAX_FB) on any machine, which is what a relative
cost model needs. Its numbers are *pre-place-and-route estimates*: Vivado will
pack, replicate and optimise differently, so use them to compare
configurations, not to sign off a design.

Flow (one generated script per job, run in its own work directory)::

    read_verilog [-sv] <sources>            # -sv only for *.sv files
    chparam -set NAME VALUE <top>           # one per parameter
    synth_xilinx -family <f> -top <top> -flatten -noiopad -noclkbuf [-nodsp] [-abc9]
    tee -q -o stat.json stat -json          # machine-readable cell counts
    tee -q -o ltp.txt ltp -noff <comb>      # Yosys' longest topological path
    delete =A:blackbox =t:* %M %d           # keep only the library cells in use ...
    write_json netlist.json                 # ... so the netlist stays small

``-flatten`` because ``ltp`` only follows paths inside one module;
``-noiopad``/``-noclkbuf`` because a PE is a block inside a larger design, not
a chip top, so I/O buffers and BUFGs would be artefacts.

**Logic depth** (:class:`LogicDepth`) counts *cells* on the longest path
through the combinational part of the mapped netlist. Sequential cells
(flip-flops ``FD*``, latches ``LD*``, shift registers ``SRL*``, RAMs
``RAM*``/``URAM*``, ``FIFO*``) are cut points, so a path starts at a primary
input or a register output and ends at a register input or a primary output.
Every other cell on it counts 1: a LUT (or INV) level, a MUXF7/F8/F9, one
CARRY4/CARRY8 cell of a carry chain, and a DSP48 block as a whole (its
internal pipeline registers are not modelled). It is a unit-delay proxy
(cells, not ns); :attr:`LogicDepth.by_category` splits the path into LUT
levels, carry cells, wide muxes and DSPs so that a caller can weight them.

Two numbers are kept. Yosys 0.23's ``ltp`` models every cell as "each input
reaches each output"; for a CARRY4 that adds false paths (CO[0] does not
depend on S[3]). ``cells`` is therefore computed here from ``netlist.json``
with per-bit carry arcs (CO[i] and O[i] depend only on CI/CYINIT and inputs
0..i), and ``ltp_cells`` keeps Yosys' own figure as a cross-check: in a
loop-free netlist ``cells <= ltp_cells`` (ltp's arcs are a superset); so far
they have always been equal.

Loops: with the default ABC mapper, Yosys 0.23 mapped the FP-MAC at
MAX_FB=23 to a netlist with a *structural* loop, a LUT feeding S[9] of the
adder's comparator CARRY4 depends on that CARRY4's CO[10] (ABC sees carry
cells as opaque and merged nodes that are only functionally equivalent, so the
loop is functionally false). Both measures flag it (``loops``, ``ltp_loops``)
and neither is a longest path then. ``-abc9`` (``SynthJob.abc9``), which sees
the carry cells, produced no loop in the same design.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from codesign.hw.constants_gen import verilog_include_dir
from codesign.io.jsonfile import JsonFileError, load_json
from codesign.io.reports import write_text_atomic

# Families codesign's boards use. synth_xilinx knows more, but the cell-type
# categorisation below has been checked only against these two.
SUPPORTED_FAMILIES = ("xc7", "xcup")

# Flags every job passes to synth_xilinx (see the module docstring for why).
BASE_SYNTH_FLAGS = ("-flatten", "-noiopad", "-noclkbuf")

# Sequential cell types: cut points of the logic-depth search (ours and ltp's selection).
SEQUENTIAL_PATTERNS = ("FD*", "LD*", "SRL*", "RAM*", "URAM*", "FIFO*")

# LUT sites taken by one distributed-RAM primitive of 7-series / UltraScale+ (64 bits per LUT,
# dual-port and multi-port primitives replicate the storage).
_LUTRAM_SITES = {
    "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "RAM256X1S": 4, "RAM512X1S": 8,
    "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1D": 8,
    "RAM32M": 4, "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8,
}
# Block RAMs in 36 Kib units, the unit of the boards' ``bram_36k`` budget.
_BRAM_36K = {"RAMB36E1": 1.0, "RAMB36E2": 1.0, "RAMB18E1": 0.5, "RAMB18E2": 0.5, "FIFO36E1": 1.0,
             "FIFO36E2": 1.0, "FIFO18E1": 0.5, "FIFO18E2": 0.5}
_IO_TYPES = ("IBUF", "OBUF", "OBUFT", "IOBUF", "IBUFG", "BUFG", "BUFGCE", "BUFG_PS", "IBUFDS", "OBUFDS")
_LUT_TYPE = re.compile(r"^LUT([1-6])$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_LTP_HEADER = re.compile(r"^Longest topological path in (\S+) \(length=(\d+)\):", re.M)
_CARRY_WIDTH = {"CARRY4": 4, "CARRY8": 8}
LOG_TAIL_LINES = 25


class YosysError(RuntimeError):
    """Yosys failed or produced output this module cannot read; the message carries the log tail.

    A failed run also says which ``job`` it was, ``why`` in a few words and where its ``log`` is.
    """

    def __init__(self, message: str, *, job: "SynthJob | None" = None, why: str = "", log: Path | None = None):
        super().__init__(message)
        self.job, self.why, self.log = job, why, log


class YosysNotFoundError(YosysError, FileNotFoundError):
    """No yosys executable on PATH (or at the path given)."""


@dataclass(frozen=True, kw_only=True)
class SynthJob:
    """One synthesis run: Verilog ``sources`` with ``top`` and integer ``params`` for ``family``.

    ``params`` may be given as a mapping; it is stored as (name, value) pairs
    in the given order (the order of the ``chparam`` lines and of the slug).

    Validated on construction, so a sweep fails on a bad job before any
    Yosys process starts. ``nodsp`` forbids DSP48 inference (multipliers go to
    LUTs and carry chains); ``abc9`` selects Yosys' experimental timing-driven
    ABC9 mapper instead of the default ABC flow.
    """

    sources: tuple[Path, ...]
    top: str
    family: str
    params: tuple[tuple[str, int], ...] = ()
    nodsp: bool = False
    abc9: bool = False

    def __post_init__(self) -> None:
        sources = tuple(Path(source).resolve() for source in self.sources)
        if not sources:
            raise ValueError("SynthJob needs at least one Verilog source")
        for source in sources:
            if not source.is_file():
                raise FileNotFoundError(f"Verilog source {source} does not exist")
            if re.search(r"[\s\"';]", str(source)):
                raise ValueError(f"Verilog source path {str(source)!r} contains whitespace or quotes, "
                                 "which a Yosys script cannot carry")
        object.__setattr__(self, "sources", sources)
        if not isinstance(self.top, str) or not _IDENTIFIER.match(self.top):
            raise ValueError(f"top={self.top!r} is not a Verilog identifier")
        if self.family not in SUPPORTED_FAMILIES:
            raise ValueError(f"family={self.family!r} is not supported; expected one of "
                             f"{', '.join(SUPPORTED_FAMILIES)}")
        params = tuple(dict(self.params).items()) if isinstance(self.params, Mapping) else tuple(self.params)
        names = [name for name, _ in params]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter names in {names}")
        for name, value in params:
            if not isinstance(name, str) or not _IDENTIFIER.match(name):
                raise ValueError(f"parameter name {name!r} is not a Verilog identifier")
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"parameter {name} must be an int, got {type(value).__name__}")
        object.__setattr__(self, "params", params)
        for flag in ("nodsp", "abc9"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be a bool")

    @property
    def slug(self) -> str:
        """A file-name-safe, unique-per-configuration name, e.g. ``fpmac-xc7-EXP_BITS8-MAX_FB4``."""
        parts = [self.top, self.family, *(f"{name}{value}" for name, value in self.params)]
        parts += [flag for flag in ("nodsp", "abc9") if getattr(self, flag)]
        return "-".join(parts).replace("$", "_")

    @property
    def synth_command(self) -> str:
        flags = [*BASE_SYNTH_FLAGS, *(f"-{flag}" for flag in ("nodsp", "abc9") if getattr(self, flag))]
        return f"synth_xilinx -family {self.family} -top {self.top} {' '.join(flags)}"

    def script(self) -> str:
        """The Yosys script this job runs; file names are relative to its work directory."""
        lines = ["# generated by codesign.hw.yosys"]
        # the sources' own folders first, then the shared one: an order that does not depend on where the clone lives
        include_dirs = dict.fromkeys([*(str(source.parent) for source in self.sources), str(verilog_include_dir())])
        includes = " ".join(f"-I{directory}" for directory in include_dirs)
        for source in self.sources:
            sv = " -sv" if source.suffix == ".sv" else ""
            lines.append(f"read_verilog{sv} {includes} {source}")
        lines += [f"chparam -set {name} {value} {self.top}" for name, value in self.params]
        lines.append(self.synth_command)
        # a parameter chparam cannot set in place (one a typed localparam slices) leaves the top as $paramod\...
        lines.append(f"rename -top {self.top}")
        lines.append("tee -q -o stat.json stat -json")
        # ltp needs wires selected too, hence "*" (everything) minus the sequential cells.
        combinational = " ".join(["*", *(f"t:{pattern} %d" for pattern in SEQUENTIAL_PATTERNS)])
        lines.append(f"tee -q -o ltp.txt ltp -noff {combinational}")
        lines.append("delete =A:blackbox =t:* %M %d")
        lines.append("write_json netlist.json")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True)
class ResourceCounts:
    """Mapped cells grouped by the FPGA resource they occupy (counts of cells unless noted).

    ``lut``: logic LUT1..LUT6 cells, an upper bound on LUT sites (Vivado may
    pack two small LUTs into one LUT6_2 site); ``lut_sites_min``: the matching
    lower bound, LUT6 + ceil(smaller LUTs / 2). ``lutram`` and ``srl``: LUT
    sites used as distributed RAM and shift registers. ``ff``: flip-flops and
    latches (both use FF sites). ``dsp``: DSP48E1/DSP48E2 slices. ``carry``:
    CARRY4/CARRY8 cells (Yosys 0.23 maps UltraScale+ carry chains to CARRY4
    as well, so xcup carries are in CARRY4 units). ``muxf``: MUXF7/F8/F9 (free inside a slice, no LUT
    site). ``bram_36k``: block RAM in 36 Kib units (an 18 Kib RAM counts 0.5).
    ``io``: I/O and clock buffers (none with this flow). ``other``: anything
    else, listed in the raw counts.
    """

    lut: int
    lut_sites_min: int
    lutram: int
    srl: int
    ff: int
    dsp: int
    carry: int
    muxf: int
    bram_36k: float
    io: int
    other: int

    @property
    def lut_sites(self) -> int:
        """LUT sites for the budget: logic LUTs + LUT-RAM + SRL (upper bound, no packing)."""
        return self.lut + self.lutram + self.srl

    def utilisation_percent(self, budget: Mapping[str, int]) -> dict[str, float]:
        """Percent of a board budget (keys ``lut``, ``ff``, ``dsp``, ``bram_36k``) this design uses."""
        used = {"lut": self.lut_sites, "ff": self.ff, "dsp": self.dsp, "bram_36k": self.bram_36k}
        missing = sorted(set(used) - set(budget))
        if missing:
            raise ValueError(f"budget lacks {', '.join(missing)}")
        return {key: 100.0 * value / budget[key] for key, value in used.items()}

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class LogicDepth:
    """Longest combinational path, in cells (see the module docstring for what counts).

    ``cells``: cells on the longest path, with per-bit carry arcs;
    ``by_category``: those cells split into ``lut`` (LUT1..6, INV), ``carry``,
    ``muxf``, ``dsp``, ``other``, so ``lut_levels`` is the LUT count on *this*
    path (not necessarily the most LUT levels of any path); ``loops``: net
    bits on or behind true combinational cycles (0 for a sane design;
    otherwise those bits are left out of the path search). ``ltp_cells``/``ltp_loops``: Yosys ``ltp``'s
    length and "Detected loop" warnings for the same netlist.
    """

    cells: int
    by_category: dict[str, int] = field(default_factory=dict)
    loops: int = 0
    ltp_cells: int = 0
    ltp_loops: int = 0

    @property
    def lut_levels(self) -> int:
        return self.by_category.get("lut", 0)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class SynthResult:
    """What one job produced. ``wall_s`` is the Yosys wall-clock time in seconds."""

    job: SynthJob
    yosys_version: str
    raw_cells: dict[str, int]
    counts: ResourceCounts
    depth: LogicDepth
    wall_s: float
    work_dir: Path


def cell_category(cell_type: str) -> str:
    """Resource category of one mapped Xilinx cell type (``other`` when unknown)."""
    if _LUT_TYPE.match(cell_type) or cell_type == "INV":  # an INV takes a LUT (Vivado maps it to LUT1)
        return "lut"
    if cell_type.startswith(("FD", "LD")):
        return "ff"
    if cell_type.startswith("DSP48"):
        return "dsp"
    if cell_type.startswith("CARRY"):
        return "carry"
    if cell_type.startswith("MUXF"):
        return "muxf"
    if cell_type.startswith("SRL"):
        return "srl"
    if cell_type in _LUTRAM_SITES:
        return "lutram"
    if cell_type in _BRAM_36K:
        return "bram"
    if cell_type in _IO_TYPES:
        return "io"
    return "other"


def categorize(raw_cells: Mapping[str, int]) -> ResourceCounts:
    """Group raw ``stat`` cell counts into :class:`ResourceCounts`."""
    totals = dict.fromkeys(("lut", "lutram", "srl", "ff", "dsp", "carry", "muxf", "io", "other"), 0)
    bram = 0.0
    for cell_type, count in raw_cells.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise YosysError(f"cell count for {cell_type} is not a non-negative int: {count!r}")
        category = cell_category(cell_type)
        if category == "lutram":
            totals["lutram"] += _LUTRAM_SITES[cell_type] * count
        elif category == "bram":
            bram += _BRAM_36K[cell_type] * count
        else:
            totals[category] += count
    lut6 = raw_cells.get("LUT6", 0)
    return ResourceCounts(**totals, lut_sites_min=lut6 + math.ceil((totals["lut"] - lut6) / 2), bram_36k=bram)


def parse_stat(stat: object, top: str) -> dict[str, int]:
    """Cell counts by type from the parsed ``stat -json`` output of a flattened design."""
    try:
        if "design" in stat:
            by_type = stat["design"].get("num_cells_by_type", {})
        else:
            by_type = stat["modules"][f"\\{top}"].get("num_cells_by_type", {})
    except (KeyError, TypeError, AttributeError) as error:
        raise YosysError(f"unreadable stat -json output: {error}") from error
    return {str(cell_type): count for cell_type, count in sorted(by_type.items())}


def parse_ltp(text: str) -> tuple[int, int]:
    """(length, loop warnings) from ``ltp`` output; length 0 when it found no path."""
    loops = text.count("Detected loop")
    headers = list(_LTP_HEADER.finditer(text))
    if len(headers) > 1:
        raise YosysError(f"ltp reported {len(headers)} modules; expected one flattened module")
    return (max(int(headers[0].group(2)), 0) if headers else 0), loops


def _is_sequential(cell_type: str) -> bool:
    return any(fnmatch.fnmatchcase(cell_type, pattern) for pattern in SEQUENTIAL_PATTERNS)


def _cell_arcs(cell: Mapping) -> list[tuple[list[int], list[int]]]:
    """Groups (input bits, output bits) of one cell: every input of a group reaches every output.

    Carry cells get per-bit arcs; any other combinational cell one all-to-all
    group; sequential cells none. Constant bits ("0", "1", "x") are dropped.
    """
    cell_type = cell["type"]
    if _is_sequential(cell_type):
        return []
    directions = cell.get("port_directions", {})
    connections = cell["connections"]

    def bits(port: str, index: slice | int | None = None) -> list[int]:
        signal = connections.get(port, [])
        chosen = signal if index is None else (signal[index] if isinstance(index, slice) else signal[index:index + 1])
        return [bit for bit in chosen if isinstance(bit, int)]

    width = _CARRY_WIDTH.get(cell_type)
    if width is not None:
        groups = []
        for i in range(width):
            carry_in = bits("CI") + bits("CYINIT") + (bits("CI_TOP") if i >= 4 else [])
            below = bits("S", slice(0, i + 1)) + carry_in
            groups.append((below + bits("DI", slice(0, i + 1)), bits("CO", i)))
            groups.append((below + bits("DI", slice(0, i)), bits("O", i)))
        return groups
    if not directions:
        raise YosysError(f"netlist has no port directions for cell type {cell_type}")
    inputs = [bit for port, d in directions.items() if d == "input" for bit in bits(port)]
    outputs = [bit for port, d in directions.items() if d != "input" for bit in bits(port)]
    return [(inputs, outputs)]


def netlist_depth(netlist: Mapping, top: str) -> LogicDepth:
    """Longest combinational path of module ``top`` in a ``write_json`` netlist, in cells.

    Nodes are net bits and every arc is one cell, so this is a longest path in
    a DAG (Kahn's order). Bits on combinational cycles never become ready; they
    are counted in ``loops`` and skipped. The ltp fields are left at 0.
    """
    try:
        cells = netlist["modules"][top]["cells"]
    except (KeyError, TypeError) as error:
        raise YosysError(f"netlist has no module {top!r}") from error
    fanout: dict[int, list[tuple[int, str]]] = {}
    indegree: dict[int, int] = {}
    for name, cell in cells.items():
        for inputs, outputs in _cell_arcs(cell):
            for source in set(inputs):
                for target in outputs:
                    fanout.setdefault(source, []).append((target, name))
                    indegree[target] = indegree.get(target, 0) + 1
                    indegree.setdefault(source, 0)
    level = dict.fromkeys(indegree, 0)
    best_in: dict[int, tuple[int, str]] = {}
    ready = [bit for bit, count in indegree.items() if count == 0]
    done = 0
    while ready:
        bit = ready.pop()
        done += 1
        for target, name in fanout.get(bit, ()):
            if level[bit] + 1 > level[target]:
                level[target] = level[bit] + 1
                best_in[target] = (bit, name)
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    loops = len(level) - done
    reached = [bit for bit, count in indegree.items() if count == 0]
    if not reached:
        return LogicDepth(cells=0, by_category={}, loops=loops)
    end = max(reached, key=lambda bit: (level[bit], -bit))
    by_category: dict[str, int] = {}
    bit = end
    while bit in best_in:
        bit, name = best_in[bit]
        category = cell_category(cells[name]["type"])
        by_category[category] = by_category.get(category, 0) + 1
    return LogicDepth(cells=level[end], by_category=dict(sorted(by_category.items())), loops=loops)


def find_yosys(executable: str = "yosys") -> str:
    """Absolute path of the Yosys executable; :class:`YosysNotFoundError` if absent."""
    found = shutil.which(executable)
    if found is None:
        raise YosysNotFoundError(
            f"yosys executable {executable!r} not found on PATH; install Yosys (e.g. `apt-get install yosys`) "
            "to get synthesis estimates"
        )
    return found


@cache
def yosys_version(executable: str = "yosys") -> str:
    """``yosys -V`` output, e.g. ``Yosys 0.23 (git sha1 7ce5011c24b)``."""
    run = subprocess.run([find_yosys(executable), "-V"], capture_output=True, text=True, check=False)
    if run.returncode != 0 or not run.stdout.strip():
        raise YosysError(f"`{executable} -V` failed (exit {run.returncode}): {run.stderr.strip()}")
    return run.stdout.strip()


def _log_tail(work_dir: Path, stderr: str) -> str:
    log = work_dir / "yosys.log"
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    tail = "\n".join(lines[-LOG_TAIL_LINES:])
    return f"{tail}\n{stderr.strip()}".strip() or "(no log output)"


def synthesize(job: SynthJob, work_dir: Path, *, executable: str = "yosys",
               timeout_s: float | None = None) -> SynthResult:
    """Run ``job`` in ``work_dir`` (created; script, log and reports stay there for inspection)."""
    yosys = find_yosys(executable)
    version = yosys_version(executable)
    work_dir = Path(work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("stat.json", "ltp.txt", "netlist.json", "yosys.log"):
        (work_dir / stale).unlink(missing_ok=True)
    write_text_atomic(work_dir / "synth.ys", job.script())
    start = time.perf_counter()
    try:
        run = subprocess.run([yosys, "-q", "-l", "yosys.log", "-s", "synth.ys"], cwd=work_dir,
                             capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as error:
        raise YosysError(f"yosys timed out after {timeout_s} s on {job.slug} (work dir {work_dir}):\n"
                         f"{_log_tail(work_dir, '')}", job=job, why=f"timed out after {timeout_s} s",
                         log=work_dir / "yosys.log") from error
    wall_s = time.perf_counter() - start
    if run.returncode != 0:
        raise YosysError(f"yosys failed (exit {run.returncode}) on {job.slug} (work dir {work_dir}):\n"
                         f"{_log_tail(work_dir, run.stderr)}", job=job, why=f"exit status {run.returncode}",
                         log=work_dir / "yosys.log")
    for name in ("stat.json", "ltp.txt", "netlist.json"):
        if not (work_dir / name).is_file():
            raise YosysError(f"yosys did not write {work_dir / name} for {job.slug}:\n{_log_tail(work_dir, run.stderr)}",
                             job=job, why=f"it wrote no {name}", log=work_dir / "yosys.log")
    try:
        raw = parse_stat(load_json(work_dir / "stat.json", what=f"Yosys stat -json output of {job.slug}"), job.top)
        netlist = load_json(work_dir / "netlist.json", what=f"Yosys netlist of {job.slug}")
    except JsonFileError as error:
        raise YosysError(str(error)) from error
    ltp_cells, ltp_loops = parse_ltp((work_dir / "ltp.txt").read_text(errors="replace"))
    depth = dataclasses.replace(netlist_depth(netlist, job.top), ltp_cells=ltp_cells, ltp_loops=ltp_loops)
    return SynthResult(job=job, yosys_version=version, raw_cells=raw, counts=categorize(raw), depth=depth,
                       wall_s=wall_s, work_dir=work_dir)


def synthesize_many(jobs: Sequence[SynthJob], work_root: Path, *, workers: int = 1, progress: bool = True,
                    executable: str = "yosys", timeout_s: float | None = None,
                    desc: str = "yosys") -> list[SynthResult]:
    """Run ``jobs`` (each in ``work_root/<slug>``), ``workers`` Yosys processes at a time.

    Results come back in job order. Yosys is single-threaded, so ``workers``
    up to the core count shortens a sweep almost linearly (memory permitting).
    """
    from tqdm import tqdm

    jobs = list(jobs)
    slugs = [job.slug for job in jobs]
    if len(set(slugs)) != len(slugs):
        raise ValueError(f"duplicate jobs in sweep: {sorted({s for s in slugs if slugs.count(s) > 1})}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers={workers!r} must be a positive int")
    find_yosys(executable)
    results: list[SynthResult | None] = [None] * len(jobs)
    with tqdm(total=len(jobs), desc=desc, unit="run", disable=not progress) as bar:
        if workers == 1:
            for index, job in enumerate(jobs):
                bar.set_postfix_str(job.slug)
                results[index] = synthesize(job, Path(work_root) / job.slug, executable=executable,
                                            timeout_s=timeout_s)
                bar.update()
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = {pool.submit(synthesize, job, Path(work_root) / job.slug, executable=executable,
                                       timeout_s=timeout_s): index for index, job in enumerate(jobs)}
                try:
                    for future in as_completed(futures):
                        results[futures[future]] = future.result()
                        bar.set_postfix_str(jobs[futures[future]].slug)
                        bar.update()
                except BaseException:
                    pool.shutdown(wait=True, cancel_futures=True)  # fail fast: start no further runs
                    raise
    return [result for result in results if result is not None]


def synth_jobs(sources: Iterable[Path], top: str, families: Iterable[str],
               param_sets: Iterable[Mapping[str, int]], **options: bool) -> list[SynthJob]:
    """The cross product of ``families`` and ``param_sets`` as validated jobs (family-major order)."""
    sources = tuple(sources)
    param_sets = [tuple(params.items()) for params in param_sets]
    return [SynthJob(sources=sources, top=top, family=family, params=params, **options)
            for family in families for params in param_sets]
