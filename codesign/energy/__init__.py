"""Cost model of training: MACs by phase and operand width, memory traffic, FLOPs, BitOPs and energy (pJ)."""

from codesign.energy.ledger import PHASES, CostLedger, MacRecord
from codesign.energy.table import EnergyTable, horowitz_45nm

__all__ = ["PHASES", "CostLedger", "EnergyTable", "MacRecord", "horowitz_45nm"]
