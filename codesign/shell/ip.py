"""The accelerator shell: any stream PE as an IP with m_axi data ports and an s_axilite control port.

A stream PE (:class:`codesign.pe.stream.StreamPE`) reads one 32-bit word
stream and writes another, one transaction per ``pe_t::process(in, out)``
call. The shell around it is the same for every PE: a top function whose
arguments are :data:`SHELL_ARGS` (two word pointers on their own m_axi
bundles, three 32-bit counts), an ``ap_ctrl_hs`` block protocol on the
s_axilite ``control`` bundle, and a DATAFLOW body of three processes
(``hls_templates/accel/codesign_accel.h``): read ``n_in`` words by burst, run
``n_transactions`` transactions, write ``n_out`` words.

Everything that names an argument -- the C signature, the INTERFACE pragmas,
the testbench and bridge calls, the register map the RTL control slave, the
cocotb bench and the PYNQ driver use -- comes from :data:`SHELL_ARGS`, so
the argument list is typed once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.hw.flow import SOLUTION_NAME, VECTORS_HEADER, render_project
from codesign.hw.render import ProjectFiles, RenderError, render_template, write_project
from codesign.contracts.shell import (  # noqa: F401 (the shell's facts, read as accel.<name> by the desktop flow)
    AXI_WORD_BITS,
    CONTROL_BUNDLE,
    CONTROL_REGISTERS,
    CTRL_BITS,
    DIRECTIONS,
    FIRST_ARGUMENT_OFFSET,
    ISR_BITS,
    KINDS,
    POINTER_BITS,
    SHELL_ARGS,
    AccelFiles,
    ShellArg,
    control_address_bits,
    project_files,
    register_map,
    register_span,
)
from codesign.hw.target import BuildTarget
from codesign.hw.vectors import TRANSACTION_MAGIC, WORD_BITS
from codesign.resources import data_dir

# -------------------------------------------------------------------------- IP identity

HLS_PROJECT_NAME = "codesign_prj"  # the vitis_hls project directory inside an IP's HLS project folder
IP_VENDOR, IP_LIBRARY, IP_VERSION = "codesign", "hls", "1.0"
_INSTANCE = re.compile(r"^[a-z][a-z0-9_]*$")


def check_instance_name(instance_name: str) -> str:
    if not isinstance(instance_name, str) or not _INSTANCE.match(instance_name):
        raise ValueError(f"instance name {instance_name!r} must be a lower-case C identifier (a-z, 0-9, _)")
    return instance_name


def accel_top(instance_name: str) -> str:
    """Top function (and IP name) of an instance: ``<instance>_accel``."""
    return f"{check_instance_name(instance_name)}_accel"


def vlnv(instance_name: str) -> str:
    """The IP's Vivado identifier, ``codesign:hls:<instance>_accel:1.0``."""
    return f"{IP_VENDOR}:{IP_LIBRARY}:{accel_top(instance_name)}:{IP_VERSION}"


def data_ports(args: Sequence[ShellArg] = SHELL_ARGS) -> list[str]:
    """The m_axi interfaces of the IP, in argument order, each once (``m_axi_gmem0``, ``m_axi_gmem1``: the call
    list is read through the input's port)."""
    return list(dict.fromkeys(arg.port for arg in args if arg.kind == "pointer"))


def ip_repo_relpath() -> str:
    """Where ``export_design`` leaves the IP, relative to the HLS project folder."""
    return f"{HLS_PROJECT_NAME}/{SOLUTION_NAME}/impl/ip"


def ip_fields(instance_name: str) -> dict[str, Any]:
    """The shell's part of an IP's design.json entry (top, VLNV, registers, data ports, IP repository)."""
    return {"top": accel_top(instance_name), "vlnv": vlnv(instance_name), "registers": register_map(),
            "data_ports": data_ports(), "ip_repo_relpath": ip_repo_relpath()}


# -------------------------------------------------------------------------- the HLS project

TEMPLATE_DIR = "accel"
LIBRARY_HEADER = "codesign_accel.h"  # the shell's processes and call lists, copied verbatim from hls_templates/accel
ROUND_HEADER = "codesign_round.h"  # the rounding stage the call lists use, copied verbatim from hls_templates/include
_PROCESS_TYPEDEF = re.compile(r"^typedef\s+.+?\s+(\w*pe_t)\s*;\s*$", re.MULTILINE)



def process_type(pe, kernel_header_text: str) -> str:
    """The name of the C++ type whose ``process(in, out)`` runs one transaction of ``pe``.

    Every stream PE's kernel header declares it with one ``typedef ... <x>pe_t;``
    (``pe_t``, from the one stream-PE kernel template); the shell calls it by that
    name. A header with none or several is refused.
    """
    found = _PROCESS_TYPEDEF.findall(kernel_header_text)
    if len(found) != 1:
        raise RenderError(f"the {pe.name} kernel header {pe.kernel_header} declares {len(found)} '*pe_t' typedefs "
                          f"({found}); the accelerator shell needs exactly one")
    return found[0]


def _check_stream_pe(pe) -> None:
    if getattr(pe, "handshake", None) != "stream" or not hasattr(pe, "kernel_header"):
        raise ValueError(f"the {pe.name} PE is not a stream PE: the accelerator shell wraps stream PEs only")


def pe_target(target: BuildTarget) -> BuildTarget:
    """The PE-side target inside the shell: the same part and clock, the PE's own interface and top."""
    if target.interface not in (None, "m_axi"):
        raise ValueError(f"the accelerator shell has m_axi data ports, not {target.interface!r}")
    return BuildTarget(part=target.part, clock_period_ns=target.clock_period_ns)


def buffer_words(transactions) -> dict[str, int]:
    """Words in the input and output buffers of one shell call running ``transactions`` back to back."""
    return {"in": int(sum(len(words_in) for words_in, _ in transactions)),
            "out": int(sum(len(words_out) for _, words_out in transactions))}


def m_axi_options(stream_context: Mapping[str, Any]) -> str:
    """Extra m_axi pragma options for a PE whose stream words are wider than the 32-bit memory words: the data
    bus widened to the stream word (``max_widen_bitwidth``, bits) so that one stream word moves per cycle."""
    bits = int(stream_context.get("stream_word_bits", WORD_BITS))
    return f" max_widen_bitwidth = {bits}" if bits > WORD_BITS else ""


def accel_context(pe, spec, instance_name: str, target: BuildTarget, kernel_header_text: str,
                  depths: Mapping[str, int]) -> dict[str, Any]:
    """Everything the accel templates use; derived numbers come from here, not from Jinja."""
    top = accel_top(instance_name)
    files = AccelFiles(top)
    args = [{"name": arg.name, "kind": arg.kind, "ctype": arg.ctype, "bundle": arg.bundle,
             "direction": arg.direction, "depth": depths.get(arg.name, 1), "doc": arg.doc,
             "options": m_axi_options(pe.stream_context(spec))} for arg in SHELL_ARGS]
    registers = register_map()
    return {
        **pe.stream_context(spec),
        "pe": pe.name,
        "title": pe.title,
        "instance": instance_name,
        "top": top,
        "files": {"top_cpp": files.top_cpp, "top_h": files.top_h, "testbench": files.testbench,
                  "bridge": files.bridge, "tcl": files.tcl},
        "pe_headers": [name for name in pe.kernel_files if name.endswith(".h")],
        "library_header": LIBRARY_HEADER,
        "round_header": ROUND_HEADER,
        "vectors_header": VECTORS_HEADER,
        "vector_file": pe.vector_file,
        "transaction_magic": TRANSACTION_MAGIC,
        "process_type": process_type(pe, kernel_header_text),
        "args": args,
        "control_bundle": CONTROL_BUNDLE,
        "registers": [(name, f"0x{offset:02x}") for name, offset in registers.items()],
        "summary": ", ".join(f"{key}={value}" for key, value in spec.to_dict().items()),
        "target": {"part": target.part, "clock_period_ns": target.clock_period_ns},
        "project_name": HLS_PROJECT_NAME,
        "solution_name": SOLUTION_NAME,
        "ip": {"vendor": IP_VENDOR, "library": IP_LIBRARY, "name": top, "version": IP_VERSION},
        "guard_words": GUARD_WORDS,
        "word_bits": WORD_BITS,
    }


GUARD_WORDS = 16  # words past n_out the shell testbench watches for writes beyond the output count
TEMPLATES = {  # AccelFiles attribute -> template under hls_templates/accel
    "top_cpp": "accel_top.cpp.j2",
    "top_h": "accel_top.h.j2",
    "testbench": "accel_testbench.cpp.j2",
    "bridge": "bridge.cpp.j2",
    "tcl": "run_hls.tcl.j2",
}


def library_header() -> bytes:
    path = data_dir("hls_templates") / TEMPLATE_DIR / LIBRARY_HEADER
    if not path.is_file():
        raise RenderError(f"no shell header {path}")
    return path.read_bytes()


def render_accel(pe, spec, instance_name: str, target: BuildTarget | None = None, *, stimulus=None) -> ProjectFiles:
    """Render the accelerator HLS project of one PE instance in memory (nothing is written).

    The PE's files come from :func:`codesign.hw.flow.render_project` (its
    kernel header and tested headers, the golden transaction file); the
    shell's from ``hls_templates/accel``. ``stimulus`` defaults to the PE's
    default stimulus; it fills the golden file the shell testbench replays and
    the m_axi ``depth`` co-simulation sizes its memories by.
    """
    _check_stream_pe(pe)
    pe.check_spec(spec)
    top = accel_top(instance_name)
    target = target or BuildTarget()
    if target.top not in (None, top):
        raise ValueError(f"the accelerator top of instance {instance_name!r} is {top!r}, not {target.top!r}")
    stimulus = stimulus if stimulus is not None else pe.build_stimulus(spec, pe.stimulus_options())
    inner = render_project(pe, spec, pe_target(target), stimulus=stimulus)
    kernel_header_text = inner.files[pe.kernel_header].decode()
    context = accel_context(pe, spec, instance_name, target, kernel_header_text, buffer_words(stimulus))
    files = {name: inner.files[name] for name in (*context["pe_headers"], *pe.headers, VECTORS_HEADER,
                                                   pe.vector_file)}
    files[LIBRARY_HEADER] = library_header()
    files[ROUND_HEADER] = (data_dir("hls_templates") / "include" / ROUND_HEADER).read_bytes()
    for key, template in TEMPLATES.items():
        files[context["files"][key]] = render_template(f"{TEMPLATE_DIR}/{template}", context).encode()
    shell_target = {"part": target.part, "clock_period_ns": target.clock_period_ns, "interface": "m_axi", "top": top}
    return ProjectFiles(pe=pe.name, spec=spec.to_dict(), target=shell_target, files=files)


def render_accel_project(pe, spec, instance_name: str, target: BuildTarget | None, out_dir: Path, *,
                         stimulus=None) -> list[Path]:
    """Render the accelerator HLS project of ``pe`` (instance ``instance_name``) and write it to ``out_dir``.

    ``out_dir`` must be missing, empty or an earlier codesign project; every
    file is rendered before the first is written, each atomically. Returns the
    written paths (manifest first).
    """
    return write_project(Path(out_dir), render_accel(pe, spec, instance_name, target, stimulus=stimulus))



def run_accel_csim(project_dir: Path, vectors: Path, work_dir: Path):
    """C-simulate the shell: compile ``<top>.cpp`` and its testbench with g++ and replay ``vectors``.

    Returns a :class:`codesign.hw.csim.CsimResult`; ``vectors`` counts transactions
    and ``mismatches`` the transactions with a wrong output word (plus one when a
    word past ``n_out`` was written).
    """
    from codesign.hw.csim import csim

    files = project_files(project_dir)
    return csim([files["top_cpp"], files["testbench"]], include_dirs=[Path(project_dir)], vectors=Path(vectors),
                build_dir=Path(work_dir), name=files["top_cpp"].stem + "_tb")


# -------------------------------------------------------------------------- the RTL shell

RTL_DIR = "accel"  # rtl/accel: accel_ctrl, accel_mm2s, accel_s2mm (Verilog-2005, one module per file)
RTL_TOP = "accel_top"  # the generated wrapper around the PE (hls_templates/accel/accel_top.v.j2)
AXI_ADDR_BITS = 32  # m_axi address width of the RTL shell (Zynq-7000 and the Ultra96's DDR sit below 4 GiB)
MAX_BURST = 16  # beats per m_axi burst: the AXI3 limit of the Zynq-7000 HP ports, Vitis HLS's default too
MOVERS = {"read": ("accel_mm2s", ("ar", "r")), "write": ("accel_s2mm", ("aw", "w", "b"))}
MOVER_ARGS = ("in", "out")  # the pointers whose ports carry a data mover; the call list shares in's port


@dataclass(frozen=True)
class AxiSignal:
    """One AXI signal without its prefix: channel, name, width (bits), driven by the master (``out``)."""

    channel: str
    name: str
    width: int
    out: bool

    @property
    def idle(self) -> int:
        """Value a master drives on a channel it never uses (ready high, everything else low)."""
        return 1 if self.name in ("bready", "rready") else 0


def axi4_signals(addr_bits: int = AXI_ADDR_BITS, data_bits: int = WORD_BITS) -> list[AxiSignal]:
    """The AXI4 master signals of one m_axi port (1-bit IDs, ``data_bits``-bit data), in channel order."""
    table = {
        "aw": (("awid", 1, 1), ("awaddr", addr_bits, 1), ("awlen", 8, 1), ("awsize", 3, 1), ("awburst", 2, 1),
               ("awcache", 4, 1), ("awprot", 3, 1), ("awvalid", 1, 1), ("awready", 1, 0)),
        "w": (("wdata", data_bits, 1), ("wstrb", data_bits // 8, 1), ("wlast", 1, 1), ("wvalid", 1, 1),
              ("wready", 1, 0)),
        "b": (("bid", 1, 0), ("bresp", 2, 0), ("bvalid", 1, 0), ("bready", 1, 1)),
        "ar": (("arid", 1, 1), ("araddr", addr_bits, 1), ("arlen", 8, 1), ("arsize", 3, 1), ("arburst", 2, 1),
               ("arcache", 4, 1), ("arprot", 3, 1), ("arvalid", 1, 1), ("arready", 1, 0)),
        "r": (("rid", 1, 0), ("rdata", data_bits, 0), ("rresp", 2, 0), ("rlast", 1, 0), ("rvalid", 1, 0),
              ("rready", 1, 1)),
    }
    return [AxiSignal(channel, name, width, bool(out)) for channel, rows in table.items()
            for name, width, out in rows]


def axilite_signals(addr_bits: int) -> list[AxiSignal]:
    """The AXI4-Lite slave signals of the control port; ``out`` is from the master's side, so inverted here."""
    rows = (("aw", "awaddr", addr_bits, 0), ("aw", "awvalid", 1, 0), ("aw", "awready", 1, 1),
            ("w", "wdata", 32, 0), ("w", "wstrb", 4, 0), ("w", "wvalid", 1, 0), ("w", "wready", 1, 1),
            ("b", "bresp", 2, 1), ("b", "bvalid", 1, 1), ("b", "bready", 1, 0),
            ("ar", "araddr", addr_bits, 0), ("ar", "arvalid", 1, 0), ("ar", "arready", 1, 1),
            ("r", "rdata", 32, 1), ("r", "rresp", 2, 1), ("r", "rvalid", 1, 1), ("r", "rready", 1, 0))
    return [AxiSignal(channel, name, width, bool(out)) for channel, name, width, out in rows]


def ctrl_parameters() -> dict[str, int]:
    """Verilog parameters of accel_ctrl: the address width and every register offset from :func:`register_map`."""
    return {"ADDR_BITS": control_address_bits(),
            **{f"OFF_{name.upper()}": offset for name, offset in register_map().items()}}


def stream_word_bits(pe, spec) -> int:
    """Bits of ``pe``'s stream word on build ``spec``: the width of the shell's data buses (32, 64 or 128)."""
    return int(pe.stream_context(spec).get("stream_word_bits", WORD_BITS))


def rtl_context(pe, spec, *, held_sums: bool = True) -> dict[str, Any]:
    """The wrapper's template context; ``held_sums``: the shell keeps the accumulation buffer (see
    :func:`render_accel_rtl`)."""
    data_bits = stream_word_bits(pe, spec)
    pointers = []
    for arg in SHELL_ARGS:
        if arg.name not in MOVER_ARGS:
            continue
        mover, channels = MOVERS[arg.direction]
        side = "rd" if arg.direction == "read" else "wr"
        stream = ((("requesting", "rd_requesting"), ("in_data", "rd_data"), ("in_valid", "rd_valid"),
                   ("in_ready", "rd_ready"))
                  if arg.direction == "read" else
                  (("requesting", "wr_requesting"), ("out_data", "wr_data"), ("out_valid", "wr_valid"),
                   ("out_ready", "wr_ready")))
        pointers.append({"name": arg.name, "bundle": arg.bundle, "direction": arg.direction, "mover": mover,
                         "side": side, "channels": channels, "stream": stream})
    return {
        "pe_top": pe.rtl_top,
        "title": pe.title,
        "summary": ", ".join(f"{key}={value}" for key, value in spec.to_dict().items()),
        "pe_parameters": pe.rtl_parameters(spec),
        "pointers": pointers,
        "control_bundle": CONTROL_BUNDLE,
        "control_signals": axilite_signals(control_address_bits()),
        "control_address_bits": control_address_bits(),
        "offsets": [(name, offset) for name, offset in register_map().items()],
        "axi_signals": axi4_signals(data_bits=data_bits),
        "axi_addr_bits": AXI_ADDR_BITS,
        "data_bits": data_bits,
        "max_burst": MAX_BURST,
        "held_sums": int(held_sums),
    }


def shell_rtl_sources() -> list[Path]:
    """rtl/accel/*.v: the shell's own modules (control slave and the two data movers), sorted by name."""
    directory = data_dir("rtl") / RTL_DIR
    sources = sorted(directory.glob("*.v"))
    if not sources:
        raise FileNotFoundError(f"no Verilog in {directory}")
    return sources


def render_accel_rtl(pe, spec, out_dir: Path, *, held_sums: bool = True) -> list[Path]:
    """Write the generated ``accel_top.v`` for ``pe`` into ``out_dir``; return every source of the RTL shell.

    ``held_sums`` False builds the shell without the accumulation buffer (no block RAM, a 32-bit rounding
    stage: :func:`shell_cost`), for IPs whose lists hold no sums (the host refuses accumulating calls for it:
    :func:`codesign.shell.calls.run_list_golden`, ``held_sums``).

    The list holds rtl/accel, the wrapper and the PE's own sources, ready for
    :func:`codesign.hw.rtlsim.run_cocotb` (top :data:`RTL_TOP`) or Yosys.
    """
    from codesign.io.reports import write_text_atomic

    _check_stream_pe(pe)
    pe.check_spec(spec)
    text = render_template(f"{TEMPLATE_DIR}/accel_top.v.j2", rtl_context(pe, spec, held_sums=held_sums))
    wrapper = write_text_atomic(Path(out_dir) / f"{RTL_TOP}.v", text)
    return [*shell_rtl_sources(), wrapper, *pe.rtl_sources()]


BENCH_MODULE = "codesign.shell.bench"


@dataclass(frozen=True)
class AccelRtlResult:
    """One RTL run of the shell: transactions and words checked, mismatching words, cycles per run, wall time (s)."""

    transactions: int
    words: int
    mismatches: int
    runs: tuple[dict, ...]
    bursts: int
    first_mismatches: tuple[str, ...]
    seconds: float
    build_dir: Path

    @property
    def passed(self) -> bool:
        return self.mismatches == 0


def run_accel_rtl(pe, spec, vectors: Path, work_dir: Path, *, simulator: str = "icarus", seed: int = 1,
                  pause: float = 0.2, timeout_cycles: int = 2_000_000) -> AccelRtlResult:
    """Simulate ``accel_top`` around ``pe``'s RTL under :mod:`codesign.shell.bench` on a golden file.

    The file is checked before anything is built. ``pause`` is the chance that
    each AXI channel of the memory models stalls in a cycle. A failing bench
    raises :class:`codesign.hw.rtlsim.CocotbTestFailure` unless its summary
    counts the mismatches (then they are returned).
    """
    import time

    from codesign.hw.rtlsim import build_dir_for

    pe.check_spec(spec)
    vectors = Path(vectors).resolve()
    pe.check_vectors(spec, vectors)
    build_dir = build_dir_for(Path(work_dir).resolve(), f"{RTL_TOP}_{pe.rtl_top}", simulator,
                              pe.rtl_parameters(spec))
    summary_path = build_dir / "summary.json"
    env = {"ACCEL_VECTORS": str(vectors), "ACCEL_SUMMARY": str(summary_path), "ACCEL_PE": pe.name,
           "ACCEL_SEED": str(seed), "ACCEL_PAUSE": str(pause), "ACCEL_TIMEOUT_CYCLES": str(timeout_cycles),
           "ACCEL_DATA_BITS": str(stream_word_bits(pe, spec))}
    started = time.perf_counter()
    summary = run_shell_bench(pe, spec, build_dir, test_module=BENCH_MODULE, env=env, summary_path=summary_path,
                              simulator=simulator, required={"transactions": int, "words_checked": int, "runs": list,
                                                             "bursts": int, "first_mismatches": list})
    return AccelRtlResult(transactions=int(summary["transactions"]), words=int(summary["words_checked"]),
                          mismatches=int(summary["mismatches"]), runs=tuple(summary["runs"]),
                          bursts=int(summary["bursts"]),
                          first_mismatches=tuple(str(entry) for entry in summary["first_mismatches"]),
                          seconds=time.perf_counter() - started, build_dir=build_dir)


def run_shell_bench(pe, spec, build_dir: Path, *, test_module: str, env: dict, summary_path: Path, simulator: str,
                    required: dict, held_sums: bool = True) -> dict:
    """Render ``accel_top`` around ``pe`` into ``build_dir``, run the cocotb bench ``test_module`` on it and return
    the JSON summary it wrote to ``summary_path`` (with the ``required`` fields). A failing bench raises
    :class:`codesign.hw.rtlsim.CocotbTestFailure` unless its summary counts the mismatches (then it is returned:
    the caller reports them)."""
    from codesign.hw.rtlsim import CocotbTestFailure, package_root, read_bench_summary, run_cocotb

    summary_path.unlink(missing_ok=True)
    sources = render_accel_rtl(pe, spec, build_dir / "src", held_sums=held_sums)
    try:
        run_cocotb(sources=sources, toplevel=RTL_TOP, test_module=test_module, build_dir=build_dir,
                   python_paths=[package_root()], extra_env=env, simulator=simulator)
    except CocotbTestFailure:
        if not summary_path.is_file() or read_bench_summary(summary_path)["mismatches"] == 0:
            raise
    return read_bench_summary(summary_path, required)


# -------------------------------------------------------------------------- the shell's own cost

SHELL_MODULES = ("accel_ctrl", "accel_mm2s", "accel_s2mm", "accel_seq")
SUBMODULES = {"accel_seq": ("accel_round",)}  # modules a shell module instantiates (synthesised with it)
COST_FIELDS = ("lut", "lut_sites_min", "lutram", "srl", "ff", "dsp", "carry", "muxf", "bram_36k")


def shell_module_parameters(data_bits: int = WORD_BITS, *, held_sums: bool = True) -> dict[str, dict[str, int]]:
    """Verilog parameters of each shell module as the generated accel_top sets them for a ``data_bits`` stream
    (``held_sums``: with the accumulation buffer)."""
    movers = {"ADDR_BITS": AXI_ADDR_BITS, "MAX_BURST": MAX_BURST, "DATA_BITS": data_bits}
    return {"accel_ctrl": ctrl_parameters(), "accel_mm2s": dict(movers), "accel_s2mm": dict(movers),
            "accel_seq": {"DATA_BITS": data_bits, "ADDR_BITS": AXI_ADDR_BITS, "HELD": int(held_sums)}}


def shell_synth_jobs(family: str, data_bits: int = WORD_BITS, *, held_sums: bool = True) -> list:
    """One Yosys job per shell module (out of context, like a PE's estimate) for ``family`` and a ``data_bits``
    stream."""
    from codesign.hw.yosys import SynthJob

    sources = {path.stem: path for path in shell_rtl_sources()}
    return [SynthJob(sources=(sources[module], *(sources[sub] for sub in SUBMODULES.get(module, ()))), top=module,
                     family=family, params=params, abc9=False)
            for module, params in shell_module_parameters(data_bits, held_sums=held_sums).items()]


def measure_shell_cost(family: str, work_dir: Path, data_bits: int = WORD_BITS, *,
                       held_sums: bool = True) -> dict[str, Any]:
    """Synthesise the shell's modules with Yosys; their summed cell counts and each module's."""
    from codesign.hw.yosys import synthesize_many

    results = synthesize_many(shell_synth_jobs(family, data_bits, held_sums=held_sums), Path(work_dir),
                              progress=False)
    modules = {result.job.top: {key: getattr(result.counts, key) for key in COST_FIELDS} for result in results}
    total = {key: sum(counts[key] for counts in modules.values()) for key in COST_FIELDS}
    return {"family": family, "total": total, "modules": modules, "yosys": results[0].yosys_version}


# Yosys 0.23 (synth_xilinx, default ABC, out of context) on accel_ctrl + accel_mm2s + accel_s2mm + accel_seq
# (with accel_round) with the
# parameters of shell_module_parameters(data_bits, held_sums), per family and data width (bits, the PE's stream word);
# tests/shell/test_ip_cost.py re-measures and compares. A cache, so that a fit check adds the shell without
# running Yosys. Cells, not sites (see ResourceCounts). The wider movers hold wider FIFO words (LUT RAM).
# accel_seq keeps descriptor words 0..29 (each written from its own part of a beat; the output side's through 11
# registers every fetch fills, so that the next call's are fetched beside a call) and a plane counter and plane
# address per side (3-D blocks; addresses at the movers' ADDR_BITS), and the
# accumulation buffer (4096 x 48 bits: the 6 block RAMs) with its 48-bit adder and the rounding stage (a 48-bit
# datapath and, at 64 and 128 bits, one or three 32-bit ones: it takes a beat's parts a cycle, each part's range
# tested by a mask of its bits, not compared, and a code 16 bits wide; its group register takes a chunk's fields
# rotated, a nibble write-enable apiece, no shifter);
# accel_mm2s counts the beats of overlapping runs (a list's rows keep several bursts in flight); accel_s2mm holds
# a second run's address, length and last-beat strobes while the run before sends.
SHELL_COST_YOSYS = "Yosys 0.23"
SHELL_COST = {
    "xc7": {
        32: {"lut": 4859, "lut_sites_min": 3141, "lutram": 24, "srl": 0,
             "ff": 3202, "dsp": 0, "carry": 333, "muxf": 723, "bram_36k": 6.0},
        64: {"lut": 5815, "lut_sites_min": 3475, "lutram": 44, "srl": 0,
             "ff": 3577, "dsp": 0, "carry": 394, "muxf": 330, "bram_36k": 6.0},
        128: {"lut": 7658, "lut_sites_min": 4777, "lutram": 88, "srl": 0,
             "ff": 3906, "dsp": 0, "carry": 423, "muxf": 590, "bram_36k": 6.0},
    },
    "xcup": {
        32: {"lut": 5145, "lut_sites_min": 3190, "lutram": 24, "srl": 0,
             "ff": 3202, "dsp": 0, "carry": 333, "muxf": 1130, "bram_36k": 6.0},
        64: {"lut": 5831, "lut_sites_min": 3718, "lutram": 40, "srl": 0,
             "ff": 3577, "dsp": 0, "carry": 394, "muxf": 702, "bram_36k": 6.0},
        128: {"lut": 7428, "lut_sites_min": 4650, "lutram": 80, "srl": 0,
             "ff": 3906, "dsp": 0, "carry": 423, "muxf": 786, "bram_36k": 6.0},
    },
}
# the same shell without the accumulation buffer (accel_seq HELD = 0: no block RAM, a 32-bit rounding stage)
SHELL_COST_LEAN = {
    "xc7": {
        32: {"lut": 4609, "lut_sites_min": 2914, "lutram": 24, "srl": 0,
             "ff": 3118, "dsp": 0, "carry": 306, "muxf": 586, "bram_36k": 0.0},
        64: {"lut": 5442, "lut_sites_min": 3394, "lutram": 44, "srl": 0,
             "ff": 3419, "dsp": 0, "carry": 363, "muxf": 211, "bram_36k": 0.0},
        128: {"lut": 7263, "lut_sites_min": 4558, "lutram": 88, "srl": 0,
             "ff": 3748, "dsp": 0, "carry": 392, "muxf": 534, "bram_36k": 0.0},
    },
    "xcup": {
        32: {"lut": 4760, "lut_sites_min": 3037, "lutram": 24, "srl": 0,
             "ff": 3118, "dsp": 0, "carry": 306, "muxf": 1045, "bram_36k": 0.0},
        64: {"lut": 5533, "lut_sites_min": 3491, "lutram": 40, "srl": 0,
             "ff": 3419, "dsp": 0, "carry": 363, "muxf": 604, "bram_36k": 0.0},
        128: {"lut": 6843, "lut_sites_min": 4373, "lutram": 80, "srl": 0,
             "ff": 3748, "dsp": 0, "carry": 392, "muxf": 585, "bram_36k": 0.0},
    },
}


def shell_cost(family: str, data_bits: int = WORD_BITS, *, held_sums: bool = True) -> dict[str, float]:
    """The shell's own resource cost (its modules, no PE) for ``family`` (xc7, xcup) around a PE whose stream
    word is ``data_bits`` wide (32, 64 or 128); ``held_sums`` False: the shell without the accumulation buffer
    (:data:`SHELL_COST_LEAN`).

    Add it to a PE's Yosys cost to get one accelerator IP. Keys as
    :class:`codesign.hw.yosys.ResourceCounts` (``lut`` cells, ``ff``, ``carry``,
    ``bram_36k`` in 36 Kib units, ...); measured with :data:`SHELL_COST_YOSYS`
    by :func:`measure_shell_cost`.
    """
    table = SHELL_COST if held_sums else SHELL_COST_LEAN
    if family not in table:
        raise ValueError(f"no shell cost for family {family!r}; known: {', '.join(table)}")
    if data_bits not in table[family]:
        raise ValueError(f"no shell cost for {data_bits}-bit data; known: {', '.join(map(str, table[family]))}")
    return dict(table[family][data_bits])


def held_by_default(pe) -> bool:
    """Whether ``pe``'s IPs keep the accumulation buffer unless a design says (``[design.pe.<pe>] held_sums``): not
    for a PE that chains its sums itself (``chains_own_sums``), whose call lists never use it."""
    return not getattr(pe, "chains_own_sums", False)


def ip_shell_cost(pe, spec, family: str, *, held_sums: bool | None = None) -> dict[str, float]:
    """:func:`shell_cost` of the shell around ``pe`` on build ``spec``: its data buses at the PE's stream word;
    ``held_sums`` None: as the design flow builds it (:func:`held_by_default`)."""
    held = held_by_default(pe) if held_sums is None else held_sums
    return shell_cost(family, stream_word_bits(pe, spec), held_sums=held)
