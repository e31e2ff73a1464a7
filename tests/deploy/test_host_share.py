"""Measuring the host's share on the board (``python -m codesign.deploy.host_share``) and the explorer reading it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codesign.deploy import board_attached
from codesign.deploy.host_share import main, where_measured
from codesign.design import load_design
from codesign.design.build import write_emulation_folder
from codesign.design.families import family_of
from codesign.design.families import loop_entry
from codesign.loops.host_share import HostReportError, read_host_report, write_host_report
from codesign.step.host import HostModel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def tt_design():
    return load_design(EXAMPLES / "digits_tt.toml")


@pytest.fixture(scope="module")
def tt_folder(tt_design, tmp_path_factory):
    return write_emulation_folder(tt_design, tmp_path_factory.mktemp("build") / "digits_tt")


def test_a_build_folder_gives_a_report_the_explorer_takes(tt_design, tt_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("BOARD", raising=False)  # off a board the report says so
    out = tmp_path / "host.json"
    assert main([str(tt_folder), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    host = read_host_report(out, loop_entry(tt_design))
    assert host.fixed_s >= 0 and host.seconds(100) > 0 and host.source.startswith("measured on this machine")
    # the explorer prices the host with the report, measuring nothing
    family = family_of(tt_design).explorer(tt_design, progress=lambda _: None, host=host)
    assert family.host == host


def test_the_source_names_the_board_the_image_names():
    machine = {"board": "Ultra96V2", "processor": "aarch64", "python": "3.12.3", "numpy": "1.26.4"}
    assert where_measured(machine) == "measured on the Ultra96V2 board (aarch64, Python 3.12.3, NumPy 1.26.4)"
    assert "not a board" in where_measured({**machine, "board": ""})


def test_bad_targets_are_refused_before_anything_is_written(tt_folder, stream_folder, tmp_path, capsys):
    out = tmp_path / "host.json"
    assert main([str(tt_folder), "--out", str(tmp_path / "missing" / "host.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([str(stream_folder), "--out", str(out)]) == 2  # three PEs: no loop a board runs
    assert "no training loop" in capsys.readouterr().err
    assert main([str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert not out.exists()


def test_the_explorer_refuses_a_report_of_another_loop_before_any_work(tt_folder, tmp_path):
    from codesign.cli import main as cli

    abvs = load_design(EXAMPLES / "digits_abvs.toml")
    path = write_host_report(tmp_path / "host.json", loop_entry(abvs), HostModel(fixed_s=0.01, per_call_s=0.0,
                                                                               source="x"))
    out = tmp_path / "explore"
    assert cli(["explore", str(EXAMPLES / "digits_tt.toml"), "--host", str(path), "--out", str(out)]) != 0
    assert not out.exists()
    with pytest.raises(HostReportError, match="measured for another loop"):
        read_host_report(path, loop_entry(load_design(EXAMPLES / "digits_tt.toml")))


@pytest.mark.board
@pytest.mark.skipif(not os.environ.get("CODESIGN_BOARD_BUNDLE"),
                    reason="set CODESIGN_BOARD_BUNDLE to the name of an installed bundle with a training loop")
@pytest.mark.skipif(not board_attached(), reason="no PYNQ board attached (pynq finds no device)")
def test_the_host_share_is_measured_on_the_board(tmp_path):
    """On a PYNQ board: the installed bundle's loop, timed on the board's CPU, labelled with the board."""
    out = tmp_path / "host.json"
    assert main([os.environ["CODESIGN_BOARD_BUNDLE"], "--out", str(out)]) == 0
    from codesign.deploy.bundle import installed_bundle

    host = read_host_report(out, installed_bundle(os.environ["CODESIGN_BOARD_BUNDLE"]).manifest["loop"])
    assert host.fixed_s > 0 and host.source.startswith("measured on the ") and "board" in host.source


def test_list_steps_timed_on_the_ips_give_a_report_the_conv_explorer_takes_as_it_is(tmp_path, monkeypatch, capsys):
    """``--lists`` on the emulated board: the conv family's board trainer through its warm-up and pruning, then
    two list steps timed; the report says so, and a list family's explorer prices its host with it unchanged."""
    from codesign.design.explore_model import list_step_host
    from codesign.loops.data import save_npz
    from codesign.train.trainer import load_dataset

    monkeypatch.delenv("BOARD", raising=False)
    design = load_design(Path(__file__).resolve().parents[1] / "design" / "fixtures" / "small_conv.toml")
    folder = write_emulation_folder(design, tmp_path / "small_conv")
    data = save_npz(load_dataset(design.training), tmp_path / "data.npz")
    out = tmp_path / "host.json"
    assert main([str(folder), "--out", str(out)]) == 2  # the NumPy loop alone cannot say: a conv loop is lists
    assert "--lists" in capsys.readouterr().err and not out.exists()
    assert main([str(folder), "--lists", "--emulate", "--steps", "2", "--out", str(out)]) == 2  # no data given
    assert "needs the data set" in capsys.readouterr().err
    assert main([str(folder), "--data", str(data), "--lists", "--emulate", "--steps", "2", "--out", str(out)]) == 0
    host = read_host_report(out, loop_entry(design))
    # the conv loop works nothing beside its lists (its host is under 1 % of a step)
    assert host.list_step and host.per_call_s == 0 and 0 < host.fixed_s < 1 and host.beside_s == 0
    assert host.source.endswith("the median of 2 list steps on the IPs (emulated)")
    assert list_step_host(host, lambda: 1 / 0, lambda _: None) == host  # measured nothing here


def test_list_steps_timed_on_the_ips_keep_the_work_beside_them_apart(tmp_path, monkeypatch):
    """``--lists`` of an MLP's CSB loop, whose host takes the loss and writes the next batch while the last phase
    computes: the report keeps those seconds apart (``beside_s``) from those between the phases (``fixed_s``),
    and the explorer hides them behind that phase instead of adding them to the step."""
    from codesign.design.explore_model import list_step_host
    from codesign.loops.data import save_npz
    from codesign.train.trainer import load_dataset

    monkeypatch.delenv("BOARD", raising=False)
    design = load_design(EXAMPLES / "digits_compressed_mlp.toml")
    folder = write_emulation_folder(design, tmp_path / "mlp")
    data = save_npz(load_dataset(design.training), tmp_path / "data.npz")
    out = tmp_path / "host.json"
    assert main([str(folder), "--data", str(data), "--lists", "--emulate", "--steps", "3", "--out", str(out)]) == 0
    host = read_host_report(out, loop_entry(design))
    assert host.list_step and 0 < host.fixed_s < 1 and 0 < host.beside_s < 1
    assert list_step_host(host, lambda: 1 / 0, lambda _: None) == host
