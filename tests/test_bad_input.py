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

import dataclasses
import json
import math
import types
import typing
from pathlib import Path

import pytest

from codesign.cli import main
from codesign.hw.jsonfile import JsonFileError, load_json
from codesign.train.config import DataConfig, ModelConfig, OptimConfig
from codesign.train.techniques import TECHNIQUES, technique_config_class

BASE = {"model": {"name": "mlp", "hidden": [16]}}  # the cheapest valid configuration every case starts from
HUGE_INT = 2**63 - 1  # the largest TOML integer
# fields where a negative number is a legal setting (a signed offset, not a count or a size)
SIGNED_FLOATS = {"techniques.slu.alpha_init", "techniques.slu.gate_bias_init"}
# string fields that are free text (a path), not a choice from a list
FREE_TEXT = {"techniques.abvs.cost_report"}
# int fields where 0 is a legal setting ("none", "from the start", a percentage)
ZERO_OK = {"data.split_seed", "techniques.compress.max_percent", "techniques.tt.prior.warmup_epochs",
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
def refused(capsys, argv: list[str], names: tuple[str, ...], out: Path | None = None) -> str:
    """Run the CLI on ``argv``: exit 2, stderr names one of ``names``, no traceback, nothing in ``out``."""
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse refuses a bad argument by exiting
        status = stop.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    assert any(name in err for name in names), f"{err!r} names none of {names}"
    if out is not None:
        assert not out.exists() or not any(out.iterdir()), f"{out} was written"
    return err


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
    parser = codesign.cli.build_parser()
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
