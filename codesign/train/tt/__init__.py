"""Rank-adaptive, low-precision tensor-train (TT) training: the golden model (paper 003).

* :mod:`~codesign.train.tt.ttm`: :class:`TTMatrix` (TT-SVD, reconstruction) and the
  core contractions of the forward and backward passes, for NumPy and torch;
* :mod:`~codesign.train.tt.precision`: bit widths and mean-|x| scale tracking;
* :mod:`~codesign.train.tt.layer`: :class:`TTLinear`, a counted layer trained
  through the contractions with 4-bit cores, 8-bit activations and biases,
  16-bit gradients and full-precision shadow cores;
* :mod:`~codesign.train.tt.rank`: the low-rank prior, ``lambda`` updates and rank pruning;
* :mod:`~codesign.train.tt.model`: a TT MLP and its set-up in the project's trainer.
"""

from codesign.train.tt.layer import TTLinear, tt_layers
from codesign.train.tt.model import TTMLP, TTLayerSpec, TTMLPConfig, model_memory_bits, tt_trainer, use_adam
from codesign.train.tt.precision import TTPrecision
from codesign.train.tt.rank import RankAdaptation, RankPrior, rebuild_optimizer
from codesign.train.tt.ttm import TTMatrix, contraction_macs, tt_backward, tt_forward, tt_svd

__all__ = ["RankAdaptation", "RankPrior", "TTLayerSpec", "TTLinear", "TTMLP", "TTMLPConfig", "TTMatrix",
           "TTPrecision", "contraction_macs", "model_memory_bits", "rebuild_optimizer", "tt_backward", "tt_forward",
           "tt_layers", "tt_svd", "tt_trainer", "use_adam"]
