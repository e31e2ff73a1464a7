"""How a TT list trainer (:class:`codesign.loops.tt_lists.TtListTrainer`) takes a layer's input: the batch (staged
beside the step before, its codes written into the rows only the forward reads) or the layer below's output (its
codes written by that layer, or made here from its values), with the works beside the lists it brings: the staged
batch's check, the input's tracker, the values handed on."""

from __future__ import annotations

from functools import partial
from typing import Tuple

import numpy as np

from codesign.loops.common import HwTrainError
from codesign.loops.tt_hand_off import Handed
from codesign.loops.tt_list_prep import Prepared, StagedInput
from codesign.numerics.scales import mean_abs
from codesign.step.tt.rounding import code_dtype, quantize_values, relu_codes_and_range
from codesign.step.tt.scale_book import ScaleBook
from codesign.step.tt.step import check_input


class ListInputs:
    """A TT list trainer's input side: needs its ``setup``, ``shell``, ``_staged`` (a :class:`StagedInput` or
    None), ``_arena(index, lists, cores, batch)`` and ``_features(x)``."""

    def _input(self, index: int, prepared: Prepared, x, taken: dict) -> Tuple:
        """Layer ``index``'s input ``x`` as its forward takes it, ``(x, codes, later, staged, works)``: its codes
        written where not yet, the works for its backward (``later``, :meth:`_forward_layer`'s), the staged batch
        taken (None: none) and the works beside its lists: the values handed on, where the layer below wrote the
        codes; a staged batch's check (``taken["staged"]``, or the error in ``taken["error"]``), and then the
        network input's tracker (the shorter work, for the shorter phase)."""
        fracs, lists, arena, widths = prepared.fracs, prepared.lists, prepared.arena, self.setup.precision

        def aim(values: np.ndarray, used: int, observed: float | None = None) -> None:  # the input's tracker
            self._aim(prepared.book, "act_frac_bits", 0, values, used, bits=widths["activation_bits"],
                      headroom_bits=widths["activation_headroom_bits"], observed=observed)
        if isinstance(x, Handed):  # its codes written by the layer below
            handed = x
            return x, x.codes, {"aim": lambda: aim(np.maximum(handed.values(), np.float32(0)), fracs.act[0]),
                                "passes": lambda: handed.inside & (handed.values() > 0)}, None, [x.values]
        given = x
        x, x_codes, inside, observed, staged = self._input_codes(index, prepared, x, fracs.act[0])
        aim_x = partial(aim, x, fracs.act[0], observed=observed)
        later, works = {} if inside is None else {"aim": aim_x, "passes": lambda: inside & (x > 0)}, []
        if staged is None or staged.written_in is not arena or staged.frac != fracs.act[0]:
            self.shell.flush(arena, lists.write(arena, x=x_codes, x_t=x_codes))
        if staged is not None:  # the batch checked against the one staged while the lists compute

            def check() -> None:
                try:
                    taken["staged"] = staged.matches(check_input(prepared.state, given))
                except Exception as error:  # raised once the IPs are done
                    taken["error"] = error
            works.append(check)
        if inside is None:  # the network's input: its tracker moves on beside the lists
            works.append(aim_x)
        return x, x_codes, later, staged, works

    @staticmethod
    def _aim(book: ScaleBook, name: str, index: int, values: np.ndarray, used: int, *, bits: int,
             headroom_bits: int, observed: float | None = None) -> None:
        """Tracker ``(name, index)`` moved on by ``values`` (their mean |x|: ``observed`` where taken before), which
        were rounded at ``used``, the scale it held: under the tracked rule the rounding needs no mean, so the
        host takes it while the lists compute."""
        if book.host(name, index, values, bits=bits, headroom_bits=headroom_bits, update=True,
                     observed=observed) != used:
            raise HwTrainError(f"{name}[{index}]: the tracked scale moved before the step ended")

    def _input_codes(self, index: int, prepared: Prepared, x, frac: int
                     ) -> Tuple[np.ndarray, np.ndarray, np.ndarray | None, float | None, StagedInput | None]:
        """The layer's input checked (a hidden layer's: the ReLU of the layer below's output ``x``), its codes at
        ``frac``, where it lay within their bounds (None for the network's input, whose gradient is not asked for),
        its mean |x| where known (None: not taken yet), and the staged batch they were taken from (None: from
        ``x``). The network input is taken from what the last step staged
        where that has ``x``'s shape (its codes kept where staged at ``frac``): most steps take the batch staged,
        so the forward starts on its codes and the step checks ``x`` against it while the lists compute (the
        comparison took 45 of the 230 us before the first list at paper 003's rank 8): then the layer's state is
        not asked for."""
        bits = self.setup.precision["activation_bits"]
        if not self.setup.layers[index]["is_network_input"]:  # the layer below's output, of its shape and type
            x = np.maximum(x, x.dtype.type(0))
            # in float32 checked as the loop checks it (inf past float32's range; after the ReLU, the largest value
            # tells), before its codes; handed off exactly it is finite (integer sums plus a bias, in float64)
            if self.setup.precision["hand_off"] == "float32" and not np.isfinite(np.max(x)):
                raise ValueError("x must be finite")
            return (x, *relu_codes_and_range(x, frac, bits, code_dtype(bits)), None, None)
        staged, self._staged = self._staged, None
        if staged is None or np.shape(x) != staged.x.shape:
            x = check_input(prepared.state, x)
            return x, quantize_values(x, frac, bits, code_dtype(bits)), None, None, None
        codes = staged.codes if staged.frac == frac else quantize_values(staged.x, frac, bits, code_dtype(bits))
        return staged.x, codes, None, staged.observed, staged

    def _stage_input(self, next_x, state, book: ScaleBook, lists) -> None:
        """The next batch checked (a copy), its mean |x| taken, and its codes at the scale the network input's
        tracker holds as ``book`` (the first layer's, this step's, its input aimed) leaves it; nothing staged for
        a batch that fails the check, which the next step then reports. The codes are written into the arena of
        ``lists`` (the first layer's) in the layouts only its forward reads (the core gradient reads a copy of its
        own: :meth:`~codesign.step.tt.step_lists.StepLists.write`), for a next step at its shapes: as the
        forward's ``A`` and, where PE1 takes a share of the first forward
        (:mod:`codesign.step.tt.first_forward`), transposed."""
        try:
            x = check_input(state, self._features(np.array(next_x, dtype=np.float32)))
        except Exception:  # whatever fails (a tensor that needs grad, ...), its own step says why
            return
        frac, bits = book.trackers["act_frac_bits"][0], state.activation_bits
        codes, arena = quantize_values(x, frac, bits, code_dtype(bits)), None
        if x.shape[0] == lists.batch:
            arena = self._arena(0, lists, state.cores, lists.batch)
            self.shell.flush(arena, lists.write(arena, x=codes, x_t=codes))
        self._staged = StagedInput(x=x, key=(), observed=mean_abs(x), frac=frac, codes=codes, written_in=arena)


__all__ = ["ListInputs"]
