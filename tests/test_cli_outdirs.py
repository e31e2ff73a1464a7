"""Every command that writes follows one output-folder rule (codesign.io.outdir), checked before any work.

For each command: a folder holding a user's file, an existing plain file and
a folder to be created in a read-only folder are refused with exit status 2,
a message naming the folder and no traceback; the user's file is untouched
and nothing else is written.
"""

import json
import os

import pytest

from codesign.cli import main
from codesign.io.outdir import OUTPUT_MARKER, read_output_marker
from codesign.resources import data_dir

EXAMPLE = str(data_dir("examples") / "digits_abvs.toml")
TRAIN_TOML = ('seed = 1\n[data]\nname = "synthetic"\nsynthetic_samples = 40\n[model]\nname = "mlp"\n'
              '[optim]\nepochs = 1\nbatch_size = 20\n')
GRID_TOML = 'function = "builtins:dict"\n[grid]\nx = [4]\n'  # a task that runs: dict(x=4)


def _inputs(tmp_path):
    """The input files the commands read (written before the snapshot, so they count as the user's)."""
    inputs = tmp_path / "inputs"
    inputs.mkdir(exist_ok=True)
    (inputs / "train.toml").write_text(TRAIN_TOML)
    (inputs / "grid.toml").write_text(GRID_TOML)
    return inputs


# command name -> (arguments for an output path OUT and the inputs folder, the folder the rule checks for OUT)
COMMANDS = {
    "generate": (lambda out, inp: ["generate", "fpmac", "--max-fb", "4", "--out", out], lambda out: out),
    "verify": (lambda out, inp: ["verify", "fpmac", "--levels", "golden", "--max-fb", "4", "--random-per-fb", "10",
                                 "--work", out], lambda out: out),
    "estimate": (lambda out, inp: ["estimate", "fpmac", "--max-fb", "4", "--families", "xc7", "--out", out],
                 lambda out: out),
    "design": (lambda out, inp: ["design", EXAMPLE, "--cache", str(inp / "cache"), "--out", out], lambda out: out),
    "build": (lambda out, inp: ["build", EXAMPLE, "--cache", str(inp / "cache"), "--dry-run", "--out", out],
              lambda out: out),
    "bundle": (lambda out, inp: ["bundle", EXAMPLE, "--out", out], lambda out: out),
    "train": (lambda out, inp: ["train", str(inp / "train.toml"), "--out", out], lambda out: out),
    "sweep": (lambda out, inp: ["sweep", "--grid", str(inp / "grid.toml"), "--workers", "0", "--out", out],
              lambda out: out),
    "reproduce": (lambda out, inp: ["reproduce", "smd", "--smoke", "--workers", "0", "--out", out],
                  lambda out: os.path.join(out, "smd")),
    "demo": (lambda out, inp: ["demo", "--pe", "fpmac", "--out", out], lambda out: out),
}


def tree(root):
    return sorted((str(p.relative_to(root)), p.read_bytes() if p.is_file() else None) for p in root.rglob("*"))


def refused(command, out, tmp_path, capsys, named):
    """Run ``command`` on ``out``; it must exit 2 naming ``named``, without a traceback or any file written."""
    arguments, _ = COMMANDS[command]
    inputs = _inputs(tmp_path)
    before = tree(tmp_path)
    capsys.readouterr()
    assert main(arguments(str(out), inputs)) == 2
    err = capsys.readouterr().err
    assert err.startswith("codesign: error: ") and str(named) in err, err
    assert "Traceback" not in err and "Errno" not in err, err
    assert tree(tmp_path) == before  # the user's file untouched, nothing else written (no cache, no checkpoint)
    return err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_folder_holding_a_users_file_is_refused(command, tmp_path, capsys):
    _, folder_of = COMMANDS[command]
    out = tmp_path / "out"
    folder = tmp_path / folder_of("out")
    folder.mkdir(parents=True)
    (folder / "fit.json").write_text("the user's own fit.json")
    err = refused(command, out, tmp_path, capsys, folder)
    assert "refusing to write into" in err
    assert (folder / "fit.json").read_text() == "the user's own fit.json"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_existing_file_as_the_output_folder_is_refused(command, tmp_path, capsys):
    out = tmp_path / "out.txt"
    out.write_text("the user's file")
    refused(command, out, tmp_path, capsys, out)
    assert out.read_text() == "the user's file"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_read_only_parent_is_refused_before_any_work(command, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user (root) who may write into a read-only folder")
        err = refused(command, locked / "out", tmp_path, capsys, locked)
        assert "not writable" in err
    finally:
        locked.chmod(0o700)


def test_a_folder_written_by_another_command_is_refused_and_its_own_is_reused(tmp_path, capsys):
    inputs = _inputs(tmp_path)
    out = tmp_path / "out"
    assert main(["train", str(inputs / "train.toml"), "--out", str(out)]) == 0
    assert read_output_marker(out) == "train"
    result = (out / "result.json").read_bytes()
    assert main(["sweep", "--grid", str(inputs / "grid.toml"), "--workers", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out} was written by `codesign train`, not `codesign sweep`" in err and "Traceback" not in err
    assert (out / "result.json").read_bytes() == result and not (out / "results").exists()
    assert main(["train", str(inputs / "train.toml"), "--out", str(out)]) == 2  # an earlier run: never replaced silently
    assert "holds an earlier run (result.json, checkpoint.pt): --resume continues it, --force replaces it" in \
        capsys.readouterr().err and (out / "result.json").read_bytes() == result
    assert main(["train", str(inputs / "train.toml"), "--out", str(out), "--force"]) == 0  # its own folder: reused
    assert json.loads((out / "result.json").read_text())["steps"] > 0
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", OUTPUT_MARKER, "result.json"]


def test_a_refusal_after_the_claim_leaves_no_folder_behind(tmp_path, capsys, monkeypatch):
    import codesign.sweep

    def refuse(*args, **kwargs):
        raise ValueError("refused inside run_sweep")

    monkeypatch.setattr(codesign.sweep, "run_sweep", refuse)  # every check passed, the folder claimed, then this
    inputs = _inputs(tmp_path)
    out = tmp_path / "new" / "out"
    assert main(["sweep", "--grid", str(inputs / "grid.toml"), "--workers", "0", "--out", str(out)]) == 2
    assert "refused inside run_sweep" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_bad_sweep_arguments_are_refused_before_the_claim(tmp_path, capsys):
    inputs = _inputs(tmp_path)
    out = tmp_path / "new" / "out"
    with pytest.raises(SystemExit) as refused:  # argparse's type check names the flag
        main(["sweep", "--grid", str(inputs / "grid.toml"), "--workers", "-1", "--out", str(out)])
    assert refused.value.code == 2 and "argument --workers: must be a whole number >= 0" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_report_folders_written_before_markers_are_reproduces_own(tmp_path):
    from codesign.reproduce import check_report_dir

    legacy = tmp_path / "smd"
    legacy.mkdir()
    (legacy / "results.json").write_text(json.dumps({"name": "smd", "all_targets_met": True}))
    assert check_report_dir(legacy) == legacy
    (legacy / "results.json").write_text(json.dumps({"name": "someone else's"}))
    with pytest.raises(ValueError, match="holds no codesign_output.json"):
        check_report_dir(legacy)
