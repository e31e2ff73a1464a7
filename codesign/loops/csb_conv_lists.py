"""The compressed conv loop with every fixed-point step as call lists: the state on the device, the tiles read in
place, ReLU, masks and the update on the PE, on one csb IP or shared among several.

:class:`CsbConvListTrainer` is :class:`codesign.loops.csb_conv.CsbConvTrainer` whose fixed-point steps run as the
lists of :func:`codesign.step.csb.conv_step.net_lists` on a *shell* (as :mod:`codesign.loops.csb_lists`: the
golden shell model on the desktop, a board's csb IP). At the pruning event the trainer builds the network's arena
for the kept kernels and writes every layer's index, weights and buffer words once (the head's as a 1 x 1 conv,
which the PE runs under ``K1``). Per step the host writes the batch's codes, runs the forward list (on several
IPs, the forward phases), reads the logits' sums, computes the loss and its gradient as the loop does, writes the
gradient's codes and runs the backward list (phases), which leaves the new buffers in the other phase's slots. The
shell says how many csb IPs it drives (``ip_count``). Reading the state back (evaluation,
:meth:`read_weights`) pulls the buffers once and runs the loop's own code, so a run equals the loop's bit for bit.
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, Tuple

from codesign.loops.common import HwTrainError, StateOnDevice
from codesign.loops.csb import quantize
from codesign.loops.csb_conv import CsbConvSetup, CsbConvTrainer
from codesign.loops.csb_lists import list_step_batch
from codesign.step.csb.conv_step import ConvNetLists, net_arena, net_lists, net_step_scales, write_identities
from codesign.step.csb.lists import PE

_ARENAS = itertools.count()


def check_conv_list_spec(spec, setup: CsbConvSetup) -> None:
    """Refuse, before anything is written, a CSB build the conv lists cannot run for ``setup``'s network: lanes
    not a multiple of 4 per 32-bit part of a stream beat (a position's codes are whole beats), or a map row wider
    than one SELECT takes."""
    if spec.batch % (4 * spec.parts):
        raise HwTrainError(f"{spec.batch} lanes on a {spec.stream_bits}-bit stream: the conv lists need a multiple "
                           f"of {4 * spec.parts} (a position's codes in whole beats)")
    widest = max(ow for *_, ow, _ in setup.layer_maps[:-1])  # a SELECT takes a map row at least
    if widest * spec.batch > spec.ew_capacity:
        raise HwTrainError(f"a map row of {widest} positions x {spec.batch} lanes is more than one SELECT takes "
                           f"({spec.ew_capacity} elements): fewer lanes, or narrower maps")


class CsbConvListTrainer(StateOnDevice, CsbConvTrainer):
    """:class:`CsbConvTrainer` whose fixed-point steps run as call lists on ``shell`` (see the module docstring)."""

    def __init__(self, setup: CsbConvSetup, shell) -> None:
        spec = shell.specs.get(PE) if hasattr(shell, "specs") else None
        if spec != setup.spec:
            raise HwTrainError(f"the shell's {PE} build {spec} is not the set-up's {setup.spec}")
        check_conv_list_spec(spec, setup)
        super().__init__(setup)
        self.shell, self.net, self.device = shell, None, None
        self.copies = shell.ip_count(PE)
        self.buffer_phase, self.list_steps, self.lists_built = 0, 0, 0
        self._built: Dict[Tuple[Any, ...], ConvNetLists] = {}
        self._stale = False

    def _set_fixed(self, masks, dense, frac_bits) -> None:
        """The loop's switch to fixed point, then the one encoding of this structure into a new arena."""
        super()._set_fixed(masks, dense, frac_bits)
        setup = self.setup
        shapes, blocks = setup.shapes_and_blocks
        self.net = net_arena(self.spec, shapes, setup.batch_size, self._structure, blocks)
        for a, structure, words in zip(self.net.layers, self._structure, self.buffers):
            a.write_state(self.net.image, structure, words, 0)
        write_identities(self.net, self.net.image, self.frac_bits)
        self.buffer_phase, self._built, self._stale = 0, {}, False
        self.device = self.shell.arena(self.net, key=("csb-conv", setup.image, setup.convs, blocks, next(_ARENAS)))

    def _pull(self) -> None:
        if not self._stale:
            return
        net, phase = self.net, self.buffer_phase
        ranges = [(s.b[phase] // 4, s.nnz * a.shape.kernel ** 2) for a in net.layers for s in a.blocks]
        self.shell.invalidate(self.device, ranges)
        self.buffers = [a.read_buffer(self.device, phase) for a in net.layers]
        self._stale = False

    def load_weights(self, state: Dict[str, Any]) -> None:
        raise HwTrainError("the conv list trainer takes its state from its own pruning event")

    def lists(self, n: int, upd) -> ConvNetLists:
        return self._kept_lists((self.net.chunks_of(n), upd, self.buffer_phase), lambda: net_lists(
            self.net, n, net_step_scales(self.frac_bits, upd, self.net.blocks), self.buffer_phase, self.copies))

    def train_step(self, x, y, *, next_x=None) -> float:
        """One SGD step (float64 on the host in the warm-up; call lists after); returns the loss. ``next_x`` (the
        next batch, which the MLP's list trainer writes beside its lists) is not taken: here the host's share of a
        step is under 1 %."""
        if self.phase == "warmup":
            return super().train_step(x, y)
        x, y, n, used, upd = list_step_batch(self, x, y)
        fb, shell, first, head = self.frac_bits, self.shell, self.net.layers[0], self.net.layers[-1]
        lists = self.lists(n, upd)
        first.write_input(self.device, quantize(x, fb[0]["activation"]))
        shell.flush(self.device, first.map_ranges(first.x, n, 1))
        self._run_phases(lists.forward_phases)
        shell.invalidate(self.device, head.map_ranges(head.z, n, 4))
        loss, codes = self._loss_and_codes(head.read_sums(self.device, n).reshape(n, -1), y)
        head.write_errors(self.device, codes.reshape(n, -1, 1, 1))
        shell.flush(self.device, head.map_ranges(head.dy, n, 1))
        self._run_phases(lists.backward_phases)
        self.buffer_phase, self._stale = 1 - self.buffer_phase, True
        self.lr_exponents.extend(used)
        for index, (structure, (_, _, k, _, oh, ow, _)) in enumerate(zip(self._structure, self.layers)):
            products = structure.nnz * k * k  # the loop's counts: the first layer takes no EB
            for op, count in (("FP", n * oh * ow), ("WG", n * oh * ow), ("EB", n * oh * ow * (index > 0)), ("UPD", 1)):
                self.backend.macs[op] += products * count
        self.fixed_steps += 1
        self.step += 1
        self.list_steps += 1
        return loss


__all__ = ["CsbConvListTrainer", "check_conv_list_spec"]
