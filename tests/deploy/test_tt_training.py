"""TT training through the driver on the emulated board ends bit-identical to the golden TT loop of the design point.

The design is the shipped examples/digits_tt.toml (a 64-64-10 MLP of TT
layers on the digits, 4-bit cores, 8-bit activations, 16-bit gradients, the
low-rank prior) with two copies of PE1 and of PE2, their data over two HP
ports; every contraction of the board run goes to a tt1 or tt2 IP's
generated HLS C++ on the emulated board, each stage's calls split over the
copies. The golden run computes the
same schedule with the golden PE kernels. The quick run trains on the first
128 training images (2 steps per epoch) over 2 epochs with pruning after the
first, and evaluates on 64 test images.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

from codesign.deploy import CodesignOverlay, OverlayMismatch
from codesign.design.build import write_emulation_folder
from codesign.deploy.driver import AccelTimeout
from codesign.deploy.manifest import DeployError
from codesign.board_tt import BoardTtTrainer
from codesign.deploy.families import board_trainer, get_family, golden_trainer
from codesign.deploy.tt_training import IpRunner, TtBoardTrainer
from codesign.design.families.tt import tt_setup_of
from codesign.loops.tt import TtMlpTrainer
from codesign.design import design_from_dict, load_design
from codesign.step.tt.schedule import StepHardware
from codesign.step.tt.step import step_plan
from codesign.train.data import Dataset, load_digits_dataset
from codesign.train.config import read_toml
from codesign.train.hw_golden_tt import TtHwTrainer, design_hardware

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _design(epochs: int = 2, route: str = "direct", forward_split: bool = False, scale_rule: str = "exact",
            stream_bits: int = 32, hidden: int | None = None, pairs: bool = False, hand_off: str = "float32",
            **prior):
    """The shipped example with two copies of PE1 and of PE2: every contraction stage is split over the copies;
    ``route``: the precision's core_grad_route; ``forward_split``: [design] forward_split; ``scale_rule``: the
    precision's; ``stream_bits``: PE1's and PE2's stream words; ``hidden``: the hidden layer's units (default: the
    example's); ``pairs``: PE1 built with j pairs and PE2 with row pairs (docs/tt_pe.md); ``hand_off``: the
    precision's."""
    raw = read_toml(EXAMPLES / "digits_tt.toml")
    for pe in ("tt1", "tt2"):
        raw["design"]["pe"][pe]["copies"] = 2
        raw["design"]["pe"][pe]["stream_bits"] = stream_bits
        if pairs:
            raw["design"]["pe"][pe]["j_pairs" if pe == "tt1" else "row_pairs"] = True
    if hidden is not None:
        raw["model"]["hidden"] = [hidden]
    raw["design"]["hp_ports"] = 2  # tt1_0, tt2_0 and tt3_0 on the first; tt1_1 and tt2_1 on the second
    raw["techniques"]["tt"]["precision"]["core_grad_route"] = route
    raw["techniques"]["tt"]["precision"]["scale_rule"] = scale_rule
    raw["techniques"]["tt"]["precision"]["hand_off"] = hand_off
    raw["design"]["forward_split"] = forward_split
    design = design_from_dict(raw)
    training = design.training
    tt = training.techniques["tt"]
    tt = dataclasses.replace(tt, prior=dataclasses.replace(tt.prior, **prior))
    training = training.replace(optim=dataclasses.replace(training.optim, epochs=epochs), techniques={"tt": tt})
    return dataclasses.replace(design, training=training)


def _subset(train: int, test: int) -> Dataset:
    data = load_digits_dataset()
    return Dataset(data.train_x[:train], data.train_y[:train], data.test_x[:test], data.test_y[:test], data.classes)


def emulated(design, folder: Path) -> CodesignOverlay:
    """The design's emulation folder written under ``folder`` and loaded as an emulated board."""
    built = write_emulation_folder(design, folder / design.board.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CodesignOverlay(built, design=design, emulate=True)


@pytest.fixture(scope="module")
def overlay(tmp_path_factory):
    return emulated(_design(), tmp_path_factory.mktemp("tt"))


def _bits(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


def assert_same_weights(board, golden) -> int:
    """Every shadow core, bias and Adam moment word equal, and every scale; returns the 32-bit words compared."""
    mine, theirs = board.read_weights(), golden.read_weights()
    assert mine["ranks"] == theirs["ranks"] and mine["trackers"] == theirs["trackers"]
    compared = 0
    arrays = [(a, b) for la, lb in zip(mine["cores"], theirs["cores"]) for a, b in zip(la, lb)]
    arrays += list(zip(mine["biases"], theirs["biases"]))
    arrays += [(a, b) for ma, mb in zip(mine["moments"], theirs["moments"]) for a, b in zip(ma, mb)]
    for index, (a, b) in enumerate(arrays):
        assert a.shape == b.shape
        differ = np.flatnonzero(_bits(a) != _bits(b))
        assert differ.size == 0, f"array {index}: {differ.size} of {a.size} words differ"
        compared += a.size
    return compared


def _both_runs(overlay, design, data):
    board = BoardTtTrainer(overlay, design, dataset=data)
    golden = TtHwTrainer.from_design(design, dataset=data)
    board.fit(progress=False)
    golden.fit(progress=False)
    return board, golden


def test_training_through_the_driver_is_bit_identical_to_the_golden_loop(overlay):
    design = _design(warmup_epochs=1, threshold=0.8, prune_from_epoch=0)
    board, golden = _both_runs(overlay, design, _subset(128, 64))
    assert board.trainer.history == golden.trainer.history
    assert board.read_weights()["ranks"] != [(1, 4, 4, 1), (1, 4, 4, 1)], "the prior pruned ranks after epoch 0"
    parameters = sum(int(p.numel()) for layer in golden.layers for p in layer.parameters())
    assert assert_same_weights(board, golden) == 3 * parameters  # parameters and Adam's two moments
    figures, reference = board.throughput(), golden.throughput()
    assert figures["steps"] == reference["steps"] == 4
    assert figures["pe_transactions"] == reference["pe_transactions"] and figures["macs"] == reference["macs"]
    assert figures["replay_misses"] == 0 and figures["replayed_transactions"] > 0
    assert figures["emulated"] and 0 < figures["ip_calls"] <= figures["pe_transactions"]
    assert figures["pe_cycles"] > figures["macs"] // (8 * 4)  # no more than 32 MACs a cycle in one copy
    assert figures["pe_cycles"] / 4 <= figures["pe_makespan"] < figures["pe_cycles"]  # four copies side by side
    runner = board.ip_runner
    assert all(driver.calls > 0 for pe in ("tt1", "tt2") for driver in runner.drivers[pe])
    step = _subset(64, 64)
    for trainer in (board, golden):
        trainer.train_step(step.train_x, step.train_y)
    assert assert_same_weights(board, golden) == 3 * parameters
    assert np.array_equal(board.predict(step.test_x), golden.predict(step.test_x))


def test_an_ip_time_out_part_way_leaves_the_step_undone(overlay, monkeypatch):
    """The core-gradient calls (tt1, in the backward pass, after the forward pass on tt2) time out: the step is
    taken back whole, and once the IP answers again the run goes on as if nothing had failed."""
    design, data = _design(), _subset(128, 64)
    board, golden = BoardTtTrainer(overlay, design, dataset=data), TtHwTrainer.from_design(design, dataset=data)
    x, y = data.train_x[:64], data.train_y[:64]
    for trainer in (board, golden):
        trainer.train_step(x, y)
    driver = board.ip_runner.drivers["tt1"][1]

    def timing_out(*args, **kwargs):
        raise AccelTimeout(f"{driver.ip_name}: ap_done did not rise (a stalled kernel)")

    calls = board.throughput()["ip_calls"]
    monkeypatch.setattr(driver, "_wait_done", timing_out)
    with pytest.raises(AccelTimeout, match="ap_done did not rise"):
        board.train_step(data.train_x[64:], data.train_y[64:])
    assert board.throughput()["ip_calls"] > calls  # the forward pass had run on tt2 before tt1 timed out
    assert all(d._pending is None for copies in board.ip_runner.drivers.values() for d in copies)  # all waited for
    assert board.throughput()["steps"] == 1 and assert_same_weights(board, golden) > 0
    monkeypatch.undo()
    for trainer in (board, golden):
        trainer.train_step(data.train_x[64:], data.train_y[64:])
    assert assert_same_weights(board, golden) > 0
    assert board.trainer.ledger.state_dict() == golden.trainer.ledger.state_dict()


def _same_state(board, golden) -> int:
    """Every word of the NumPy loops' state equal (cores, biases, Adam's moments, trackers and their running means,
    ranks); words compared."""
    mine, theirs = board.read_weights(), golden.read_weights()
    compared = 0
    for key in ("cores", "biases", "moments", "trackers", "means", "ranks"):
        assert len(mine[key]) == len(theirs[key]), key
        for index, (a, b) in enumerate(zip(mine[key], theirs[key])):
            assert a.shape == b.shape and a.dtype == b.dtype, (key, index)
            differ = np.count_nonzero(a.view(np.uint8) != b.view(np.uint8))
            assert differ == 0, f"{key}[{index}]: {differ} bytes differ"
            compared += a.size
    return compared


def test_the_numpy_loop_on_the_ips_is_bit_identical_to_the_golden_numpy_loop(overlay):
    """The board runtime's TT loop (no torch): two epochs with a pruning after the first, then one more step."""
    changes = get_family("tt").quick_changes
    board, golden = board_trainer(overlay, **changes), golden_trainer(overlay.manifest, **changes)
    assert type(board) is TtBoardTrainer  # the family's trainer of a set-up at exact scales: one call a contraction
    assert isinstance(golden, TtMlpTrainer) and golden.setup == board.setup
    data = _subset(128, 64)
    for trainer in (board, golden):
        trainer.fit(data, progress=False)
    assert [row["accuracy"] for row in board.history] == [row["accuracy"] for row in golden.history]
    assert [row["loss"] for row in board.history] == [row["loss"] for row in golden.history]
    assert board.prune_events and board.prune_events == golden.prune_events, "the threshold pruned ranks"
    assert board.ranks() != [(1, 4, 4, 1), (1, 4, 4, 1)]
    compared = _same_state(board, golden)
    parameters = sum(core.size for cores in golden.cores for core in cores) + sum(b.size for b in golden.biases)
    assert compared > 3 * parameters  # parameters, Adam's two moments, trackers and ranks
    figures, reference = board.throughput(), golden.throughput()
    assert figures["steps"] == reference["steps"] == 4 and figures["macs"] == reference["macs"]
    assert figures["transactions"] == reference["transactions"] and figures["replay_misses"] == 0
    assert figures["emulated"] and all(driver.calls > 0 for pe in ("tt1", "tt2")
                                       for driver in board.ip_runner.drivers[pe])
    assert board.ip_runner.drivers["tt3"][0].calls == 0  # the direct route has no outer products
    for trainer in (board, golden):
        trainer.train_step(data.train_x[:64], data.train_y[:64])
    assert _same_state(board, golden) == compared
    assert np.array_equal(board.predict(data.test_x), golden.predict(data.test_x))


def test_the_numpy_loop_takes_a_failed_step_back_whole(overlay, monkeypatch):
    """A tt1 copy times out in the backward pass: scales and weights stay those of the last whole step."""
    board, golden = TtBoardTrainer(overlay), golden_trainer(overlay.manifest)
    data = _subset(128, 64)
    for trainer in (board, golden):
        trainer.train_step(data.train_x[:64], data.train_y[:64])
    driver = board.ip_runner.drivers["tt1"][1]

    def timing_out(*args, **kwargs):
        raise AccelTimeout(f"{driver.ip_name}: ap_done did not rise (a stalled kernel)")

    monkeypatch.setattr(driver, "_wait_done", timing_out)
    with pytest.raises(AccelTimeout, match="ap_done did not rise"):
        board.train_step(data.train_x[64:], data.train_y[64:])
    assert board.step == 1 and _same_state(board, golden) > 0
    monkeypatch.undo()
    for trainer in (board, golden):
        trainer.train_step(data.train_x[64:], data.train_y[64:])
    assert _same_state(board, golden) > 0


def test_design_json_records_the_numpy_loop_of_the_design(overlay):
    """The set-up design.json holds is the design point's, and a set-up whose TT builds are not the IPs' is refused."""
    design = _design()
    assert overlay.manifest["loop"] == {"family": "tt", "setup": tt_setup_of(design).to_dict()}
    ips = overlay.manifest["loop"]["setup"]["ips"]
    bigger = [[name, pe, {**spec, "lanes": spec["lanes"] * 2} if pe == "tt2" else spec] for name, pe, spec in ips]
    with pytest.raises(DeployError, match=r"loop.setup.ips"):
        TtBoardTrainer(overlay, ips=tuple(tuple(ip) for ip in bigger))


def test_a_design_the_overlay_does_not_implement_is_refused(overlay):
    other = load_design(EXAMPLES / "digits_abvs.toml")
    with pytest.raises(OverlayMismatch, match=r"needs IP fpmac_array_0"):
        BoardTtTrainer(overlay, other)


def test_the_ip_runner_refuses_calls_planned_for_other_builds(overlay):
    design = _design()
    runner = IpRunner({"tt1": [overlay.accelerator("tt1_0"), overlay.accelerator("tt1_1")],
                       "tt2": [overlay.accelerator("tt2_0"), overlay.accelerator("tt2_1")]}, design_hardware(design))
    with pytest.raises(DeployError, match=r"planned for other PE builds"):
        runner.run(StepHardware(), [("tt2", np.zeros((1, 1, 1), np.int64), np.zeros((1, 1), np.int64))])
    with pytest.raises(DeployError, match=r"IP tt1_0 is a tt1 PE, not tt2"):
        IpRunner({"tt2": overlay.accelerator("tt1_0")}, design_hardware(design))
    with pytest.raises(DeployError, match=r"the hardware has 2 tt1 copies, and 1 tt1 IPs were given"):
        IpRunner({"tt1": overlay.accelerator("tt1_0")}, design_hardware(design))
    no_tt2 = IpRunner({"tt1": [overlay.accelerator("tt1_0"), overlay.accelerator("tt1_1")]}, design_hardware(design))
    with pytest.raises(DeployError, match=r"the overlay has no tt2 IP"):
        no_tt2.run(design_hardware(design), [("tt2", np.zeros((1, 1, 1), np.int64), np.zeros((1, 1), np.int64))])


@pytest.mark.long
def test_two_full_epochs_on_the_digits_bit_identical(overlay):
    """The example's settings on all 1347 training images (22 steps an epoch), 2 epochs, full test set."""
    design = _design()
    board, golden = _both_runs(overlay, design, load_digits_dataset())
    assert board.throughput()["steps"] == 44
    assert assert_same_weights(board, golden) > 0


def test_the_board_reports_the_step_model_beside_its_wall_time(overlay):
    """One step's stages as the IP runner logged them, priced by the step model, equal the desktop's model of the
    same step (codesign.step.time), the busiest HP port's words of every stage included; evaluations are
    kept out of it."""
    from codesign.boards import boards
    from codesign.step.tt.time import tt_stages, tt_step_time
    from codesign.step.host import HostModel

    board = TtBoardTrainer(overlay)
    data = _subset(128, 64)
    board.train_step(data.train_x[:64], data.train_y[:64])
    board.evaluate(data.test_x, data.test_y)  # logged by the runner, not part of the step
    figures = board.throughput()
    model = figures["model"]
    assert overlay.manifest["data_ports"] == ["S_AXI_HP0", "S_AXI_HP1"]
    assert [ip["hp_port"] for ip in overlay.manifest["ips"]] == [0, 1, 0, 1, 0]
    desktop = tt_step_time(board.setup, board.hardware, boards()[overlay.manifest["board"]],
                           clock_mhz=overlay.manifest["clock_mhz"], host=HostModel(fixed_s=0, per_call_s=0,
                                                                                    source="none"), hp_ports=2)
    stages, _ = tt_stages(board.setup, board.hardware, hp_ports=2)
    logged = board.__dict__["_training_stages"].stages
    # the desktop lists the layers' stages one layer after the other, the board in the order they ran
    assert sorted((s.cycles, s.words_in, s.words_out, s.port_in, s.port_out) for s in stages) == sorted(logged)
    assert any(s.port_in < s.words_in for s in stages)  # the copies' words split over the two ports
    assert model["pe_s_per_step"] == pytest.approx(desktop.pe_s, rel=1e-12)
    assert model["memory_s_per_step"] == pytest.approx(desktop.memory_s, rel=1e-12, abs=1e-15)
    assert model["stages"] == desktop.stages and not model["evaluation_included"]
    assert figures["seconds_per_step"] > 0 and len(board.ip_runner.stages.stages) > model["stages"]


def test_the_dense_route_on_the_ips_is_bit_identical_to_the_golden_numpy_loop(tmp_path):
    """core_grad_route = "dense": PE3's IP takes the outer products, the tt1 and tt2 copies the route's
    contractions; the board runtime's loop (no torch) ends every word equal to the golden NumPy loop's."""
    design = _design(route="dense")
    overlay = emulated(design, tmp_path)
    changes = {**get_family("tt").quick_changes, "epochs": 1}
    board, golden = TtBoardTrainer(overlay, **changes), golden_trainer(overlay.manifest, **changes)
    assert board.setup.precision["core_grad_route"] == "dense" and golden.setup == board.setup
    data = _subset(128, 64)
    for trainer in (board, golden):
        trainer.fit(data, progress=False)
    assert [row["loss"] for row in board.history] == [row["loss"] for row in golden.history]
    assert _same_state(board, golden) > 0
    calls = {pe: sum(driver.calls for driver in copies) for pe, copies in board.ip_runner.drivers.items()}
    assert calls["tt3"] > 0 and calls["tt1"] > 0 and calls["tt2"] > 0


def test_the_forward_split_on_the_ips_is_bit_identical_to_the_golden_loop_without_it(tmp_path):
    """[design] forward_split: the forward contractions' calls go to the tt2 IPs and, swapped, to the tt1 IPs;
    the board runtime's loop ends every word equal to the golden NumPy loop that runs them all on PE2."""
    design = _design(epochs=1, forward_split=True)
    overlay = emulated(design, tmp_path)
    changes = get_family("tt").quick_changes
    board = TtBoardTrainer(overlay, **changes)
    golden = golden_trainer(overlay.manifest, **changes)
    assert board.setup.forward_split and board.hardware.forward_split and board.ip_runner.hardware.forward_split
    golden = TtMlpTrainer(dataclasses.replace(golden.setup, forward_split=False))
    plan = step_plan(board.layer_state(0), 64, board.hardware)
    assert any(call.swapped for call in plan.calls)
    data = _subset(128, 64)
    for trainer in (board, golden):
        trainer.fit(data, progress=False)
    assert [row["loss"] for row in board.history] == [row["loss"] for row in golden.history]
    assert _same_state(board, golden) > 0
    assert board.throughput()["transactions"] != golden.throughput()["transactions"]  # other calls, same numbers


def test_tracked_scales_on_the_ips_are_bit_identical_to_the_golden_numpy_loop(tmp_path):
    """scale_rule = "tracked" (paper 003, Sec. 3.3): every tensor rounded at the scale its running mean gave after
    the step before; the board runtime's loop ends every word equal to the golden NumPy loop's, running means
    included, and the run differs from the exact rule's."""
    design = _design(epochs=1, scale_rule="tracked")
    overlay = emulated(design, tmp_path)
    changes = get_family("tt").quick_changes
    board, golden = TtBoardTrainer(overlay, **changes), golden_trainer(overlay.manifest, **changes)
    assert board.setup.precision["scale_rule"] == "tracked" and golden.setup == board.setup
    exact = TtMlpTrainer(dataclasses.replace(golden.setup, precision={**golden.setup.precision,
                                                                      "scale_rule": "exact"}))
    data = _subset(128, 64)
    for trainer in (board, golden, exact):
        trainer.fit(data, progress=False)
    assert [row["loss"] for row in board.history] == [row["loss"] for row in golden.history]
    assert _same_state(board, golden) > 0
    assert all(mean > 0 for means in board.read_weights()["means"][1:3] for mean in means)  # act, grad observed
    assert [row["loss"] for row in board.history] != [row["loss"] for row in exact.history]
