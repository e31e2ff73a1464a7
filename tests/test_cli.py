"""The command line refuses bad input before writing anything, and runs the flow on good input."""

import json
import shutil
from pathlib import Path

import pytest

from codesign.cli import main


def exit_code(argv: list[str]) -> int:
    """The CLI's exit status, whether a command returned it or argparse refused an argument (SystemExit)."""
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code


@pytest.mark.parametrize(
    "args, message",
    [
        (["--max-fb", "30"], "max_fb=30 is out of range"),
        (["--max-fb", "0"], "max_fb=0 is out of range"),
        (["--exp-bits", "9"], "exp_bits=9 is out of range"),
        (["--part", "xc7a35t"], "unknown FPGA part 'xc7a35t'"),
        (["--board", "pynq-z9"], "unknown board 'pynq-z9'"),
        (["--clock-mhz", "10000"], "clock 10000 MHz is out of range [10, 1000] MHz"),
        (["--top", "9lives"], "is not a C identifier"),
    ],
)
def test_generate_rejects_bad_specs_without_writing(tmp_path, capsys, args, message):
    out = tmp_path / "project"
    assert exit_code(["generate", "fpmac", *args, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_generate_refuses_a_foreign_directory(tmp_path, capsys):
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("mine")
    assert main(["generate", "fpmac", "--out", str(foreign)]) != 0
    assert "refusing" in capsys.readouterr().err
    assert [p.name for p in foreign.iterdir()] == ["todo.txt"]


def test_generate_then_regenerate_is_byte_identical(tmp_path):
    out = tmp_path / "project"
    assert main(["generate", "fpmac", "--max-fb", "12", "--board", "ultra96v2", "--out", str(out)]) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert main(["generate", "fpmac", "--max-fb", "12", "--board", "ultra96v2", "--out", str(out)]) == 0
    assert first == {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert "xczu3eg-sbva484-1-i" in (out / "run_hls.tcl").read_text()


def test_build_without_vendor_tools_says_what_is_missing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "project"
    assert main(["generate", "fpmac", "--out", str(out)]) == 0
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert main(["build", str(out)]) == 2
    err = capsys.readouterr().err
    assert "none of vitis_hls, vivado_hls is on PATH" in err and "vitis_hls -f run_hls.tcl" in err
    assert main(["build", str(out), "--dry-run"]) == 0
    assert "would run: cd" in capsys.readouterr().out
    assert main(["build", str(tmp_path)]) == 2
    assert "is not a codesign project" in capsys.readouterr().err


@pytest.mark.vendor
@pytest.mark.skipif(shutil.which("vitis_hls") is None, reason="vitis_hls is not on PATH")
def test_build_runs_vitis_hls(tmp_path):
    out = tmp_path / "project"
    assert main(["generate", "fpmac", "--max-fb", "10", "--out", str(out)]) == 0
    assert main(["build", str(out)]) == 0


def test_verify_rejects_unknown_level_before_writing(tmp_path, capsys):
    work = tmp_path / "work"
    assert exit_code(["verify", "fpmac", "--levels", "golden,gates", "--work", str(work)]) == 2
    assert "unknown verification level" in capsys.readouterr().err
    assert not work.exists()


def test_verify_golden_level_writes_a_report(tmp_path, capsys):
    work = tmp_path / "work"
    assert main(["verify", "fpmac", "--levels", "golden", "--max-fb", "8", "--random-per-fb", "200", "--work", str(work)]) == 0
    report = json.loads((work / "verify.json").read_text())
    assert report["passed"] and report["results"][0]["level"] == "golden" and report["results"][0]["vectors"] > 200
    assert "| golden |" in capsys.readouterr().out


def test_verify_all_levels_with_a_relative_work_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "fpmac", "--max-fb", "6", "--exp-bits", "5", "--fb-values", "3,6", "--random-per-fb", "300",
                 "--work", "rel/work"]) == 0
    report = json.loads((tmp_path / "rel/work/verify.json").read_text())
    levels = {r["level"]: r for r in report["results"]}
    assert set(levels) == {"golden", "csim", "rtl"} and report["passed"]
    assert levels["csim"]["vectors"] == levels["rtl"]["vectors"] > 600
    assert all(r["mismatches"] == 0 for r in report["results"])


def test_verify_json_prints_vectors_and_mismatches_per_level(tmp_path, capsys):
    work = tmp_path / "work"
    assert main(["verify", "fpmac", "--levels", "golden", "--max-fb", "5", "--random-per-fb", "100", "--json",
                 "--work", str(work)]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # stdout is the report alone; progress went to stderr
    assert report["pe"] == "fpmac" and report["passed"] is True
    assert [(r["level"], r["mismatches"]) for r in report["results"]] == [("golden", 0)]
    assert report["results"][0]["vectors"] > 100 and "[verify fpmac]" in captured.err


def test_every_registered_pe_has_every_hardware_command():
    from codesign.cli import build_parser
    from codesign.pe import pe_names

    parser = build_parser()
    for name in pe_names():
        for command in ("generate", "verify", "estimate"):
            with pytest.raises(SystemExit) as done:
                parser.parse_args([command, name, "--help"])
            assert done.value.code == 0


def test_unknown_pe_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "nope", "--out", "x"])
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_top_name_reaches_the_kernel(tmp_path):
    out = tmp_path / "project"
    assert main(["generate", "fpmac", "--top", "ok_top", "--out", str(out)]) == 0
    assert "ok_top" in (out / "fpmac.cpp").read_text()


def test_reproduce_and_train_refuse_bad_input_before_training(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:  # argparse's choices, listed in --help
        main(["reproduce", "e3train", "--out", str(tmp_path / "r")])
    assert refused.value.code == 2 and "invalid choice: 'e3train'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    locked = tmp_path / "locked"
    locked.write_text("a file where a directory should be")
    assert main(["reproduce", "smd", "--out", str(locked)]) == 2
    assert "not writable" in capsys.readouterr().err
    config = tmp_path / "run.toml"
    config.write_text("[techniques.smd]\np = -0.1\n")
    assert main(["train", str(config), "--out", str(tmp_path / "t")]) == 2
    assert "techniques.smd.p" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()


def test_train_runs_a_toml_config(tmp_path, capsys):
    config = tmp_path / "run.toml"
    config.write_text('seed = 1\n[data]\nname = "synthetic"\nsynthetic_samples = 100\n[model]\nname = "mlp"\n'
                      '[optim]\nepochs = 2\nbatch_size = 25\n')
    assert main(["train", str(config), "--out", str(tmp_path / "t")]) == 0
    result = json.loads((tmp_path / "t" / "result.json").read_text())
    # 10 samples per class, round(2.5) = 2 of them held out: 80 training samples, 4 batches of 25 per epoch
    assert result["steps"] == 8 and len(result["history"]) == 2 and result["cost"]["total"]["macs"] > 0
    assert (tmp_path / "t" / "checkpoint.pt").is_file()


def test_a_design_no_board_trains_is_refused_unless_hardware_only(tmp_path, capsys):
    """An FP32 ResNet (no training family's PEs) and a CSB ResNet (its family's loop trains MLPs) are refused by
    ``design`` and ``bundle`` before any work, naming the families; ``--hardware-only`` takes them as hardware."""
    fp32 = tmp_path / "fp32_resnet.toml"
    fp32.write_text('[model]\nname = "resnet"\ndepth = 8\n[design]\nname = "plain"\n')
    conv = Path(__file__).resolve().parents[1] / "examples" / "digits_compressed.toml"
    for config, why in ((fp32, "trains an MLP, not model 'resnet'"), (conv, "the CSB loop cannot train it")):
        for argv in (["design", str(config)], ["bundle", str(config), "--out", str(tmp_path / "bundle")]):
            assert exit_code(argv) == 2
            err = capsys.readouterr().err
            assert why in err and "--hardware-only" in err and "Traceback" not in err, err
            assert not (tmp_path / "bundle").exists()
    assert all(f"({key})" in err for key in ("fpmac_array", "csb", "tt"))
    assert exit_code(["bundle", str(fp32), "--out", str(tmp_path / "bundle"), "--hardware-only"]) == 0


def test_a_run_that_diverges_or_cannot_step_fails_and_leaves_no_result(tmp_path, capsys):
    """A loss that stops being finite is an error naming the step and the settings to change, and no
    result.json or checkpoint is left as if the run had finished; a split with no training sample is refused."""
    diverging = tmp_path / "diverging.toml"
    diverging.write_text('[model]\nname = "mlp"\nhidden = [16]\n[optim]\nepochs = 2\nlr = 1e30\n')
    out = tmp_path / "out"
    assert exit_code(["train", str(diverging), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the training loss became nan at step" in err and "lower optim.lr (1e+30)" in err and "Traceback" not in err
    assert not (out / "result.json").exists() and not (out / "checkpoint.pt").exists()
    empty = tmp_path / "empty.toml"
    empty.write_text('[data]\nname = "synthetic"\nsynthetic_samples = 20\ntest_fraction = 0.95\n'
                     '[model]\nname = "mlp"\nhidden = [4]\n[optim]\nepochs = 1\n')
    assert exit_code(["train", str(empty), "--out", str(tmp_path / "empty")]) == 2
    assert "data: the training split is empty" in capsys.readouterr().err and not (tmp_path / "empty").exists()


def test_the_readme_table_is_not_rewritten_from_a_folder_without_reports(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("kept\n")
    for out in (tmp_path / "missing", tmp_path):
        assert exit_code(["reproduce", "readme", "--out", str(out), "--readme", str(readme)]) == 2
        assert "holds no reproduction's report" in capsys.readouterr().err
    assert readme.read_text() == "kept\n"


def test_sigterm_ends_a_run_with_one_line_and_status_143(tmp_path):
    """A run terminated (SIGTERM: a scheduler's kill, a shutdown) unwinds as for Ctrl-C: one line, no traceback,
    the resume hint, status 128 + 15."""
    import signal
    import subprocess
    import sys
    import time

    config = tmp_path / "long.toml"
    config.write_text('[data]\nname = "synthetic"\nsynthetic_samples = 2000\n[model]\nname = "mlp"\nhidden = [64]\n'
                      '[optim]\nepochs = 5000\nbatch_size = 8\n')
    run = subprocess.Popen([sys.executable, "-m", "codesign.cli", "train", str(config), "--out", str(tmp_path / "out"),
                            "--checkpoint-every", "100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "out" / "checkpoint.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 143, err[-2000:]
    assert "codesign: terminated (SIGTERM); run the same command with --resume" in err and "Traceback" not in err


def _failing_tools(tmp_path: Path, monkeypatch, *names: str) -> None:
    """Stand-ins first on PATH for vendor tools that run and fail (exit 1): how a broken install or a failed
    synthesis ends. Nothing pretends to succeed."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in names:
        script = folder / name
        script.write_text("#!/bin/sh\necho 'ERROR: [Synth 8-439] module not found' >&2\nexit 1\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{__import__('os').environ['PATH']}")


def test_a_failing_vendor_tool_ends_in_one_line_naming_the_step_and_its_log(tmp_path, capsys, monkeypatch):
    project = tmp_path / "tt1"
    assert exit_code(["generate", "tt1", "--out", str(project)]) == 0
    capsys.readouterr()
    _failing_tools(tmp_path, monkeypatch, "vitis_hls", "vivado")
    assert exit_code(["build", str(project)]) == 2
    err = capsys.readouterr().err
    assert "vitis_hls failed in" in err and "(exit 1) running run_hls.tcl" in err and "vitis_hls.log" in err
    assert "Traceback" not in err
    design = Path(__file__).resolve().parents[1] / "examples" / "digits_abvs.toml"
    assert exit_code(["build", str(design), "--out", str(tmp_path / "build")]) == 2  # the RTL route: vivado only
    err = capsys.readouterr().err
    assert "vivado exited with status 1" in err and "vivado.log" in err and "Traceback" not in err


def _parsers(parser, name="codesign"):
    """Every parser under ``parser`` (sub-commands and PE sub-commands), with its command line."""
    import argparse

    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_of_every_command_states_its_default_in_its_help():
    import argparse

    from codesign.cli import build_parser
    from codesign.cli.options import DefaultsHelpFormatter

    checked, silent = 0, []
    for command, parser in _parsers(build_parser()):
        assert parser.formatter_class is DefaultsHelpFormatter, command
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or isinstance(action, DefaultsHelpFormatter.FLAGS):
                continue
            text = formatter._expand_help(action)
            checked += 1
            if "default" not in text and "(required)" not in text:
                silent.append(f"{command} {action.option_strings[0]}: {text}")
            if action.default not in (None, argparse.SUPPRESS) and not action.required \
                    and "default" in text and "%(default)" not in (action.help or ""):
                assert str(action.default) in text or "default" in (action.help or ""), (command, text)
    assert checked > 100 and not silent, silent
    help_text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    assert "(default: 50)" in help_text and "(default: out/train)" in help_text
