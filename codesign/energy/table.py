"""Energy per operation (pJ), from Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC 2014, 45 nm.

Figures used (45 nm, 0.9 V), as quoted in that talk:
* integer add: 8 bit 0.03 pJ, 32 bit 0.1 pJ;
* integer multiply: 8x8 bit 0.2 pJ, 32x32 bit 3.1 pJ;
* float add: 16 bit 0.4 pJ, 32 bit 0.9 pJ; float multiply: 16 bit 1.1 pJ, 32 bit 3.7 pJ;
* SRAM read of 64 bits: 8 KB 10 pJ, 32 KB 20 pJ, 1 MB 100 pJ; DRAM 1.3-2.6 nJ per 64 bits.

Between the anchors, integer multiply energy follows a power law in the
product of operand widths ``b_a * b_b`` through 8x8 and 32x32 (exponent
log(3.1/0.2)/log(16) ≈ 0.99, i.e. nearly linear in the bit product, as an
array multiplier's partial-product count is), and add energy is linear in
width through 8 and 32 bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class EnergyTable:
    """Per-operation energies in pJ; memory figures are per 64-bit access."""

    int_mul_8x8: float = 0.2
    int_mul_32x32: float = 3.1
    int_add_8: float = 0.03
    int_add_32: float = 0.1
    fp32_mul: float = 3.7
    fp32_add: float = 0.9
    fp16_mul: float = 1.1
    fp16_add: float = 0.4
    sram_64b: float = 10.0  # on-chip buffer (8 KB class)
    dram_64b: float = 1300.0  # lower end of 1.3-2.6 nJ
    source: str = "Horowitz, ISSCC 2014, 45 nm"

    def int_mul(self, bits_a: int, bits_b: int) -> float:
        """Integer multiply energy (pJ) for operand widths in bits."""
        exponent = math.log(self.int_mul_32x32 / self.int_mul_8x8) / math.log(1024 / 64)
        return self.int_mul_8x8 * ((bits_a * bits_b) / 64) ** exponent

    def int_add(self, bits: int) -> float:
        """Integer add energy (pJ) for a ``bits``-wide adder."""
        return self.int_add_8 + (self.int_add_32 - self.int_add_8) * (bits - 8) / 24

    def int_mac(self, bits_a: int, bits_b: int, acc_bits: int | None = None) -> float:
        """Multiply plus accumulate; the accumulator defaults to the product width (bits_a + bits_b)."""
        return self.int_mul(bits_a, bits_b) + self.int_add(acc_bits or bits_a + bits_b)

    def fp32_mac(self) -> float:
        return self.fp32_mul + self.fp32_add

    def memory(self, bits: float, *, dram: bool) -> float:
        """Energy (pJ) to move ``bits`` through on-chip SRAM or DRAM, in 64-bit accesses."""
        return bits / 64 * (self.dram_64b if dram else self.sram_64b)


def horowitz_45nm() -> EnergyTable:
    return EnergyTable()
