"""The output-folder rule: new, empty or the command's own folder; writable; checked without writing anything."""

import json
import os

import pytest

from codesign.io.outdir import (
    OUTPUT_MARKER,
    OutputDirError,
    check_output_dir,
    claim_output_dir,
    output_dir,
    read_output_marker,
)


def tree(root):
    return sorted((str(p.relative_to(root)), p.read_bytes() if p.is_file() else None) for p in root.rglob("*"))


def read_only(folder):
    """``folder`` made read-only; skips the test when this user (root) may write into it anyway."""
    folder.chmod(0o500)
    if os.access(folder, os.W_OK):
        folder.chmod(0o700)
        pytest.skip("running as a user (root) who may write into a read-only folder")
    return folder


@pytest.fixture
def locked(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    yield read_only(folder)
    folder.chmod(0o700)


def test_a_new_folder_is_accepted_and_nothing_is_written_by_the_check(tmp_path):
    out = tmp_path / "a" / "b"
    assert check_output_dir(out, "train") == out
    assert not (tmp_path / "a").exists()


def test_an_empty_folder_is_accepted(tmp_path):
    assert check_output_dir(tmp_path, "train") == tmp_path


def test_claim_creates_the_folder_and_writes_the_marker_naming_the_command(tmp_path):
    out = claim_output_dir(tmp_path / "a" / "b", "train")
    assert [p.name for p in out.iterdir()] == [OUTPUT_MARKER]
    assert json.loads((out / OUTPUT_MARKER).read_text()) == {"codesign_output": 1, "command": "train"}
    assert read_output_marker(out) == "train"
    (out / "result.json").write_text("{}")
    assert claim_output_dir(out, "train") == out  # its own folder again: reused, nothing removed
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "result.json"]


def test_a_folder_with_a_users_file_is_refused_by_name_and_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    before = tree(tmp_path)
    for call in (check_output_dir, claim_output_dir):
        with pytest.raises(OutputDirError, match=f"{tmp_path} exists, is not empty and holds no {OUTPUT_MARKER}"):
            call(tmp_path, "train")
    assert tree(tmp_path) == before


def test_another_commands_folder_is_refused(tmp_path):
    claim_output_dir(tmp_path, "verify")
    with pytest.raises(OutputDirError, match=r"written by `codesign verify`, not `codesign train`"):
        claim_output_dir(tmp_path, "train")
    assert read_output_marker(tmp_path) == "verify"


@pytest.mark.parametrize("text", ["not json", "[]", '{"codesign_output": 2, "command": "train"}', '{"command": 1}'])
def test_a_marker_that_is_not_ours_is_refused(tmp_path, text):
    (tmp_path / OUTPUT_MARKER).write_text(text)
    with pytest.raises(OutputDirError, match="is not a marker of `codesign train`"):
        check_output_dir(tmp_path, "train")
    assert (tmp_path / OUTPUT_MARKER).read_text() == text


def test_a_file_and_a_path_under_a_file_are_refused(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(OutputDirError, match=f"{a_file} exists and is not a directory"):
        claim_output_dir(a_file, "train")
    with pytest.raises(OutputDirError, match=f"{a_file / 'sub'} is not writable: {a_file} is a file"):
        claim_output_dir(a_file / "sub", "train")
    assert a_file.read_text() == "x" and [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_a_read_only_folder_and_a_folder_to_create_in_one_are_refused(locked):
    with pytest.raises(OutputDirError, match=f"{locked} is not writable"):
        check_output_dir(locked, "train")
    with pytest.raises(OutputDirError, match=f"{locked / 'new' / 'deeper'} is not writable: {locked} is a read-only"):
        claim_output_dir(locked / "new" / "deeper", "train")
    assert not any(locked.iterdir())


def test_a_command_with_its_own_marker_decides_what_is_its_own(tmp_path):
    def is_own(folder):
        return (folder / "design.json").is_file() and (folder / "design.json").read_text() == "ours"

    (tmp_path / "design.json").write_text("ours")
    (tmp_path / "fit.json").write_text("{}")
    assert claim_output_dir(tmp_path, "build", marker="design.json", is_own=is_own) == tmp_path
    assert not (tmp_path / OUTPUT_MARKER).exists()  # such a command writes its own marker
    (tmp_path / "design.json").write_text("someone else's")

    class BuildError(OutputDirError):
        pass

    with pytest.raises(BuildError, match="design.json is not a marker of `codesign build`"):
        check_output_dir(tmp_path, "build", marker="design.json", is_own=is_own, error=BuildError)


def test_a_recogniser_may_accept_a_folder_written_before_markers(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    assert check_output_dir(tmp_path, "reproduce", is_own=lambda folder: (folder / "results.json").is_file())
    with pytest.raises(OutputDirError):
        check_output_dir(tmp_path, "reproduce")


def test_output_dir_undoes_its_claim_when_the_work_fails_before_writing(tmp_path):
    out = tmp_path / "a" / "b"
    with pytest.raises(RuntimeError, match="refused later"):
        with output_dir(out, "train"):
            raise RuntimeError("refused later")
    assert not any(tmp_path.iterdir())
    with pytest.raises(RuntimeError):
        with output_dir(out, "train") as folder:
            (folder / "checkpoint.pt").write_text("partial")
            raise RuntimeError("interrupted")
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", OUTPUT_MARKER]  # resumable, still its own
    with output_dir(out, "train") as folder:
        assert folder == out


def test_output_dir_keeps_a_folder_that_existed(tmp_path):
    with pytest.raises(KeyError):
        with output_dir(tmp_path, "sweep"):
            raise KeyError("x")
    assert tmp_path.is_dir() and not any(tmp_path.iterdir())
    claim_output_dir(tmp_path, "sweep")
    with pytest.raises(KeyError):
        with output_dir(tmp_path, "sweep"):
            raise KeyError("x")
    assert read_output_marker(tmp_path) == "sweep"  # an earlier claim stays
