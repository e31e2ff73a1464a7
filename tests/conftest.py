"""Suite-wide settings: one torch thread per test process (pytest-xdist runs one process per core)."""

import torch

torch.set_num_threads(1)
