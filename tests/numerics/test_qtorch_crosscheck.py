"""nearest_away behaves exactly like QPyTorch 0.3.0's float_quantize(..., rounding="nearest").

Known QPyTorch deviations, excluded here and listed in docs/numerics.md:
negative values that underflow to zero come back as +0 from QPyTorch
(it computes (x + s) - s), NaN saturates for exp < 8, subnormal targets
with exp < 8 round twice, and man=23 flips signs (an out-of-range shift).
"""

import numpy as np
import pytest
import torch

from codesign.numerics import FloatFormat
from codesign.train.quantize import quantize

qtorch_quant = pytest.importorskip("qtorch.quant", reason="qtorch is a benchmark/cross-check dependency (make test installs it)")

pytestmark = pytest.mark.slow  # the first import builds QPyTorch's C++ extension (~40 s)


@pytest.mark.parametrize("exp_bits, frac_bits", [(8, 1), (8, 4), (8, 10), (8, 16), (8, 22), (5, 2), (5, 10), (4, 3)])
def test_nearest_away_matches_qtorch(exp_bits, frac_bits):
    fmt = FloatFormat(exp_bits=exp_bits, frac_bits=frac_bits, rounding="nearest_away")
    rng = np.random.default_rng(frac_bits)
    magnitudes = np.exp2(rng.uniform(fmt.emin, min(fmt.emax + 3, 127), 200_000))
    x = torch.from_numpy((rng.choice([-1.0, 1.0], magnitudes.size) * magnitudes).astype(np.float32))
    if exp_bits == 8:  # float32 subnormals and ties between them take QPyTorch's subnormal path exactly
        x = torch.cat([x, torch.from_numpy(rng.integers(1, 1 << 23, 5000).astype(np.int32)).view(torch.float32)])
    ours = quantize(x, fmt)
    theirs = qtorch_quant.float_quantize(x, exp_bits, frac_bits, rounding="nearest")
    same = ours.view(torch.int32) == theirs.view(torch.int32)
    assert bool(same.all()), x[~same][:5]
