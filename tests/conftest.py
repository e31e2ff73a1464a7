"""Suite-wide settings: one torch thread per test process (pytest-xdist runs one process per core); shared stimulus."""

import numpy as np
import pytest
import torch

from codesign.numerics import decode

torch.set_num_threads(1)


def _edge_values(fmt, rng: np.random.Generator) -> np.ndarray:
    """Every code's value (or 4,000 of them), the midpoints between neighbours and the doubles either side of
    each, the binades around emin, extremes of float64 (subnormal doubles, infinities) and random magnitudes."""
    codes = np.arange(min(fmt.max_code, 1 << 12) + 1, dtype=np.uint64)
    if fmt.max_code > 1 << 12:
        codes = np.unique(np.concatenate([codes, rng.integers(0, fmt.max_code, 2000, dtype=np.uint64),
                                          np.arange(fmt.max_code - 1000, fmt.max_code + 1, dtype=np.uint64)]))
    values = decode(codes, fmt)
    mids = (values[:-1] + values[1:]) / 2
    near = np.concatenate([values, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf),
                           np.nextafter(values, 0), np.nextafter(values, np.inf),
                           np.ldexp(rng.uniform(0.5, 1, 2000), rng.integers(fmt.emin - fmt.frac_bits - 4, fmt.emin + 2,
                                                                            2000)),
                           rng.standard_normal(2000) * 10.0 ** rng.integers(-12, 12, 2000),
                           [fmt.max_value * (1 + 2.0 ** -(fmt.frac_bits + 1)), fmt.max_value * 2, 1e308, 5e-324,
                            2.2250738585072014e-308, 1e-310, np.inf]])
    return np.concatenate([near, -near, [0.0, -0.0]])


@pytest.fixture
def float_edge_values():
    """The float-format edge values above, for every test that holds a fast rounding path to the general one."""
    return _edge_values
