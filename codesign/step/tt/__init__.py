"""A TT layer's training step on PE1/PE2/PE3 copies: the schedule of its contractions, the step as PE calls
(bit for bit the golden layer's), the host's integer rounding between calls, the calls' cycles against the RTL,
the C-sim runner, the board's buffers, on-chip reuse and the whole-step time."""
