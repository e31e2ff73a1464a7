"""The FB-float step on an FP-MAC array: its GEMMs as IP calls and the whole-step time, and the step as call lists
(arena, lists, their cycles)."""
