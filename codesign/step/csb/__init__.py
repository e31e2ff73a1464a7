"""A CSB layer's step on the CSB PE: its schedule of block transactions and the whole-step time."""
