"""The TT loop with every layer step as call lists (codesign.loops.tt_lists) on the golden shell model: training
ends bit-identical to the loop's own steps under the tracked scale rule, every state word compared."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

from codesign.design import load_design
from codesign.design.families.tt import tt_setup_of
from codesign.loops.common import HwTrainError
from codesign.loops.tt import TtMlpTrainer
from codesign.loops.tt_list_prep import Prepared
from codesign.loops import tt_hand_off
from codesign.loops.tt_lists import KEPT_AIMS, TtListTrainer
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.shell.list_runner import GoldenListShell
from codesign.step.tt.step_lists import Fracs
from codesign.train.data import Dataset, load_digits_dataset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class _StrictShell(GoldenListShell):
    """The golden shell, which runs the host's work beside a phase before its lists, refusing work that writes a
    word of the arena the phase reads: on a board the IPs run while the host works, so such a word is read before
    or after the host writes it (the golden model would hide it, giving the lists the host's words)."""

    def run_phase(self, phase, arena, beside=None):
        if beside is None:
            return super().run_phase(phase, arena)

        def checked() -> None:
            before = arena.copy()
            beside()
            read = np.concatenate([np.zeros(0, np.int64)] + [block.word_indices() for _, calls in phase
                                                              for call in calls for block in call.segments])
            written = np.flatnonzero(arena != before)
            assert not np.isin(written, read).any(), f"the host wrote words {written[np.isin(written, read)][:4]} " \
                "beside the phase that reads them"
        return super().run_phase(phase, arena, beside=checked)


def GoldenShell(**options) -> GoldenListShell:
    """The shell's golden model with small buffers, so that contractions are tiled, their sums chained and their
    operands read through 3-D blocks; strict about the host's words beside a phase (:class:`_StrictShell`)."""
    return _StrictShell({"tt1": Tt1Spec(lanes=4, rows=2, a_bits=16, b_bits=16, max_j=8, max_k=16, max_l=8),
                         "tt2": Tt2Spec(lanes=4, rows=2, a_bits=16, b_bits=16, max_j=8, max_k=16, max_l=8)},
                        **options)


def _setup(rule: str = "tracked", hand_off: str = "float32"):
    setup = tt_setup_of(load_design(EXAMPLES / "digits_tt.toml"))
    return dataclasses.replace(setup, epochs=2, warmup_epochs=1, prune_from_epoch=0, threshold=0.9,
                               precision={**setup.precision, "scale_rule": rule, "scale_momentum": 0.75,
                                          "hand_off": hand_off})


def _data(train: int = 128, test: int = 64) -> Dataset:
    data = load_digits_dataset()
    return Dataset(data.train_x[:train], data.train_y[:train], data.test_x[:test], data.test_y[:test], data.classes)


def _words(trainer) -> list:
    """Every state word: the weights' record, and the prior's ``lambda``s the next step reads."""
    state = trainer.read_weights()
    return ([np.asarray(a) for key in ("cores", "biases", "moments", "trackers", "means", "ranks") for a in state[key]]
            + [lam for lambdas in trainer.lambdas for lam in lambdas])


@pytest.mark.parametrize("hand_off", ["float32", "exact"])
@pytest.mark.parametrize("copies", [(1, 1), (2, 3)])
def test_training_on_call_lists_is_bit_identical_to_the_loop(copies, hand_off):
    """On one IP of each PE, and with every contraction shared among two PE1 and three PE2 IPs; the layers'
    outputs and input gradients passed on in float32 or exactly."""
    setup = _setup(hand_off=hand_off)
    shell = GoldenShell(copies=copies, share_products=1)
    lists, loop = TtListTrainer(setup, shell), TtMlpTrainer(setup)
    data = _data()
    for trainer in (lists, loop):
        trainer.fit(data, progress=False)
    assert [row["loss"] for row in lists.history] == [row["loss"] for row in loop.history]
    assert lists.prune_events == loop.prune_events and lists.prune_events, "the threshold pruned ranks"
    mine, theirs = _words(lists), _words(loop)
    assert len(mine) == len(theirs)
    compared = 0
    for index, (a, b) in enumerate(zip(mine, theirs)):
        assert a.shape == b.shape and a.dtype == b.dtype, index
        assert np.count_nonzero(a.view(np.uint8) != b.view(np.uint8)) == 0, f"array {index} differs"
        compared += a.size
    steps = lists.step
    assert lists.list_steps == steps - 1 and shell.calls > 0  # all but the first, which aims every scale
    # the epoch loop hands each step the next batch, which a list step stages: of the two epochs' two steps, only
    # the last takes its input staged (the first epoch's second step follows the loop's own first step)
    assert lists.steps_per_epoch == 2 and lists.inputs_staged == 1
    assert lists.lists_built <= 2 * (len(lists.prune_events) + 1), "lists are built once per layer and shapes"
    assert lists.lists_reshifted > 0, "a tracked scale moved: the lists' shifts changed in place"
    assert compared > 3 * sum(core.size for cores in loop.cores for core in cores)
    widest = max(len(phase) for lists_ in lists.current_lists.values() for phase in lists_.phases)
    assert widest == (2 if copies == (1, 1) else 5)
    # shared, the first layer's last two forwards are cut at a sample (the first samples' codes handed on beside
    # the last forward phase: test_the_first_samples_are_handed_on_beside_the_last_forward_phase)
    assert (lists.current_lists[0].early_samples > 0) == (copies != (1, 1))


def test_the_first_samples_are_handed_on_beside_the_last_forward_phase(monkeypatch):
    """Where the first layer's last forward is cut at a sample, the host writes the next layer's codes of the
    first samples beside the phase that computes the later samples' (on the arena the phases before left), the
    rest after it, and trains as the loop; a layer handing off exactly takes none early (its codes come from
    values, which the PE does not give in parts)."""
    from codesign.loops import tt_lists

    taken = []

    def noted(shell, state, lists, arena, *rest):
        made = tt_hand_off.hand_forward_early(shell, state, lists, arena, *rest)
        taken.append((lists.early_samples, None if made is None else made[0].shape[0]))
        return made
    monkeypatch.setattr(tt_lists, "hand_forward_early", noted)
    for hand_off in ("float32", "exact"):
        setup = _setup(hand_off=hand_off)
        trainer, loop = TtListTrainer(setup, GoldenShell(copies=(2, 2), share_products=1)), TtMlpTrainer(setup)
        data = _data(train=3 * setup.batch_size)
        for start in range(0, 3 * setup.batch_size, setup.batch_size):
            for each in (trainer, loop):
                stop = start + setup.batch_size
                each.train_step(data.train_x[start:stop], data.train_y[start:stop])
        early = trainer.current_lists[0].early_samples
        assert 0 < early < setup.batch_size
        assert taken == [(early, early if hand_off == "float32" else None)] * 2, (hand_off, taken)  # the list steps
        taken.clear()
        for a, b in zip(_words(trainer), _words(loop)):
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_lists_at_scales_seen_lately_are_taken_as_they_were():
    """Tracked scales wander among a few values: lists re-aimed once are kept per layer and shapes (the latest
    KEPT_AIMS aims), so a step back at earlier scales takes the very lists it ran then, re-aimed not again."""
    trainer = TtListTrainer(_setup(), GoldenShell())
    state = trainer.layer_state(1)
    d = len(state.cores)
    fracs = [Fracs(act=(a,) * d, grad=(9,) * d, core_grad=(6,) * d, core=(2,) * d, act_bits=state.activation_bits,
                   grad_bits=state.grad_bits, core_bits=state.core_bits) for a in range(3, 3 + KEPT_AIMS + 1)]
    shapes = [core.shape for core in state.cores]
    first = trainer._lists(1, shapes, 8, fracs[0])
    assert trainer._lists(1, shapes, 8, fracs[1]) is not first and trainer.lists_reshifted == 1
    assert trainer._lists(1, shapes, 8, fracs[0]) is first and trainer.lists_reshifted == 1
    assert trainer._lists(1, shapes, 8, fracs[1]).fracs == fracs[1] and trainer.lists_reshifted == 1
    for moved in fracs[2:]:  # the oldest aim, fracs[0], falls out
        trainer._lists(1, shapes, 8, moved)
    assert trainer.lists_built == 1 and trainer.lists_reshifted == KEPT_AIMS
    assert trainer._lists(1, shapes, 8, fracs[0]) is not first and trainer.lists_reshifted == KEPT_AIMS + 1


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_a_hidden_layers_input_past_float32s_range_is_refused_as_the_loop_refuses_it(bad):
    """The layer below's float32 output, inf or NaN somewhere (float32's range passed): the next layer's input is
    refused with the loop's error before its codes are made (no warning of a cast first); -inf, which the ReLU
    takes to 0, is not."""
    trainer = TtListTrainer(_setup(), GoldenShell())
    state = trainer.layer_state(1)
    prepared = Prepared(lambda: (state, None), fracs=None, lists=None, arena=None)  # all a hidden layer's input needs
    out = np.random.default_rng(0).normal(size=(4, state.in_features)).astype(np.float32)
    out[2, 5] = -np.inf
    x, codes, inside, _, _ = trainer._input_codes(1, prepared, out, 3)
    assert x[2, 5] == 0 and codes[2, 5] == 0 and inside[2, 5]
    out[1, 7] = bad
    with warnings.catch_warnings(), pytest.raises(ValueError, match="x must be finite"):
        warnings.simplefilter("error")
        trainer._input_codes(1, prepared, out, 3)


class _Beside:
    """The golden shell, noting each phase given host work (and the cores as that work left them), and, when
    ``fail_at`` is set, failing that step's phase as an IP would: after the host's work beside it ran."""

    def __init__(self, trainer, shell) -> None:
        self.trainer, self.shell, self.run_phase = trainer, shell, shell.run_phase
        self.noted, self.fail_at = [], None
        shell.run_phase = self

    def __call__(self, phase, arena, beside=None):
        if beside is None:
            return self.run_phase(phase, arena)
        cores = list(self.trainer.cores)  # the cores as the step found them
        arena = self.run_phase(phase, arena, beside=beside)
        self.noted.append([now is not then for now, then in zip(self.trainer.cores, cores)])
        if len(self.noted) == self.fail_at:
            raise RuntimeError("the IP failed")
        return arena


def _ranked(lists, phases) -> list:
    """``phases`` longest first (by their longest list's products; ties in phase order), as the trainer ranks
    them to place its work."""
    return sorted(phases, key=lambda index: max(lists.products[index]), reverse=True)


def _placed(lists, phases, works: int, *, last: bool = False) -> set:
    """The phases of ``phases`` the trainer gives ``works`` works (the longest the first, and so on, the rest
    with the shortest), and the last phase when it has work that reads what the phases before it wrote (which
    then has it alone)."""
    ranked = [phase for phase in _ranked(lists, phases) if not (last and phase == phases[-1])]
    return {ranked[min(work, len(ranked) - 1)] for work in range(works)} | ({phases[-1]} if last else set())


def test_the_host_works_beside_the_lists_and_a_step_that_fails_changes_nothing():
    """While layer 0's longest forward phase computes, the host prepares layer 1 (its cores' codes, lists and
    arena, and its bias quantised); while its longest backward phase computes, it reads layer 1's gradients and
    updates layer 1; each output gradient's tracker (and the network input's) moves on, layer 0's bias is
    quantised and each bias's gradient taken beside the next longest phases, and where layer 1's input gradient
    passes is worked out beside its backward (its input's tracker moves on in its update). Beside layer 0's last
    two phases, the host reads what the phases before each wrote and updates those cores (and, beside the first
    of them, the bias). A step whose last phase fails after that leaves every state word as it was, and the step
    taken again equals a trainer's that never failed."""
    setup = _setup()
    data = _data(train=4 * setup.batch_size)
    batches = [(data.train_x[i:i + setup.batch_size], data.train_y[i:i + setup.batch_size])
               for i in range(0, 4 * setup.batch_size, setup.batch_size)]
    trainer, other = TtListTrainer(setup, GoldenShell()), TtListTrainer(setup, GoldenShell())
    noting = _Beside(trainer, trainer.shell)
    for x, y in batches[:3]:
        trainer.train_step(x, y)
        other.train_step(x, y)
    (f0, b0), (f1, b1) = [(range(lists.forward_phases), range(lists.forward_phases, len(lists.phases)))
                          for lists in (trainer.current_lists[0], trainer.current_lists[1])]
    lists0, lists1 = trainer.current_lists[0], trainer.current_lists[1]
    placed = [(0, _placed(lists0, f0, 3) | {0}), (1, _placed(lists1, f1, 1) | {0}), (1, _placed(lists1, b1, 4)),
              (0, _placed(lists0, b0, 3, last=True))]  # a step's phases with work, layer by layer (the loss
    # beside the last layer's longest backward phase; layer 0's float32 output, whose codes it wrote for layer 1,
    # beside layer 1's forward; the input's copy for the first core's gradient beside each first phase)
    assert set(trainer.beside_seconds) == {(layer, phase) for layer, phases in placed for phase in phases}
    longest = _ranked(lists0, b0)[0]
    assert longest > lists0.forward_phases, "the longest backward phase is not the first"
    # which layers' cores the work beside each phase renewed: layer 1's beside layer 0's longest backward phase,
    # layer 0's beside its last and, those whose gradients were done before it, beside the second last
    parted = b0[-2] > lists0.forward_phases and lists0.reads_ending(0, b0[-2]).cores
    assert parted, "layer 0's update is taken in two parts"
    expected = [[False, False]] * sum(len(phases) for _, phases in placed[:3])
    expected += [[phase in (b0[-1], b0[-2]), phase == longest] for phase in sorted(placed[3][1])]
    assert noting.noted[-len(expected):] == expected
    before, adam_step = _words(trainer), trainer.optimizer.step
    noting.fail_at = len(noting.noted) + len(expected)  # the next step's last phase, both layers updated
    with pytest.raises(RuntimeError, match="the IP failed"):
        trainer.train_step(*batches[3])
    assert noting.noted[-len(expected):] == expected, "both layers were updated before the step failed"
    assert trainer.optimizer.step == adam_step
    assert all(np.array_equal(a.view(np.uint8), b.view(np.uint8)) for a, b in zip(_words(trainer), before))
    noting.fail_at = None
    trainer.train_step(*batches[3])
    other.train_step(*batches[3])
    assert all(np.array_equal(a.view(np.uint8), b.view(np.uint8)) for a, b in zip(_words(trainer), _words(other)))


@pytest.mark.parametrize("hand_off", ["float32", "exact"])
def test_three_layers_each_work_beside_the_layer_below_and_train_as_the_loop(hand_off):
    """Layers 1 and 2 are prepared beside layers 0 and 1's forward lists, and their gradients and updates run
    beside the backward lists of the layer below, each layer's trackers beside its own (a hidden layer's input
    tracker in its update, and where its input gradient passes beside its backward); four steps equal the
    loop's in every state word, with two hidden layers' outputs and input gradients passed on in either type."""
    from codesign.design.families.tt import paper_setup

    precision = {**_setup(hand_off=hand_off).precision}
    setup = paper_setup(2, precision, batch=8, modes=[((4, 4, 4), (2, 4, 4)), ((2, 4, 4), (2, 2, 4)),
                                                      ((2, 2, 4), (1, 2, 5))])
    lists, loop = TtListTrainer(setup, GoldenShell()), TtMlpTrainer(setup)
    rng = np.random.default_rng(3)
    for _ in range(4):
        x, y = rng.random((8, 64)).astype(np.float32), rng.integers(0, 10, 8)
        assert lists.train_step(x, y) == loop.train_step(x, y)
    assert lists.list_steps == 3
    # in float32 each layer's result went on as the receiving layer's codes, written straight from its sums: two
    # inputs and two output gradients a step; exact, from the values handed on, as the loop takes them
    assert lists.handed_on == (3 * 4 if hand_off == "float32" else 0)
    expected = set()
    # beside each direction's longest phase the layer above's work (the last layer's backward: the loss; a
    # forward: the next layer prepared, its bias with it), then a tracker's, the bias's (the first layer's forward;
    # a backward: its gradient) and (a hidden layer's backward) where its input gradient passes; the first layer's
    # early reads beside its last
    handed = hand_off == "float32"  # the output below, which wrote the codes, beside a hidden layer's forward
    works = {(0, "forward"): 3, (1, "forward"): 1 + handed, (2, "forward"): handed, (0, "backward"): 3,
             (1, "backward"): 4, (2, "backward"): 4}
    for layer in (0, 1, 2):
        built = lists.current_lists[layer]
        for phases in (range(built.forward_phases), range(built.forward_phases, len(built.phases))):
            way = "backward" if phases.start > 0 else "forward"
            expected |= {(layer, phase) for phase in _placed(built, phases, works[(layer, way)],
                                                              last=layer == 0 and way == "backward")}
            expected |= {(layer, 0)} if way == "forward" else set()  # the input's copy for the core gradient
    assert set(lists.beside_seconds) == expected and len(expected) >= 8
    for a, b in zip(_words(lists), _words(loop)):
        assert a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_a_shell_that_does_not_run_the_host_s_work_beside_a_phase_is_refused():
    """Else a layer's update would be dropped without a word."""
    setup = _setup()
    data = _data(train=2 * setup.batch_size)
    trainer = TtListTrainer(setup, GoldenShell())
    real = trainer.shell.run_phase
    trainer.shell.run_phase = lambda phase, arena, beside=None: real(phase, arena)
    x, y = data.train_x[:setup.batch_size], data.train_y[:setup.batch_size]
    trainer.train_step(x, y)  # the first step aims every scale on the host: no lists
    before = _words(trainer)
    with pytest.raises(HwTrainError, match="the shell did not run the host's work it was given beside a phase"):
        trainer.train_step(x, y)
    assert all(np.array_equal(a.view(np.uint8), b.view(np.uint8)) for a, b in zip(_words(trainer), before))


def test_lists_that_hold_sums_are_refused_on_shells_without_the_buffer():
    """The small buffers chain PE1's and PE2's sums: on IPs built without the accumulation buffer the lists are
    refused as they are built (the first list step), before the host writes anything."""
    setup, data = _setup(), _data(train=64)
    shell = GoldenShell(held_sums={"tt1": False})
    trainer = TtListTrainer(setup, shell)
    x, y = data.train_x[:setup.batch_size], data.train_y[:setup.batch_size]
    trainer.train_step(x, y)  # the first step aims every scale on the host
    with pytest.raises(HwTrainError, match="layer 0's tt1 lists hold sums across calls .* no accumulation buffer"):
        trainer.train_step(x, y)
    assert shell.lists == shell.flushed == 0
    lists = TtListTrainer(setup, GoldenShell())
    for _ in range(2):
        lists.train_step(x, y)
    assert all(built.holds("tt1") for built in lists.current_lists.values())


def test_the_exact_rule_cannot_run_on_lists():
    with pytest.raises(HwTrainError, match="scale_rule = 'tracked'"):
        TtListTrainer(_setup("exact"), GoldenShell())


@pytest.mark.parametrize("copies", [(1, 1), (2, 3)])
def test_the_next_batch_staged_beside_the_lists_changes_no_bit(unconvertible, copies):
    """The next batch is staged beside the first layer's second longest backward phase. A staged batch taken, one
    the caller changed in place after staging, one staged at a scale the step then does not aim, one never
    taken, one that fails the check and one NumPy cannot convert at all: each step equals a trainer's that stages
    nothing, every state word compared, and the bad batch fails its own step, not the one that staged it. On two
    PE1 and three PE2 IPs, PE1 takes some samples of each layer's first forward, and the staged batch's codes it
    reads transposed are written beside the step before (the other trainer writes them with the batch's)."""
    setup = _setup()
    data = _data(train=7 * setup.batch_size)
    batches = [(data.train_x[i:i + setup.batch_size], data.train_y[i:i + setup.batch_size])
               for i in range(0, 7 * setup.batch_size, setup.batch_size)]
    trainer, other = (TtListTrainer(setup, GoldenShell(copies=copies, share_products=1)) for _ in range(2))

    def both(index: int, next_x=None) -> None:
        assert trainer.train_step(*batches[index], next_x=next_x) == other.train_step(*batches[index])
        assert all(np.array_equal(a.view(np.uint8), b.view(np.uint8)) for a, b in zip(_words(trainer), _words(other)))

    both(0, next_x=batches[1][0])  # the loop's own step (scales unset) stages nothing
    both(1, next_x=batches[2][0])
    assert trainer.inputs_staged == 0
    lists = trainer.current_lists[0]
    ranked = _ranked(lists, range(lists.forward_phases, len(lists.phases)))
    # staged beside the second longest backward phase, which moves the output gradient's tracker to the third
    assert {(0, ranked[1]), (0, ranked[2])} <= set(trainer.beside_seconds)
    assert ("x transposed" in lists.inputs) == (copies == (2, 3))
    changed = np.array(batches[3][0])
    both(2, next_x=changed)
    assert trainer.inputs_staged == 1, "the batch staged beside the first list step was taken"
    assert trainer._staged.written_in is not None
    changed[:] = changed[::-1]  # changed in place after it was staged
    batches[3] = (changed, batches[3][1])
    both(3, next_x=batches[4][0])
    assert trainer.inputs_staged == 1
    # staged at a scale the step does not round at: its codes (zeros here) must not be taken
    trainer._staged = dataclasses.replace(trainer._staged, frac=trainer._staged.frac + 1,
                                          codes=np.zeros_like(trainer._staged.codes))
    both(4, next_x=batches[0][0])  # never taken: the next step takes another batch
    assert trainer.inputs_staged == 2
    bad = np.full_like(batches[5][0], np.nan)
    both(5, next_x=bad)
    assert trainer.inputs_staged == 2, "batch 0, staged beside step 4, was not taken by step 5"
    with pytest.raises(ValueError, match="x must be finite"):
        trainer.train_step(bad, batches[5][1])
    both(6, next_x=unconvertible)  # its conversion fails beside the lists: nothing staged, this step unharmed
    assert trainer._staged is None and trainer.inputs_staged == 2
    # a staged batch, then another of its shape that is not finite: the forward on the staged codes runs, the
    # error comes after it, and that forward is not counted (nor the one a changed batch, above, ran again)
    both(0, next_x=batches[1][0])
    with pytest.raises(ValueError, match="x must be finite"):
        trainer.train_step(np.full_like(batches[1][0], np.nan), batches[1][1])
    both(1)
    assert (trainer.runner.transactions, trainer.runner.macs) == (other.runner.transactions, other.runner.macs)


@pytest.mark.parametrize("copies", [(1, 1), (2, 3)])
def test_the_staged_batchs_codes_are_written_beside_the_step_before_not_at_its_start(monkeypatch, copies):
    """A step that takes its staged batch at the staged scale writes none of the batch's codes before its first
    list: the layouts the forward reads (and, where PE1 shares the first forward, the transposed codes it reads)
    were written beside the step before, with the staging; the first core's gradient's copy beside the first
    phase. No backward list reads what the staging writes over, nor a forward one the copy. A step given another
    batch writes the forward's layouts before it runs its forward again on them."""
    setup = _setup()
    data = _data(train=4 * setup.batch_size)
    batches = [(data.train_x[i:i + setup.batch_size], data.train_y[i:i + setup.batch_size])
               for i in range(0, 4 * setup.batch_size, setup.batch_size)]
    trainer = TtListTrainer(setup, GoldenShell(copies=copies, share_products=1))
    trainer.train_step(*batches[0], next_x=batches[1][0])
    trainer.train_step(*batches[1], next_x=batches[2][0])  # the first list step: it stages batch 2
    first_layer = trainer.current_lists[0]
    assert ("x transposed" in first_layer.inputs) == (copies == (2, 3))
    forward = range(first_layer.forward_phases)
    for name in ("x", "x transposed", "x core gradient"):
        if name in first_layer.inputs:
            item = first_layer.inputs[name]
            words = np.arange(item.rows.offset // 4, item.rows.offset // 4 + item.words)
            read = {index for index, phase in enumerate(first_layer.phases) for _, calls in phase for call in calls
                    if any(np.isin(block.word_indices(), words).any() for block in call.segments)}
            assert read and (read <= set(forward)) == (name != "x core gradient"), (name, read)
            assert read.isdisjoint(forward) == (name == "x core gradient"), (name, read)
    writes: list = []
    original = type(first_layer).write

    def write(lists, arena, **given):
        if lists.inputs is first_layer.inputs:
            writes.append(tuple(sorted(name for name, value in given.items() if value is not None)))
        return original(lists, arena, **given)
    monkeypatch.setattr(type(first_layer), "write", write)
    trainer.train_step(*batches[2], next_x=batches[3][0])
    assert trainer.inputs_staged == 1 and trainer._staged.frac == trainer.trackers[0]["act_frac_bits"][0]
    assert [w for w in writes if "x" in w or "x_t" in w] == [("x", "x_t")], writes  # the next batch's staging
    assert writes.index(("x_cg",)) < writes.index(("gy",)) < writes.index(("x", "x_t")), writes
    writes.clear()
    trainer.train_step(*batches[0], next_x=batches[1][0])  # not the batch staged: its forward runs again, on its
    assert writes.index(("x", "x_t")) < writes.index(("gy",)), writes  # codes, written before it


@pytest.mark.parametrize("staged", [False, True])
def test_the_first_layers_codes_written_beside_its_last_phases_are_taken_only_for_the_values_written(monkeypatch,
                                                                                                    staged):
    """Beside the first layer's last two backward phases (the last reads no core's codes, the one before it only
    the core whose input gradient it takes, the second layer's last reads its first core's) the host writes the
    codes of the cores it has updated there for the next step, which writes only the rest. Cores changed between
    the steps, in place or as new arrays, are written again (with the next batch ``staged``, those the first
    phase does not read beside it), and two trainers on one shell keep arenas of their own: each step equals the
    loop's in every state word."""
    setup = _setup()
    data = _data(train=6 * setup.batch_size)
    batches = [(data.train_x[i:i + setup.batch_size], data.train_y[i:i + setup.batch_size])
               for i in range(0, 6 * setup.batch_size, setup.batch_size)]
    shell = GoldenShell()
    lists, loop = TtListTrainer(setup, shell), TtMlpTrainer(setup)
    neighbour, its_loop = TtListTrainer(setup, shell), TtMlpTrainer(setup)  # the same arenas' keys but its own
    for index, (x, y) in enumerate(batches):
        for trainer in (lists, loop):
            if index == 3:  # in place
                for core in trainer.cores[0]:
                    core *= np.float32(0.5)
            if index == 4:  # new arrays
                trainer.cores[0] = [core * np.float32(0.5) for core in trainer.cores[0]]
        following = {"next_x": batches[(index + 1) % len(batches)][0]} if staged else {}
        assert lists.train_step(x, y, **following) == loop.train_step(x, y)
        assert neighbour.train_step(*batches[-1 - index]) == its_loop.train_step(*batches[-1 - index])
        for a, b in [*zip(_words(lists), _words(loop)), *zip(_words(neighbour), _words(its_loop))]:
            assert a.tobytes() == b.tobytes()
    arena, written = lists._written_early
    first, second = lists.current_lists[0], lists.current_lists[1]
    assert arena is lists._arena(0, first, lists.cores[0], setup.batch_size) is not neighbour._written_early[0]
    assert sorted(written) == list(first.backward_reads[1].cores)
    # updated in two parts, beside the second last phase those done before it, beside the last the rest; each
    # part's codes written beside its phase: the second last reads only the core whose input gradient it takes
    last = len(first.phases) - 1
    parts = [first.reads_ending(0, last - 1).cores, first.reads_ending(last - 1, last).cores]
    assert all(parts) and sorted(parts[0] + parts[1]) == sorted(written)
    assert first.cores_unread_from(last) and not first.cores_unread_from(last - 1)
    assert all(first.cores_unread_from(last - 1, (k,)) for k in parts[0])
    assert not any(first.cores_unread_from(last - 1, (k,)) for k in parts[1])
    assert not second.cores_unread_from(len(second.phases) - 1)
    writes, write = [], lists._write_cores

    def recorded(target, *args):  # the first layer's writes: (lists, cores, fracs, which, bits)
        if target is arena:
            writes.append(tuple(args[3]))
        return write(target, *args)
    with monkeypatch.context() as patched:
        patched.setattr(lists, "_write_cores", recorded)
        assert lists.train_step(*batches[0]) == loop.train_step(*batches[0])
    assert writes[-2:] == [tuple(sorted(parts[0])), tuple(sorted(parts[1]))]
    for a, b in zip(_words(lists), _words(loop)):
        assert a.tobytes() == b.tobytes()
    # beside a phase that reads cores nothing is written
    lists._written_early = None
    state, fracs = lists.layer_state(0), first.fracs
    lists._write_early(0, state, first, fracs, [1], last - 1)
    assert lists._written_early is None
    lists._write_early(0, state, first, fracs, [1], last)
    assert sorted(lists._written_early[1]) == [1]


def test_a_one_core_first_layer_updates_its_bias_beside_its_only_backward_phase_once():
    """A first layer of one core: its last backward phase is its only one, so beside it the host updates the bias
    alone (no other core's gradient is ready); four steps equal the loop's in every state word."""
    from codesign.design.families.tt import paper_setup

    setup = paper_setup(2, {**_setup().precision}, batch=8, modes=[((16,), (8,)), ((2, 4), (2, 5))])
    lists, loop = TtListTrainer(setup, GoldenShell()), TtMlpTrainer(setup)
    rng = np.random.default_rng(5)
    for _ in range(4):
        x, y = rng.random((8, 16)).astype(np.float32), rng.integers(0, 10, 8)
        assert lists.train_step(x, y) == loop.train_step(x, y)
    assert lists.list_steps == 3 and lists.current_lists[0].backward_reads[1].cores == ()
    for a, b in zip(_words(lists), _words(loop)):
        assert a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
