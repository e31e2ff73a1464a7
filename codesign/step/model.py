"""How long a training step's PE work takes on a board, stage by stage: PE cycles against the data they move.

A *stage* is work that runs at once (one IP call, or a TT contraction stage
on its PE copies): its PE cycles (the busiest copy's, by the RTL-exact cycle
models) and the 32-bit words into and out of its PEs. The accelerator
shell streams DDR into the PE while the PE works (one DATAFLOW region,
docs/accelerator.md), so a stage takes the longer of its PE time and its
data movement: each IP's words pass its high-performance port
(``hp_port_bits`` each way at the PL clock; a design spreads its IPs over
one or more, :func:`codesign.shell.vivado.hp_port_of`), so the busiest port's
words bound the stage, and all share the DDR peak. The desktop's explorer (:mod:`codesign.step.time`)
and the board runtime's trainers (their ``throughput()``, beside the measured
wall time) use the same rule, so the model is stated once.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

WORD_BYTES = 4  # the PEs' stream words and the shell's AXI beats are 32 bits


def hp_port_of(ip_index: int, hp_ports: int) -> int:
    """The high-performance port (0-based) IP ``ip_index`` of a design's list sends its data through: round robin,
    so copies of one PE, listed one after another, land on different ports (the block design's rule,
    :mod:`codesign.shell.vivado`, and the models')."""
    return ip_index % hp_ports


def check_hp_ports(hp_ports) -> int:
    """``hp_ports`` as a count of high-performance ports, or an error."""
    if isinstance(hp_ports, bool) or not isinstance(hp_ports, int) or hp_ports < 1:
        raise ValueError(f"hp_ports={hp_ports!r} must be a positive int")
    return hp_ports


def busiest_port(words: Sequence[Tuple[int, int]], ports: Sequence[int]) -> Tuple[int, int]:
    """Words in and out of the busiest port, each IP's ``(in, out)`` words through its port in ``ports``: what
    bounds a stage whose IPs work side by side."""
    moved: Dict[int, List[int]] = {}
    for (words_in, words_out), port in zip(words, ports):
        sums = moved.setdefault(port, [0, 0])
        sums[0] += words_in
        sums[1] += words_out
    return max((w[0] for w in moved.values()), default=0), max((w[1] for w in moved.values()), default=0)


def port_bytes_per_s(hp_port_bits: int, clock_mhz: float) -> float:
    """Bytes a second through the high-performance port in one direction: its width at the PL clock."""
    return hp_port_bits / 8 * clock_mhz * 1e6


def stage_seconds(cycles: int, words_in: int, words_out: int, *, clock_mhz: float, port_bytes: float,
                  ddr_bytes: float, port_in: Optional[int] = None,
                  port_out: Optional[int] = None) -> Tuple[float, float]:
    """(PE seconds, seconds the stage's data movement adds beyond them); ``port_bytes`` and ``ddr_bytes`` per s.

    ``port_in`` and ``port_out`` are the words in and out of the stage's
    busiest port (None: every word through one port)."""
    pe = cycles / (clock_mhz * 1e6)
    port_in = words_in if port_in is None else port_in
    port_out = words_out if port_out is None else port_out
    moved = max(port_in * WORD_BYTES / port_bytes, port_out * WORD_BYTES / port_bytes,
                (words_in + words_out) * WORD_BYTES / ddr_bytes)
    return pe, max(0.0, moved - pe)


class StageLog:
    """The stages an IP backend ran: ``(cycles, words in, words out, busiest port's words in, out)`` each, and their
    modelled seconds."""

    def __init__(self) -> None:
        self.stages: List[Tuple[int, int, int, int, int]] = []

    def add(self, cycles: int, words_in: int, words_out: int, port_in: Optional[int] = None,
            port_out: Optional[int] = None) -> None:
        """One stage; ``port_in``/``port_out`` as :func:`stage_seconds` takes them (None: one port)."""
        self.stages.append((int(cycles), int(words_in), int(words_out),
                            int(words_in if port_in is None else port_in),
                            int(words_out if port_out is None else port_out)))

    def seconds(self, *, clock_mhz: float, hp_port_bits: int, ddr_peak_gbps: float) -> Dict[str, float]:
        """PE seconds and what data movement adds, over every stage logged."""
        port, ddr = port_bytes_per_s(hp_port_bits, clock_mhz), ddr_peak_gbps * 1e9
        pe = memory = 0.0
        for cycles, words_in, words_out, port_in, port_out in self.stages:
            stage_pe, extra = stage_seconds(cycles, words_in, words_out, clock_mhz=clock_mhz, port_bytes=port,
                                            ddr_bytes=ddr, port_in=port_in, port_out=port_out)
            pe += stage_pe
            memory += extra
        return {"pe_s": pe, "memory_s": memory}


def model_figures(log: StageLog, manifest: Mapping, steps: int) -> Optional[Dict[str, float]]:
    """The model's PE and memory seconds per step of what ``log`` holds, on design.json's board; None when
    design.json lacks the board's port or DDR figures (written by an older codesign) or no step ran."""
    facts = manifest.get("board_facts", {})
    if not steps or not isinstance(facts.get("hp_port_bits"), int) or not isinstance(
            facts.get("ddr_peak_gbps"), (int, float)):
        return None
    total = log.seconds(clock_mhz=float(manifest["clock_mhz"]), hp_port_bits=facts["hp_port_bits"],
                        ddr_peak_gbps=float(facts["ddr_peak_gbps"]))
    return {"pe_s_per_step": total["pe_s"] / steps, "memory_s_per_step": total["memory_s"] / steps,
            "stages": len(log.stages)}


__all__ = ["StageLog", "WORD_BYTES", "busiest_port", "check_hp_ports", "hp_port_of", "model_figures",
           "port_bytes_per_s", "stage_seconds"]
