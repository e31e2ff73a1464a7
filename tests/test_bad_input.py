"""Bad input is refused before any work: a clear message naming the field or file, exit 2, no traceback, nothing written.

Most cases are generated from the schemas: every field of the training
configuration's tables (:class:`~codesign.train.config.TrainConfig`'s data,
model and optim, each technique's ``Config`` and the TT technique's nested
precision and prior tables) gets wrong-typed values (bool for int, a string
for a number, a list, a table) and out-of-range ones (negative, zero where a
count is needed, too large, not finite), written as a TOML file and run
through ``codesign train`` in-process. The ``[design]`` table, the file itself
(empty, not UTF-8, not TOML), the command-line arguments checked here
(``--checkpoint-every``, ``--seeds``, ``--top``), truncated checkpoints and the
JSON loader add hand-written cases.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import traceback
import types
import typing
from pathlib import Path

import pytest

import codesign.deploy  # noqa: F401 -- imported once here: pynq's import looks libsensors up through ctypes, which
# runs gcc; that lookup is an import's, not a command's work, and the tool stand-ins would count it in whichever
# case imported pynq first
from codesign.cli import build_parser as fresh_parser, main
from codesign.io.jsonfile import JsonFileError, load_json
from codesign.train.config import DataConfig, ModelConfig, OptimConfig
from codesign.train.techniques import TECHNIQUES, technique_config_class

BASE = {"model": {"name": "mlp", "hidden": [16]}}  # the cheapest valid configuration every case starts from
HUGE_INT = 2**63 - 1  # the largest TOML integer
# fields where a negative number is a legal setting (a signed offset, not a count or a size)
SIGNED_FLOATS = {"techniques.slu.alpha_init", "techniques.slu.gate_bias_init"}
# string fields that are free text (a path), not a choice from a list
FREE_TEXT = {"techniques.abvs.cost_report", "data.path"}
# int fields where 0 is a legal setting ("none", "from the start", a percentage)
ZERO_OK = {"data.split_seed", "data.pad_to", "techniques.compress.max_percent", "techniques.tt.prior.warmup_epochs",
           "techniques.tt.prior.prune_from_epoch", "techniques.tt.precision.activation_headroom_bits",
           "techniques.tt.precision.grad_headroom_bits", "techniques.tt.precision.core_headroom_bits"}


class Inline(dict):
    """A table given as a value (``x = {a = 1}``), where a field wants a scalar."""


# -- the schema ---------------------------------------------------------------------------------------------------
def _tables() -> dict[str, type]:
    """Dotted table name -> dataclass, for every table a training TOML may hold."""
    tables: dict[str, type] = {"data": DataConfig, "model": ModelConfig, "optim": OptimConfig}
    for name in TECHNIQUES:
        cls = technique_config_class(name)
        tables[f"techniques.{name}"] = cls
        for key, hint in typing.get_type_hints(cls).items():
            if dataclasses.is_dataclass(hint):
                tables[f"techniques.{name}.{key}"] = hint
    return tables


def _kind(hint) -> str | None:
    """int, float, str, bool, ints (a list of ints), modes (a list of lists of ints), or None (a nested table)."""
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    if hint in (int, float, str, bool):
        return hint.__name__
    if typing.get_origin(hint) is tuple:
        inner = typing.get_args(hint)[0]
        return "ints" if inner is int else "modes" if typing.get_origin(inner) is tuple else None
    return None


def _bad_values(field: str, kind: str) -> list[tuple[str, object]]:
    """(label, value) pairs no validation may accept for a field of ``kind``."""
    bad: list[tuple[str, object]] = []
    if kind == "int":
        bad += [("bool", True), ("string", "1"), ("float", 1.5), ("list", [1]), ("table", Inline(x=1)), ("negative", -1),
                ("huge", HUGE_INT)]
        if field not in ZERO_OK and not field.endswith("seed"):
            bad.append(("zero_or_below_minimum", 0 if field not in {"techniques.cpt.range_test_start_bits"} else 1))
    elif kind == "float":
        bad += [("bool", True), ("string", "0.5"), ("list", [0.5]), ("table", Inline(x=0.5)), ("nan", math.nan),
                ("inf", math.inf)]
        if field not in SIGNED_FLOATS:
            bad.append(("negative", -1.5))
        else:
            bad.append(("minus_inf", -math.inf))
    elif kind == "str":
        bad += [("int", 1), ("bool", False), ("list", ["x"]), ("table", Inline(x="y"))]
        if field not in FREE_TEXT:
            bad.append(("unknown_choice", "no_such_choice"))
    elif kind == "bool":
        bad += [("int", 1), ("string", "true"), ("list", [True]), ("table", Inline(x=True))]
    elif kind == "ints":
        bad += [("scalar", 16), ("bools", [True]), ("strings", ["16"]), ("floats", [1.5]), ("negative", [-16]),
                ("zero", [0]), ("huge", [HUGE_INT])]
    elif kind == "modes":
        bad += [("scalar", 4), ("flat_list", [4, 4]), ("bools", [[True, True]]), ("strings", [["4", "4"]]),
                ("negative", [[-4, 4]])]
    return bad


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_toml_value(item)}" for key, item in value.items()) + "}"
    raise TypeError(value)


def to_toml(raw: dict, prefix: str = "") -> str:
    """A small TOML writer: scalars first, then one [table] per nested dict (inline tables stay values)."""
    lines, tables = [], []
    for key, value in raw.items():
        if isinstance(value, dict) and not isinstance(value, Inline):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    text = (f"[{prefix}]\n" if prefix and (lines or not tables) else "") + "".join(line + "\n" for line in lines)
    for key, value in tables:
        text += to_toml(value, f"{prefix}.{key}" if prefix else key)
    return text


def _config_with(dotted: str, value) -> dict:
    """BASE with ``dotted`` (e.g. techniques.tt.precision.grad_bits) set to ``value``."""
    raw = json.loads(json.dumps(BASE))
    *path, leaf = dotted.split(".")
    table = raw
    for part in path:
        table = table.setdefault(part, {})
    table[leaf] = value
    return raw


def _field_cases() -> list:
    cases = [pytest.param("seed", value, id=f"seed={label}") for label, value in
             (("bool", True), ("string", "0"), ("float", 0.5), ("list", [0]), ("negative", -1), ("huge", HUGE_INT),
              ("above_2**32", 2**32))]
    for table, cls in _tables().items():
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            dotted = f"{table}.{field.name}"
            kind = _kind(hints[field.name])
            if kind is None:
                continue
            for label, value in _bad_values(dotted, kind):
                cases.append(pytest.param(dotted, value, id=f"{dotted}={label}"))
    return cases


FIELD_CASES = _field_cases()


# -- the outcome every case asserts -------------------------------------------------------------------------------
OUTCOMES = ("refused clearly", "unclear", "traceback", "silent")  # the table; "left behind" is counted apart


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder (None) under ``root``: a refusal must leave this unchanged."""
    if not root.exists():
        return {}
    return {str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_dir() or path.is_file()}


def outcome(status, err: str, names: tuple[str, ...]) -> str:
    """One of :data:`OUTCOMES` for a run that ended with ``status`` and printed ``err``.

    Refused clearly: exit 2, no traceback, and one error line (``codesign: error: ...`` or argparse's
    ``codesign ...: error: ...``) that names one of ``names``.
    """
    if "Traceback" in err:
        return "traceback"
    if status == 0:
        return "silent"
    errors = [line for line in err.splitlines() if line.startswith("codesign") and ": error: " in line]
    if status != 2 or len(errors) != 1 or not any(name in errors[0] for name in names):
        return "unclear"
    return "refused clearly"


def refused(capsys, argv: list[str], names: tuple[str, ...], out: Path | None = None, *,
            root: Path | None = None) -> str:
    """Run the CLI on ``argv``: exit 2, one error line naming one of ``names``, no traceback, nothing written.

    Nothing written: the tree under ``root`` (default: the folder ``out`` is in) is byte for byte the same.
    A failure's message starts with ``[outcome: ...]`` (see :func:`outcome`), which ``tests/bad_input_table.py``
    counts.
    """
    root = root if root is not None else out.parent if out is not None else None
    before = _tree(root) if root is not None else {}
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse refuses a bad argument by exiting
        status = stop.code
    except Exception:  # noqa: BLE001 -- a traceback the user would see, classified below
        status = None
        print(traceback.format_exc(), file=sys.stderr)
    err = capsys.readouterr().err
    result = outcome(status, err, names)
    left = sorted(set(_tree(root).items()) ^ set(before.items())) if root is not None else []
    flags = result + (", left behind" if left else "")
    assert result == "refused clearly" and not left, \
        f"[outcome: {flags}] exit {status}; names {names}; changed {[name for name, _ in left][:5]}; stderr {err[-600:]!r}"
    return err


@pytest.fixture(scope="module", autouse=True)
def one_parser():
    """The CLI's parser built once for this module's ~1,900 runs: argparse takes ~25 ms to build its 31 commands, most
    of the module's time, and ``parse_args`` leaves a parser as it was. A test that changes a parser builds its
    own (``fresh_parser``)."""
    import codesign.cli

    parser = fresh_parser()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codesign.cli, "build_parser", lambda: parser)
        yield


@pytest.mark.parametrize("dotted, value", FIELD_CASES)
def test_a_bad_field_is_refused_before_training(tmp_path, capsys, dotted, value):
    path = tmp_path / "bad.toml"
    path.write_text(to_toml(_config_with(dotted, value)))
    out = tmp_path / "out"
    refused(capsys, ["train", str(path), "--out", str(out)], (dotted, str(path)), out)


def test_the_suite_is_large_and_covers_every_table():
    assert len(FIELD_CASES) >= 150
    covered = {param.values[0].rsplit(".", 1)[0] for param in FIELD_CASES}
    assert set(_tables()) <= covered


@pytest.mark.parametrize("technique", TECHNIQUES)
def test_the_base_configuration_with_each_technique_is_valid(tmp_path, technique):
    """The control: each refusal above is the bad field's doing, not the base configuration's."""
    from codesign.train.config import load_config

    raw = {**BASE, "techniques": {technique: {}}}
    path = tmp_path / "good.toml"
    path.write_text(to_toml(raw))
    load_config(path)


def test_the_toml_writer_round_trips():
    import tomllib

    raw = _config_with("techniques.tt.precision.grad_bits", Inline(x=1))
    assert tomllib.loads(to_toml(raw))["techniques"]["tt"]["precision"]["grad_bits"] == {"x": 1}
    assert tomllib.loads(to_toml({**BASE, "techniques": {"smd": {}}}))["techniques"] == {"smd": {}}
    raw = _config_with("optim.lr", math.inf)
    assert tomllib.loads(to_toml(raw)) == {"model": {"name": "mlp", "hidden": [16]}, "optim": {"lr": math.inf}}


# -- the file, its tables, and the [design] table -----------------------------------------------------------------
FILE_CASES = [
    pytest.param(b"", ("model: missing",), id="empty_file"),
    pytest.param(b"# only a comment\n\n", ("model: missing",), id="comments_only"),
    pytest.param(b"seed = 3\n[optim]\nepochs = 2\n", ("model: missing",), id="no_model_table"),
    pytest.param(b'[model]\nname = "\xff\xfe"\n', ("not UTF-8",), id="latin1_bytes"),
    pytest.param(b"\xef\xbb\xbf\x80[model]\n", ("not UTF-8",), id="stray_continuation_byte"),
    pytest.param("[model]\nname = 'mlp'\n".encode("utf-16"), ("not UTF-8",), id="utf16"),
    pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00", ("not UTF-8", "not valid TOML"), id="binary_file"),
    pytest.param(b"seed = = 1\n", ("not valid TOML",), id="bad_toml"),
    pytest.param(b"[model\nname = 'mlp'\n", ("not valid TOML",), id="unclosed_table"),
    pytest.param(b"[model]\nname = 'mlp'\n[model]\n", ("not valid TOML",), id="duplicate_table"),
    pytest.param(b"[model]\nname = \"mlp\n", ("not valid TOML",), id="unterminated_string"),
    pytest.param(b"techniques = 5\n[model]\nname = 'mlp'\n", ("techniques",), id="techniques=5"),
    pytest.param(b"techniques = 'smd'\n[model]\nname = 'mlp'\n", ("techniques",), id="techniques=string"),
    pytest.param(b"techniques = [1]\n[model]\nname = 'mlp'\n", ("techniques",), id="techniques=list"),
    pytest.param(b"[model]\nname = 'mlp'\n[techniques]\nsmd = 5\n", ("techniques.smd",), id="techniques.smd=5"),
    pytest.param(b"[model]\nname = 'mlp'\n[techniques.fast]\n", ("techniques.fast",), id="unknown_technique"),
    pytest.param(b"model = 'mlp'\n", ("model",), id="model=string"),
    pytest.param(b"data = 5\n[model]\nname = 'mlp'\n", ("data",), id="data=int"),
    pytest.param(b"optim = [1]\n[model]\nname = 'mlp'\n", ("optim",), id="optim=list"),
    pytest.param(b"epochs = 3\n[model]\nname = 'mlp'\n", ("epochs",), id="unknown_top_field"),
    pytest.param(b"[model]\nname = 'mlp'\ndepht = 8\n", ("model.depht",), id="unknown_model_field"),
    pytest.param(b"[model]\nname = 'mlp'\n[techniques.tt.precision]\nbits = 8\n", ("techniques.tt.precision.bits",),
                 id="unknown_nested_field"),
    pytest.param(b"[model]\nname = 'mlp'\n[techniques.tt]\nprecision = 8\n", ("techniques.tt.precision",),
                 id="nested_table=int"),
    pytest.param(b"design = 5\n[model]\nname = 'mlp'\n", ("design",), id="design=int"),
]


FILE_RUNS = [pytest.param(command, *case.values, id=f"{command}-{case.id}") for case in FILE_CASES
             for command in ("train", "design") if not (command == "train" and case.values[1] == ("design",))]
# (codesign train ignores the [design] table)


@pytest.mark.parametrize("command, content, names", FILE_RUNS)
def test_a_bad_file_is_refused_naming_it_or_its_field(tmp_path, capsys, monkeypatch, command, content, names):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    out = tmp_path / "out"
    argv = ["train", str(path), "--out", str(out)] if command == "train" else ["design", str(path), "--out", str(out),
                                                                              "--cache", str(tmp_path / "cache")]
    err = refused(capsys, argv, names, out)
    if names[0] in ("not UTF-8", "not valid TOML", "model: missing"):
        assert str(path) in err  # a problem of the file names the file
    assert not (tmp_path / "cache").exists()


def test_a_missing_file_or_a_folder_is_refused(tmp_path, capsys):
    for target in (tmp_path / "absent.toml", tmp_path):
        refused(capsys, ["train", str(target), "--out", str(tmp_path / "out")], (str(target),), tmp_path / "out")


DESIGN_CASES = [
    (key, label, value) for key, values in {
        "name": [("int", 5), ("upper_case", "Digits"), ("empty", ""), ("digit_first", "9x"), ("too_long", "x" * 60)],
        "board": [("int", 5), ("unknown", "pynq-z9"), ("list", ["zedboard"])],
        "clock_mhz": [("bool", True), ("string", "100"), ("zero", 0), ("negative", -100.0), ("huge", 1e9),
                      ("nan", math.nan), ("inf", math.inf)],
        "pe": [("int", 5), ("table_of_ints", Inline(fpmac_array=4))],
        "pe.fpmac_array.copies": [("zero", 0), ("too_many", 9), ("bool", True), ("string", "2")],
        "pe.fpmac_array.rows": [("bool", True), ("string", "4"), ("negative", -1), ("list", [4])],
        "pe.fpmac_array.max_fb": [("derived", 5)],
        "pe.csb.kernel": [("unused_pe", 3)],
        "pe.fpmac_array.colour": [("unknown", 1)],
    }.items() for label, value in values
]


@pytest.mark.parametrize("key, label, value", DESIGN_CASES, ids=[f"design.{k}={label}" for k, label, _ in DESIGN_CASES])
def test_a_bad_design_table_is_refused_before_yosys(tmp_path, capsys, monkeypatch, key, label, value):
    monkeypatch.chdir(tmp_path)
    raw = {**BASE, "techniques": {"abvs": {}}}
    design: dict = {}
    table = design
    *path, leaf = key.split(".")
    for part in path:
        table = table.setdefault(part, {})
    table[leaf] = value
    (tmp_path / "d.toml").write_text(to_toml(raw) + to_toml(design, "design"))
    expected = f"design.{key}" if not key.startswith("pe.") else f"design.{'.'.join(key.split('.')[:2])}"
    refused(capsys, ["design", str(tmp_path / "d.toml"), "--out", str(tmp_path / "out"), "--cache",
                     str(tmp_path / "cache")], (expected, f"design.{key.split('.')[0]}"), tmp_path / "out")
    assert not (tmp_path / "cache").exists()


# -- command-line arguments ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("every", ["0", "-1", "-50", "abc", "1.5", "", "1e3"])
def test_checkpoint_every_must_be_a_positive_int(tmp_path, capsys, every):
    config = tmp_path / "run.toml"
    config.write_text(to_toml(BASE))
    out = tmp_path / "out"
    refused(capsys, ["train", str(config), "--out", str(out), "--checkpoint-every", every], ("--checkpoint-every",), out)


@pytest.mark.parametrize("seeds", ["-1", "0,-1", "1,1", "a", ",", str(2**32), "0,1.5"])
def test_seeds_must_be_distinct_non_negative_ints(tmp_path, capsys, seeds):
    out = tmp_path / "r"
    refused(capsys, ["reproduce", "smd", "--smoke", "--out", str(out), "--seeds", seeds], ("--seeds",), out)


@pytest.mark.parametrize("top", ["int", "class", "return", "main", "std", "xor", "char8_t", "co_await", "__x",
                                 "_Upper", "a__b", "9lives", "has-dash", "has space", "", "é", "x" * 65])
def test_top_must_be_a_legal_unreserved_cxx_identifier(tmp_path, capsys, top):
    out = tmp_path / "project"
    refused(capsys, ["generate", "fpmac", "--top", top, "--out", str(out)], (f"top={top[:16]!r}",), out)


# -- checkpoints and JSON files read back -------------------------------------------------------------------------
@pytest.mark.parametrize("content", [b"", b"PK\x03\x04\x14\x00\x00\x00", b"not a checkpoint\n", b"\x80\x02}q\x00."],
                         ids=["empty", "truncated_zip", "text", "foreign_pickle"])
def test_a_broken_checkpoint_is_refused_naming_it_and_left_alone(tmp_path, capsys, content):
    config = tmp_path / "run.toml"
    config.write_text(to_toml(BASE))
    out = tmp_path / "out"
    out.mkdir()
    (out / "codesign_output.json").write_text(json.dumps({"codesign_output": 1, "command": "train"}))
    (out / "checkpoint.pt").write_bytes(content)
    refused(capsys, ["train", str(config), "--out", str(out), "--resume"], (str(out / "checkpoint.pt"),))
    assert (out / "checkpoint.pt").read_bytes() == content
    assert sorted(path.name for path in out.iterdir()) == ["checkpoint.pt", "codesign_output.json"]


JSON_CASES = [
    pytest.param(b'{"entries": [{"counts": {"LUT": 3}}', "not valid JSON (truncated?)", id="truncated"),
    pytest.param(b"", "not valid JSON", id="empty"),
    pytest.param(b"\xff\xfe{}", "not UTF-8", id="not_utf8"),
    pytest.param(b"[1, 2]", "expected a JSON object", id="array"),
    pytest.param(b"{}", "field entries missing", id="missing_field"),
    pytest.param(b'{"entries": []}', "field entries.0.counts missing", id="empty_list"),
    pytest.param(b'{"entries": {"counts": 1}}', "field entries has the wrong type", id="object_for_list"),
    pytest.param(b'{"entries": [{"counts": [1]}]}', "field entries.0.counts has the wrong type", id="wrong_type"),
    pytest.param(b'{"entries": [{"counts": {}}], "steps": true}', "field steps has the wrong type", id="bool_for_int"),
    pytest.param(b'{"entries": [{"counts": {}}], "steps": "3"}', "field steps has the wrong type", id="str_for_int"),
]


@pytest.mark.parametrize("content, message", JSON_CASES)
def test_the_json_loader_names_the_file_and_the_field(tmp_path, content, message):
    path = tmp_path / "cost.json"
    path.write_bytes(content)
    with pytest.raises(JsonFileError) as caught:
        load_json(path, what="Yosys estimate cache entry", required={"entries": list, "entries.0.counts": dict,
                                                                     "steps": int})
    text = str(caught.value)
    assert text.startswith(f"{path}: Yosys estimate cache entry: ") and message in text
    assert isinstance(caught.value, ValueError)


def test_the_json_loader_reads_good_files_and_names_a_missing_one(tmp_path):
    path = tmp_path / "result.json"
    path.write_text('{"steps": 3, "accuracy": 2, "ok": true}')
    assert load_json(path, what="result", required={"steps": int, "accuracy": float, "ok": bool})["steps"] == 3
    with pytest.raises(JsonFileError, match="absent.json: result: the file does not exist"):
        load_json(tmp_path / "absent.json", what="result")


# -- Ctrl-C -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, hint", [(["train", "x.toml"], "--resume"), (["design", "x.toml"], ""),
                                        (["sweep", "--grid", "g.toml"], "again")])
def test_ctrl_c_ends_with_one_line_and_status_130(tmp_path, capsys, monkeypatch, argv, hint):
    import codesign.cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    parser = fresh_parser()  # changed below, so not the module's shared one
    monkeypatch.setattr(codesign.cli, "build_parser", lambda: parser)
    for action in parser._subparsers._group_actions[0].choices.values():
        action.set_defaults(func=interrupted)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert err.startswith("codesign: interrupted") and err.count("\n") == 1 and hint in err
    assert "Traceback" not in err


# -- JSON files the commands read back, corrupted ------------------------------------------------------------------
CORRUPT_JSON = [
    pytest.param(b'{"format": "codesign', id="truncated"),
    pytest.param(b"", id="empty"),
    pytest.param(b"\xff\xfe{\x00}\x00", id="not_utf8"),
    pytest.param(b"[1, 2]", id="array"),
    pytest.param(b'{"unrelated": true}', id="wrong_fields"),
    pytest.param(b"\x00" * 64, id="zeros"),
]


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes: a refusal must leave this unchanged."""
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def _corrupt_project(tmp_path: Path, content: bytes) -> tuple[list[str], Path]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "run_hls.tcl").write_text("# a project's script\n")
    (project / "codesign_project.json").write_bytes(content)
    return ["build", str(project)], project / "codesign_project.json"


def _corrupt_generate_target(tmp_path: Path, content: bytes) -> tuple[list[str], Path]:
    argv, marker = _corrupt_project(tmp_path, content)
    return ["generate", "fpmac", "--out", argv[1]], marker


def _corrupt_build_folder(tmp_path: Path, content: bytes) -> tuple[list[str], Path]:
    from codesign.resources import data_dir

    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "design.json").write_bytes(content)
    return ["build", str(data_dir("examples") / "digits_abvs.toml"), "--out", str(folder), "--cache",
            str(tmp_path / "cache"), "--dry-run"], folder / "design.json"


def _corrupt_bundle_source(tmp_path: Path, content: bytes) -> tuple[list[str], Path]:
    from codesign.resources import data_dir

    _, manifest = _corrupt_build_folder(tmp_path, content)
    return ["bundle", str(data_dir("examples") / "digits_abvs.toml"), "--build", str(manifest.parent), "--out",
            str(tmp_path / "bundle")], manifest


def _corrupt_results(tmp_path: Path, content: bytes) -> tuple[list[str], Path]:
    from codesign.reproduce.readme import BEGIN, END

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{BEGIN}\nold\n{END}\n")
    (tmp_path / "results" / "smd").mkdir(parents=True)
    (tmp_path / "results" / "smd" / "results.json").write_bytes(content)
    return ["reproduce", "readme", "--out", str(tmp_path / "results"), "--readme", str(readme)], \
        tmp_path / "results" / "smd" / "results.json"


def _corrupt_cost_report(tmp_path: Path, content: bytes) -> tuple[list[str], Path]:
    report = tmp_path / "fpmac_cost.json"
    report.write_bytes(content)
    config = tmp_path / "run.toml"
    config.write_text(to_toml({**BASE, "techniques": {"abvs": {"cost_report": str(report)}}}))
    return ["train", str(config), "--out", str(tmp_path / "out")], report


JSON_READERS = {"build_project": _corrupt_project, "generate_over_project": _corrupt_generate_target,
                "build_design_over_folder": _corrupt_build_folder, "bundle_build": _corrupt_bundle_source,
                "reproduce_readme": _corrupt_results, "train_abvs_cost_report": _corrupt_cost_report}


@pytest.mark.parametrize("reader", JSON_READERS)
@pytest.mark.parametrize("content", CORRUPT_JSON)
def test_a_corrupt_json_file_is_refused_naming_it(tmp_path, capsys, monkeypatch, reader, content):
    """Each command that reads a JSON file back: one line naming the file, exit 2, nothing written or changed."""
    monkeypatch.chdir(tmp_path)
    argv, path = JSON_READERS[reader](tmp_path, content)
    before = _snapshot(tmp_path)
    err = refused(capsys, argv, (str(path),))
    assert err.count("\n") == 1, err
    assert _snapshot(tmp_path) == before


# -- the other commands' arguments, generated from their argparse definitions ------------------------------------
# estimate, verify, sweep, bundle, explore and calibrate: every option of every (PE) sub-command gets the bad values
# of its kind (its type, its choices, the spec or stimulus field it sets), every required argument is left out once,
# every positional choice gets an unknown value. Each case starts from a valid command line that, were the bad value
# taken, would go on to run Yosys, a simulator, a Dask sweep or the explorer: so a case that is not refused up front
# shows up as written files, a tool call (the tools on PATH are stand-ins that log the call and exit 1) or a time-out.
ARG_COMMANDS = ("estimate", "verify", "sweep", "bundle", "explore", "calibrate")
TOOLS = ("yosys", "iverilog", "vvp", "verilator", "g++", "c++", "gcc", "vitis_hls", "vivado")
BIG = str(2**40)
# stimulus fields where 0 or a huge number is a legal setting (a count of at least, a seed, no lower bound given)
STIM_ZERO_OK = {"min_macs", "min_elements", "min_contractions", "min_macs_per_op", "seed"}
STIM_HUGE_OK = {"min_macs", "min_elements", "min_contractions", "min_macs_per_op", "random_per_fb"}
# the bad values of options whose argparse type is a plain string: a path, a name, a list in one string
TEXT_OPTIONS = {
    "out": [("a_file", "{file}"), ("a_users_folder", "{users}"), ("under_a_file", "{file}/sub")],
    "work": [("a_file", "{file}"), ("a_users_folder", "{users}"), ("under_a_file", "{file}/sub")],
    "board": [("unknown", "pynq-z9"), ("empty", ""), ("upper_case", "ZEDBOARD")],
    "part": [("unknown", "xc7z999-nothing"), ("empty", "")],
    "top": [("keyword", "class"), ("digit_first", "9lives"), ("dash", "has-dash"), ("reserved", "__x")],
    "levels": [("unknown", "golden,bogus"), ("none", ","), ("empty", "")],
    "families": [("unknown", "xc9"), ("repeated", "xc7,xc7"), ("empty", ""), ("spaces", "xc7, xcup")],
    "scheduler": [("no_port", "tcp://127.0.0.1"), ("scheme", "http://127.0.0.1:8786"), ("port_range", "tcp://h:99999"),
                  ("nothing_listens", "tcp://127.0.0.1:1"), ("empty", "")],
    "grid": [("absent", "{absent}"), ("a_folder", "{users}")],
    "build": [("absent", "{absent}"), ("a_file", "{file}"), ("empty_folder", "{empty}")],
    "host": [("absent", "{absent}"), ("a_folder", "{users}"), ("not_a_report", "{file}")],
}
NO_BAD_VALUE = {"json", "cache", "force", "hardware_only"}  # flags, and a cache folder (any folder is a cache; only Yosys runs write it)


def _choices(parser) -> dict:
    return next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
                ).choices


def _command_parsers() -> list[tuple[str, str | None, object]]:
    """(command, PE or None, the parser whose options are generated) for every command of :data:`ARG_COMMANDS`."""
    from codesign.cli import build_parser

    commands = _choices(build_parser())
    found = []
    for command in ARG_COMMANDS:
        parser = commands[command]
        if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            found += [(command, pe, sub) for pe, sub in _choices(parser).items()]
        else:
            found.append((command, None, parser))
    return found


def _base_argv(command: str, pe: str | None) -> list[str]:
    """A valid command line of ``command`` (bad values are appended, and argparse takes the last of a flag)."""
    from codesign.resources import data_dir

    examples = data_dir("examples")
    return {"estimate": ["estimate", str(pe), "--out", "est"],
            "verify": ["verify", str(pe), "--work", "ver"],
            "sweep": ["sweep", "--grid", "{grid}", "--out", "swp", "--workers", "0"],
            "bundle": ["bundle", str(examples / "digits_abvs.toml"), "--out", "bundle"],
            "explore": ["explore", str(examples / "digits_tt.toml"), "--out", "exp", "--cache", "cache"],
            "calibrate": ["calibrate", "tt1", "--family", "xc7", "--cache", "cache"]}[command]


def _field_kind(pe: str, dest: str) -> tuple[str, type]:
    """(field name, kind) of a ``spec__``/``stim__`` option, from the PE's dataclasses."""
    from codesign.cli import SPEC
    from codesign.pe import get_pe

    prefix, name = dest.split("__", 1)
    cls = get_pe(pe).spec_class if prefix == SPEC else get_pe(pe).stimulus_class
    return name, type(getattr(cls(), name))


def _option_values(command: str, pe: str | None, action) -> list[tuple[str, str]]:
    """(label, bad value) for one option; ``[]`` for an option that has no bad value (:data:`NO_BAD_VALUE`)."""
    dest = action.dest
    if action.choices is not None:
        return [("unknown_choice", "no_such_choice")]
    if "__" in dest:
        name, kind = _field_kind(pe, dest)
        stimulus = dest.startswith("stim__")
        if kind is int:
            bad = [("word", "abc"), ("float", "1.5"), ("empty", ""), ("negative", "-1")]
            bad += [] if stimulus and name in STIM_ZERO_OK else [("zero", "0")]
            bad += [] if stimulus and name in STIM_HUGE_OK else [("huge", BIG)]
        elif kind is str:
            bad = [("unknown", "no_such_choice"), ("empty", "")]
        elif kind is tuple:
            bad = [("words", "a,b"), ("negative", "-1"), ("huge", BIG)]
        elif kind is bool:
            bad = [("word", "maybe")]
        else:
            raise AssertionError(f"{command} {pe} {dest}: no bad values for a {kind.__name__} field")
        if command == "estimate" and kind is not tuple:  # a swept flag takes a list: one bad item spoils it
            bad += [("list_with_a_bad_item", f"{getattr(action, 'default', None) or 1},abc"), ("empty_item", "1,,2")]
        return bad
    checked = getattr(action.type, "__name__", "").lstrip("_")  # the CLI's own argparse types
    if action.type is int or checked in ("positive_int", "non_negative_int"):
        bad = [("word", "abc"), ("float", "1.5"), ("empty", ""), ("negative", "-1")]
        return bad + ([("zero", "0")] if (command, dest) == ("estimate", "workers") else [])
    if action.type is float or checked in ("clock_mhz", "percent"):
        bad = [("word", "abc"), ("empty", ""), ("nan", "nan"), ("inf", "inf"), ("negative", "-1"), ("zero", "0")]
        return bad + ([("above_a_hundred", "150")] if checked == "percent" else [])
    if dest in TEXT_OPTIONS:
        return TEXT_OPTIONS[dest]
    if dest in NO_BAD_VALUE:
        return []
    raise AssertionError(f"codesign {command} {pe or ''}: option {action.option_strings} has no bad values here")


def _argument_cases() -> list:
    cases = []
    for command, pe, parser in _command_parsers():
        where = f"{command}-{pe}" if pe else command
        base = _base_argv(command, pe)
        for action in parser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            flag = action.option_strings[0]
            names = (flag,) + ((action.dest.split("__", 1)[1],) if "__" in action.dest else ())
            for label, value in _option_values(command, pe, action):
                cases.append(pytest.param(base + [flag, value], names + (value,) * ("{" in value), {},
                                          id=f"{where}:{flag}={label}"))
            if action.required:  # left out
                index = base.index(flag)
                cases.append(pytest.param(base[:index] + base[index + 2:], (flag,), {}, id=f"{where}:{flag}=missing"))
    for command in ("estimate", "verify"):  # the PE sub-command
        cases.append(pytest.param([command, "no_such_pe"], ("no_such_pe", "PE"), {}, id=f"{command}:pe=unknown"))
        cases.append(pytest.param([command], ("PE",), {}, id=f"{command}:pe=missing"))
    for pe in ("fpmac", "no_such_pe"):  # calibrate's PE: one without an analytical model, one unknown
        cases.append(pytest.param(["calibrate", pe, "--family", "xc7", "--cache", "cache"], (pe,), {},
                                  id=f"calibrate:pe={pe}"))
    for name, text in SWEEP_GRIDS:
        cases.append(pytest.param(["sweep", "--grid", "{grid}", "--out", "swp", "--workers", "0"], ("{grid}",),
                                  {"{grid}": text}, id=f"sweep:grid={name}"))
    for case in FILE_CASES:  # the training TOML of explore and bundle, as train and design read it
        for command in ("explore", "bundle"):
            argv = [command, "{config}", "--out", "out"] + (["--cache", "cache"] if command == "explore" else [])
            cases.append(pytest.param(argv, case.values[1] + ("{config}",),
                                      {"{config}": case.values[0]}, id=f"{command}:config={case.id}"))
    gaps = _known_gaps()
    return [pytest.param(*case.values, id=case.id, marks=pytest.mark.xfail(
        strict=True, reason=f"known gap ({gaps[case.id]}), listed in {GAPS_FILE.name}")) if case.id in gaps else case
        for case in cases]


GAPS_FILE = Path(__file__).with_name("bad_input_known_gaps.txt")


def _known_gaps() -> dict[str, str]:
    """Case id -> measured outcome, for the cases not yet refused clearly (strict xfails: a fix must remove its line)."""
    lines = [line.split("\t") for line in GAPS_FILE.read_text().splitlines() if line and not line.startswith("#")]
    return dict(lines)


# sweep grid files that are not a sweep: each must be refused naming the file (and what is wrong in it)
SWEEP_GRIDS = [
    ("empty", b""),
    ("not_toml", b"function = = 1\n"),
    ("not_utf8", b'function = "builtins:dict"\n[grid]\nx = ["\xff"]\n'),
    ("no_function", b"[grid]\nx = [1]\n"),
    ("no_grid", b'function = "builtins:dict"\n'),
    ("grid_is_int", b'function = "builtins:dict"\ngrid = 5\n'),
    ("grid_is_list", b'function = "builtins:dict"\ngrid = [1, 2]\n'),
    ("empty_grid", b'function = "builtins:dict"\n[grid]\n'),
    ("axis_not_a_list", b'function = "builtins:dict"\n[grid]\nx = 1\n'),
    ("axis_empty", b'function = "builtins:dict"\n[grid]\nx = []\n'),
    ("axis_a_string", b'function = "builtins:dict"\n[grid]\nx = "abc"\n'),
    ("fixed_is_list", b'function = "builtins:dict"\nfixed = [1]\n[grid]\nx = [1]\n'),
    ("fixed_is_int", b'function = "builtins:dict"\nfixed = 3\n[grid]\nx = [1]\n'),
    ("axis_also_fixed", b'function = "builtins:dict"\n[grid]\nx = [1]\n[fixed]\nx = 2\n'),
    ("function_int", b"function = 5\n[grid]\nx = [1]\n"),
    ("function_no_colon", b'function = "builtins.dict"\n[grid]\nx = [1]\n'),
    ("function_unknown_module", b'function = "no_such_module:f"\n[grid]\nx = [1]\n'),
    ("function_unknown_name", b'function = "codesign.sweep:no_such_function"\n[grid]\nx = [1]\n'),
    ("function_wrong_arguments", b'function = "codesign.sweep:result_path"\n[grid]\nnot_an_argument = [1]\n'),
    ("unknown_key", b'function = "builtins:dict"\nfunctoin = "x"\n[grid]\nx = [1]\n'),
    ("duplicate_keys", b'function = "builtins:dict"\n[grid]\nx = ["a b", "a_b"]\n'),
    ("not_json_value", b'function = "builtins:dict"\n[grid]\nx = [1979-05-27]\n'),
]
GOOD_GRID = b'function = "builtins:dict"\n[grid]\nx = [1, 2]\n'


@pytest.fixture
def tool_stand_ins(tmp_path, monkeypatch) -> Path:
    """PATH starts with a folder of stand-ins for every external tool: each logs its call and exits 1."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    calls.mkdir()
    for tool in TOOLS:
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\necho "$@" >> "{calls}/{tool}"\nexit 1\n')
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


ARGUMENT_CASES = _argument_cases()


@pytest.mark.parametrize("argv, names, files", ARGUMENT_CASES)
def test_a_bad_argument_is_refused_before_the_work(tmp_path, capsys, monkeypatch, tool_stand_ins, argv, names,
                                                   files):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    places = {"{file}": work / "a_file.txt", "{users}": work / "users", "{absent}": work / "absent",
              "{empty}": work / "empty", "{grid}": work / "grid.toml", "{config}": work / "run.toml"}
    places["{file}"].write_text("a user's file\n")
    places["{users}"].mkdir()
    (places["{users}"] / "notes.txt").write_text("a user's notes\n")
    places["{empty}"].mkdir()
    places["{grid}"].write_bytes(GOOD_GRID)
    for token, content in files.items():
        places[token].write_bytes(content)

    def place(text: str) -> str:
        for token, path in places.items():
            text = text.replace(token, str(path))
        return text

    refused(capsys, [place(arg) for arg in argv], tuple(place(name) for name in names), root=work)
    assert not any(tool_stand_ins.iterdir()), f"a tool ran: {sorted(p.name for p in tool_stand_ins.iterdir())}"


def test_the_argument_suite_covers_every_option_of_every_command():
    """Every option of the six commands has bad values (or is listed as having none), so a new flag gets cases."""
    covered = {(case.id.split(":")[0], case.id.split(":")[1].split("=")[0]) for case in ARGUMENT_CASES}
    for command, pe, parser in _command_parsers():
        where = f"{command}-{pe}" if pe else command
        for action in parser._actions:
            if action.option_strings and action.dest not in {"help", *NO_BAD_VALUE}:
                assert (where, action.option_strings[0]) in covered, (where, action.option_strings)
    assert len(ARGUMENT_CASES) >= 300
