"""A ledger of the work one training run did, and its energy under a documented buffer model.

Every counted layer adds, per step and per phase (``forward``, ``error`` =
back-propagation of errors to the layer input, ``weight_grad``), the MACs it
really computed (skipped samples, skipped batches and skipped blocks add
nothing) together with the operand widths in bits and the arithmetic kind:

* ``int``: integer/fixed-point MACs, ``bits_a x bits_b``;
* ``fp32``: IEEE single precision;
* ``fp``: the FB-configurable FP-MAC (sign, ``exp_bits`` exponent bits, ``fb``
  fraction bits, so an operand is stored in ``1 + exp_bits + fb`` bits); its
  per-MAC energy comes from a caller-supplied function of ``fb``.

Buffer model (deliberately simple, the same for every technique): each phase
streams its operand and result tensors through DRAM once (``dram_bits``), and
every MAC reads its two operands from an on-chip buffer, priced with the
8 KB SRAM figure per 64 bits, prorated by operand width. Register-level reuse
is not modelled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from codesign.energy.table import EnergyTable

PHASES = ("forward", "error", "weight_grad")
ARITHMETIC = ("int", "fp32", "fp")


@dataclass(frozen=True)
class MacRecord:
    layer: str
    phase: str
    arith: str
    bits_a: int
    bits_b: int
    exp_bits: int  # exponent bits of ``fp`` operands; 0 for the other kinds
    macs: int


def _check(phase: str, arith: str) -> None:
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; expected one of {PHASES}")
    if arith not in ARITHMETIC:
        raise ValueError(f"unknown arithmetic {arith!r}; expected one of {ARITHMETIC}")


class CostLedger:
    """Accumulates MACs (by layer, phase, arithmetic and widths) and DRAM traffic (bits)."""

    def __init__(self) -> None:
        self._macs: dict[tuple[str, str, str, int, int, int], int] = defaultdict(int)
        self._dram_bits: dict[tuple[str, str], int] = defaultdict(int)

    def add_macs(self, layer: str, phase: str, macs: int, *, bits_a: int, bits_b: int, arith: str = "int",
                 exp_bits: int = 0) -> None:
        """Record ``macs`` multiply-accumulates of ``bits_a x bits_b`` operands.

        For ``fp`` both widths are the FB and ``exp_bits`` is the format's
        exponent width; the other kinds take no exponent width.
        """
        _check(phase, arith)
        if macs < 0:
            raise ValueError("MAC counts are non-negative")
        if (arith == "fp") != (exp_bits > 0):
            raise ValueError(f"exp_bits={exp_bits}: FB-float MACs need their exponent width, other kinds none")
        if macs:
            self._macs[(layer, phase, arith, int(bits_a), int(bits_b), int(exp_bits))] += int(macs)

    def add_dram(self, layer: str, phase: str, bits: int) -> None:
        _check(phase, "int")
        if bits:
            self._dram_bits[(layer, phase)] += int(bits)

    def records(self) -> list[MacRecord]:
        return [MacRecord(*key, macs) for key, macs in sorted(self._macs.items())]

    def total_macs(self, phase: str | None = None) -> int:
        return sum(macs for key, macs in self._macs.items() if phase is None or key[1] == phase)

    def merge(self, other: CostLedger) -> None:
        for key, macs in other._macs.items():
            self._macs[key] += macs
        for key, bits in other._dram_bits.items():
            self._dram_bits[key] += bits

    def state_dict(self) -> dict:
        return {"macs": [list(key) + [v] for key, v in sorted(self._macs.items())],
                "dram": [list(key) + [v] for key, v in sorted(self._dram_bits.items())]}

    def load_state_dict(self, state: dict) -> None:
        self._macs = defaultdict(int, {tuple(row[:6]): row[6] for row in state["macs"]})
        self._dram_bits = defaultdict(int, {tuple(row[:2]): row[2] for row in state["dram"]})

    @staticmethod
    def _operand_bits(arith: str, bits_a: int, bits_b: int, exp_bits: int) -> tuple[int, int]:
        """Storage bits of each operand: an ``fp`` value takes sign + exponent + FB bits."""
        if arith == "fp32":
            return 32, 32
        if arith == "fp":
            return 1 + exp_bits + bits_a, 1 + exp_bits + bits_b
        return bits_a, bits_b

    def summary(self, table: EnergyTable, *, fp_mac_pj: Callable[[int], float] | None = None) -> dict:
        """FLOPs, BitOPs and energy (pJ), in total and by phase and layer, as plain JSON-ready data."""
        by_phase = {phase: {"macs": 0, "flops": 0, "bitops": 0, "compute_pj": 0.0, "buffer_pj": 0.0, "dram_pj": 0.0}
                    for phase in PHASES}
        by_layer: dict[str, float] = defaultdict(float)
        # sorted, so that float sums do not depend on insertion order (a resumed run inserts differently)
        for (layer, phase, arith, bits_a, bits_b, exp_bits), macs in sorted(self._macs.items()):
            if arith == "int":
                per_mac = table.int_mac(bits_a, bits_b)
            elif arith == "fp32":
                per_mac = table.fp32_mac()
            else:
                if fp_mac_pj is None:
                    raise ValueError("the ledger holds FB-float MACs: pass fp_mac_pj (energy per MAC by FB)")
                per_mac = fp_mac_pj(bits_a)
            width_a, width_b = self._operand_bits(arith, bits_a, bits_b, exp_bits)
            entry = by_phase[phase]
            entry["macs"] += macs
            entry["flops"] += 2 * macs
            entry["bitops"] += macs * width_a * width_b
            entry["compute_pj"] += macs * per_mac
            buffer = table.memory(macs * (width_a + width_b), dram=False)
            entry["buffer_pj"] += buffer
            by_layer[layer] += macs * per_mac + buffer
        for (layer, phase), bits in sorted(self._dram_bits.items()):
            dram = table.memory(bits, dram=True)
            by_phase[phase]["dram_pj"] += dram
            by_layer[layer] += dram
        for entry in by_phase.values():
            entry["energy_pj"] = entry["compute_pj"] + entry["buffer_pj"] + entry["dram_pj"]
        totals = {key: sum(entry[key] for entry in by_phase.values())
                  for key in ("macs", "flops", "bitops", "compute_pj", "buffer_pj", "dram_pj", "energy_pj")}
        return {"energy_source": table.source, "total": totals, "by_phase": by_phase, "by_layer": dict(sorted(by_layer.items()))}
