"""codesign.sweep: grids, refusals before anything is written, and real runs on a local Dask cluster of 2 workers."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from codesign.sweep import (SweepTask, TaskCheckpoint, checkpoint_path, grid_tasks, load_grid, read_result,
                            result_path, run_sweep, task_costs)

pytest.importorskip("distributed", reason="sweeps need dask.distributed (pip install codesign[sweep])")

TASKS_MODULE = textwrap.dedent('''
    import os
    from pathlib import Path

    def square(*, x):
        return {"x": x, "square": x * x, "pid": os.getpid()}

    def flaky(*, x, marker):
        """Fails the first time it runs for this marker file, succeeds after."""
        path = Path(marker)
        if not path.exists():
            path.write_text("failed once")
            raise RuntimeError("first attempt fails")
        return {"x": x}

    def broken(*, x):
        raise ValueError(f"no result for {x}")

    def burn(*, seconds):
        """Keeps the CPU busy for ``seconds`` of process time."""
        import time
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
        return {}

    def rest(*, seconds):
        """Sleeps: wall time without CPU time."""
        import time
        time.sleep(seconds)
        return {}

    def counting(*, to, fail_at, checkpoint):
        """Counts to ``to``, saving after each count; fails once, after saving ``fail_at`` (a killed session)."""
        import time
        state = checkpoint.load() or {"count": 0, "started_at": []}
        state["started_at"].append(state["count"])
        while state["count"] < to:
            state["count"] += 1
            end = time.process_time() + 0.05
            while time.process_time() < end:
                pass
            checkpoint.save(state)
            if state["count"] == fail_at and len(state["started_at"]) == 1:
                raise RuntimeError("killed after saving")
        return state
''')


@pytest.fixture
def tasks_module(tmp_path, monkeypatch):
    """A module the workers import by name: written to a folder on PYTHONPATH (spawned workers inherit it)."""
    folder = tmp_path / "mods"
    folder.mkdir()
    (folder / "sweep_probe_tasks.py").write_text(TASKS_MODULE)
    monkeypatch.setenv("PYTHONPATH", str(folder))
    monkeypatch.syspath_prepend(str(folder))
    yield "sweep_probe_tasks"
    sys.modules.pop("sweep_probe_tasks", None)


def test_grid_is_the_product_of_its_axes_with_readable_keys():
    tasks = grid_tasks("m:f", {"seed": [0, 1], "arm": ["a", "b c"]}, {"smoke": True})
    assert [t.key for t in tasks] == ["seed=0,arm=a", "seed=0,arm=b_c", "seed=1,arm=a", "seed=1,arm=b_c"]
    assert tasks[1].kwargs == {"smoke": True, "seed": 0, "arm": "b c"}


@pytest.mark.parametrize(("call", "message"), [
    (lambda: grid_tasks("m:f", {}), "no axis"),
    (lambda: grid_tasks("m:f", {"seed": []}), "non-empty list"),
    (lambda: grid_tasks("m:f", {"seed": "012"}), "non-empty list"),
    (lambda: grid_tasks("m:f", {"seed": [1]}, {"seed": 2}), "both a grid axis"),
    (lambda: grid_tasks("m.f", {"seed": [1]}), "not 'module:function'"),
    (lambda: SweepTask(key="a/b", function="m:f"), "file name"),
    (lambda: SweepTask(key="k", function="m:f", kwargs={"x": object()}), "not JSON"),
])
def test_bad_tasks_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_bad_sweeps_are_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    task = SweepTask(key="k", function="m:f")
    with pytest.raises(ValueError, match="duplicate"):
        run_sweep([task, task], out)
    with pytest.raises(ValueError, match="no task"):
        run_sweep([], out)
    with pytest.raises(ValueError, match="workers"):
        run_sweep([task], out, workers=-1)
    with pytest.raises(ValueError, match="retries"):
        run_sweep([task], out, retries=-1)
    assert not out.exists()


def test_grid_file(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text('function = "builtins:dict"\n[fixed]\nsmoke = true\n[grid]\nseed = [0, 1]\n')
    assert [t.kwargs for t in load_grid(path)] == [{"smoke": True, "seed": 0}, {"smoke": True, "seed": 1}]
    path.write_text('function = "builtins:dict"\n[grid]\nseed = [0]\n[extra]\n')
    with pytest.raises(ValueError, match="unknown key"):
        load_grid(path)
    with pytest.raises(ValueError, match="does not exist"):
        load_grid(tmp_path / "missing.toml")
    path.write_text('function = "no_such_module:f"\n[grid]\nseed = [0]\n')  # checked with the file named
    with pytest.raises(ValueError, match=r"grid\.toml: function 'no_such_module:f': cannot import"):
        load_grid(path)


def test_local_cluster_runs_every_task_once_and_a_rerun_skips_them(tmp_path, tasks_module):
    tasks = grid_tasks(f"{tasks_module}:square", {"x": list(range(8))})
    report = run_sweep(tasks, tmp_path / "out", workers=2, progress=False)
    assert report.passed and sorted(report.done) == sorted(t.key for t in tasks) and report.workers == 2
    results = [read_result(tmp_path / "out", t) for t in tasks]
    assert [r["square"] for r in results] == [x * x for x in range(8)]
    assert all(r["pid"] != os.getpid() for r in results)  # ran in worker processes, not here

    again = run_sweep(tasks, tmp_path / "out", workers=2, progress=False)
    assert again.done == [] and sorted(again.skipped) == sorted(t.key for t in tasks)


def test_failures_are_retried_then_reported_and_tried_again_next_run(tmp_path, tasks_module):
    flaky = SweepTask(key="flaky", function=f"{tasks_module}:flaky",
                      kwargs={"x": 1, "marker": str(tmp_path / "marker")})
    broken = SweepTask(key="broken", function=f"{tasks_module}:broken", kwargs={"x": 2})
    report = run_sweep([flaky, broken], tmp_path / "out", workers=2, retries=1, progress=False)
    assert report.done == ["flaky"]  # its first attempt failed, the retry succeeded
    assert list(report.failed) == ["broken"] and "no result for 2" in report.failed["broken"]
    assert not result_path(tmp_path / "out", "broken").exists()
    assert "FAILED broken" in report.summary()

    no_retry = run_sweep([broken], tmp_path / "out", workers=1, retries=0, progress=False)
    assert list(no_retry.failed) == ["broken"]  # still no result: the next run tries it again


@pytest.mark.parametrize("workers", [0, 2])
def test_each_result_records_its_wall_and_cpu_seconds_and_a_folder_sums_them(tmp_path, tasks_module, workers):
    out = tmp_path / "out"
    burn = SweepTask(key="burn", function=f"{tasks_module}:burn", kwargs={"seconds": 0.3})
    rest = SweepTask(key="rest", function=f"{tasks_module}:rest", kwargs={"seconds": 0.4})
    assert run_sweep([burn, rest], out, workers=workers, progress=False).passed
    costs = {key: json.loads(result_path(out, key).read_text())["cost"] for key in ("burn", "rest")}
    assert costs["burn"]["cpu_s"] >= 0.3 and costs["burn"]["wall_s"] >= 0.3
    assert costs["rest"]["wall_s"] >= 0.4 and costs["rest"]["cpu_s"] < 0.2  # sleeping costs wall, not CPU
    legacy = result_path(out, "legacy")  # written before costs were recorded: counted, not summed
    legacy.write_text(json.dumps({"task": {}, "result": {}}))
    result_path(out, "old.superseded").write_text(json.dumps({"task": {}, "result": {}, "cost": costs["burn"]}))
    summed = task_costs(out)
    assert (summed.runs, summed.recorded) == (3, 2)
    assert summed.cpu_s == pytest.approx(costs["burn"]["cpu_s"] + costs["rest"]["cpu_s"])
    assert summed.wall_s == pytest.approx(costs["burn"]["wall_s"] + costs["rest"]["wall_s"])
    assert task_costs(tmp_path / "nothing") == type(summed)(runs=0, recorded=0, wall_s=0.0, cpu_s=0.0)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_task_goes_on_from_its_checkpoint_and_is_charged_every_session(tmp_path, tasks_module, workers):
    out = tmp_path / "out"
    task = SweepTask(key="count", function=f"{tasks_module}:counting", kwargs={"to": 6, "fail_at": 4})
    report = run_sweep([task], out, workers=workers, retries=1, progress=False)
    assert report.done == ["count"]
    stored = json.loads(result_path(out, "count").read_text())
    assert stored["result"] == {"count": 6, "started_at": [0, 4]}  # the retry went on from the fourth count
    assert stored["cost"]["resumes"] == 1
    assert stored["cost"]["cpu_s"] >= 6 * 0.05  # both sessions' counts are charged
    assert not checkpoint_path(out, "count").exists()  # dropped once the result is written
    assert list(checkpoint_path(out, "count").parent.iterdir()) == []  # no temporary file left beside it


def test_a_task_without_a_checkpoint_parameter_is_called_as_before(tmp_path, tasks_module):
    task = SweepTask(key="sq", function=f"{tasks_module}:square", kwargs={"x": 3})
    assert run_sweep([task], tmp_path, workers=0, progress=False).passed
    assert "resumes" not in json.loads(result_path(tmp_path, "sq").read_text())["cost"]


def test_a_task_may_not_pass_the_sweeps_checkpoint_keyword(tmp_path, tasks_module):
    task = SweepTask(key="c", function=f"{tasks_module}:counting", kwargs={"to": 1, "fail_at": 0, "checkpoint": 1})
    with pytest.raises(ValueError, match="'checkpoint' of .* is the sweep's"):
        run_sweep([task], tmp_path / "out", workers=0, progress=False)
    assert not (tmp_path / "out").exists()


def test_a_bad_or_foreign_checkpoint_is_named_with_its_fix(tmp_path):
    path = tmp_path / "k.pkl"
    mine = TaskCheckpoint(path, {"function": "m:f", "kwargs": {"x": 1}})
    assert mine.load() is None and mine.resumes == 0
    mine.save({"epoch": 3})
    again = TaskCheckpoint(path, {"function": "m:f", "kwargs": {"x": 1}})
    assert again.load() == {"epoch": 3} and again.resumes == 1 and again.earlier["wall_s"] >= 0
    with pytest.raises(RuntimeError, match="once"):
        again.load()
    with pytest.raises(ValueError, match=r"k\.pkl was saved by the task .*'x': 1.*, not by .*'x': 2.*remove it"):
        TaskCheckpoint(path, {"function": "m:f", "kwargs": {"x": 2}}).load()
    path.write_bytes(path.read_bytes()[:20])  # truncated
    with pytest.raises(ValueError, match=r"k\.pkl: not a readable task checkpoint .*remove it"):
        TaskCheckpoint(path, mine.task).load()
    import pickle
    path.write_bytes(pickle.dumps({"version": 0}))
    with pytest.raises(ValueError, match=r"not a version-1 task checkpoint"):
        TaskCheckpoint(path, mine.task).load()


def test_a_leftover_checkpoint_of_a_finished_task_is_removed(tmp_path, tasks_module):
    task = SweepTask(key="sq", function=f"{tasks_module}:square", kwargs={"x": 3})
    assert run_sweep([task], tmp_path, workers=0, progress=False).passed
    leftover = checkpoint_path(tmp_path, "sq")
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_bytes(b"left by a crash")
    assert run_sweep([task], tmp_path, workers=0, progress=False).skipped == ["sq"]
    assert not leftover.exists()


def test_a_result_of_another_task_under_the_same_key_is_an_error(tmp_path):
    task = SweepTask(key="k", function="json:dumps", kwargs={"obj": 1})
    path = result_path(tmp_path, "k")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"task": {**task.to_dict(), "kwargs": {"obj": 2}}, "result": {}}))
    with pytest.raises(ValueError, match="not of"):
        run_sweep([task], tmp_path)


def test_in_process_runs_write_the_same_results_and_retry_like_workers(tmp_path, tasks_module):
    tasks = grid_tasks(f"{tasks_module}:square", {"x": [2, 3]})
    report = run_sweep(tasks, tmp_path / "out", workers=0, progress=False)
    assert report.passed and report.scheduler == "this process" and report.workers == 0
    assert [read_result(tmp_path / "out", t)["square"] for t in tasks] == [4, 9]
    assert run_sweep(tasks, tmp_path / "out", workers=0, progress=False).skipped == [t.key for t in tasks]
    flaky = SweepTask(key="flaky", function=f"{tasks_module}:flaky", kwargs={"x": 1, "marker": str(tmp_path / "m")})
    broken = SweepTask(key="broken", function=f"{tasks_module}:broken", kwargs={"x": 2})
    report = run_sweep([flaky, broken], tmp_path / "out", workers=0, retries=1, progress=False)
    assert report.done == ["flaky"] and "no result for 2" in report.failed["broken"]


def test_cli_sweeps_a_grid_file(tmp_path, tasks_module, capsys):
    from codesign.cli import main

    grid = tmp_path / "grid.toml"
    grid.write_text(f'function = "{tasks_module}:square"\n[grid]\nx = [1, 2]\n')
    out = tmp_path / "out"
    assert main(["sweep", "--grid", str(grid), "--workers", "0", "--out", str(out)]) == 0
    assert "2 done" in capsys.readouterr().out
    assert json.loads(result_path(out, "x=2").read_text())["result"]["square"] == 4


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path):
    task = SweepTask(key="k", function="json:dumps", kwargs={"obj": 1})
    with pytest.raises(ValueError, match="cannot reach the Dask scheduler"):
        run_sweep([task], tmp_path / "out", scheduler="tcp://127.0.0.1:9", connect_timeout_s=2)
    assert not (tmp_path / "out").exists()


def test_an_existing_cluster_is_used_through_its_scheduler_address(tmp_path, tasks_module):
    """A cluster started before the sweep (its own scheduler and 2 worker processes), reached by --scheduler's path."""
    import logging

    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        tasks = grid_tasks(f"{tasks_module}:square", {"x": list(range(6))})
        report = run_sweep(tasks, tmp_path / "out", scheduler=cluster.scheduler_address, progress=False)
        assert report.passed and report.scheduler == cluster.scheduler_address and report.workers == 2
        results = [read_result(tmp_path / "out", t) for t in tasks]
        assert [r["square"] for r in results] == [x * x for x in range(6)]
        with Client(cluster) as client:
            worker_pids = set(client.run(os.getpid).values())
        assert len(worker_pids) == 2  # the sweep left the cluster as it found it
        assert {r["pid"] for r in results} <= worker_pids  # ran on the cluster's workers, not in a cluster of its own


def test_a_truncated_result_is_named_not_a_traceback(tmp_path):
    from codesign.io.jsonfile import JsonFileError


    task = SweepTask(key="a", function="math:sqrt", kwargs={"x": 4.0})
    path = result_path(tmp_path, task.key)
    path.parent.mkdir(parents=True)
    path.write_text('{"task": {"key": "a", "func')
    with pytest.raises(JsonFileError, match=r"a\.json: sweep result.*not valid JSON"):
        read_result(tmp_path, task)
    path.write_text('{"task": {}}')
    with pytest.raises(JsonFileError, match="result"):
        read_result(tmp_path, task)


# -- refusals before any folder or cluster -------------------------------------------------------------------------
def _closed_port() -> int:
    """A local port nothing listens on (bound, then released): a connection there is refused."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def no_cluster(monkeypatch):
    """Fails the test if a local Dask cluster is started."""
    import dask.distributed

    def refuse(*args, **kwargs):
        raise AssertionError("a cluster was started for a sweep that should have been refused")

    monkeypatch.setattr(dask.distributed, "LocalCluster", refuse)


@pytest.mark.parametrize(("function", "kwargs", "message"), [
    ("no_such_module_xyz:f", {"x": 1}, "cannot import module 'no_such_module_xyz'"),
    ("{mod}:no_such_function", {"x": 1}, "has no function 'no_such_function'"),
    ("{mod}:square", {"y": 1}, "cannot take the arguments \\['y'\\]"),
    ("{mod}:square", {"x": 1, "z": 2}, "cannot take the arguments"),
    ("{mod}:flaky", {"x": 1}, "cannot take the arguments"),
    ("math:pi", {"x": 1}, "has no function 'pi'"),
    ("math:sqrt", {"x": 4.0}, "positional only"),
    ("time:sleep", {"seconds": 60}, "a builtin whose parameters cannot be read, .*wrap it in a Python function"),
])
def test_a_task_that_cannot_run_is_refused_before_any_cluster(tmp_path, tasks_module, no_cluster, function, kwargs,
                                                              message):
    import time

    task = SweepTask(key="k", function=function.format(mod=tasks_module), kwargs=kwargs)
    started = time.perf_counter()
    with pytest.raises(ValueError, match=message):
        run_sweep([task], tmp_path / "out", workers=2, progress=False)
    assert time.perf_counter() - started < 2.0
    assert not (tmp_path / "out").exists()


def test_the_cli_refuses_an_unknown_function_before_the_folder(tmp_path, tasks_module, no_cluster, capsys):
    from codesign.cli import main

    grid = tmp_path / "grid.toml"
    grid.write_text(f'function = "{tasks_module}:sqaure"\n[grid]\nx = [1, 2]\n')
    assert main(["sweep", "--grid", str(grid), "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert f"'{tasks_module}:sqaure'" in captured.err and "has no function 'sqaure'" in captured.err
    assert "results in" not in captured.out and "Traceback" not in captured.err
    assert not (tmp_path / "out").exists()


def test_a_sweep_where_every_task_fails_does_not_point_at_results(tmp_path, tasks_module, capsys):
    from codesign.cli import main

    grid = tmp_path / "grid.toml"
    grid.write_text(f'function = "{tasks_module}:broken"\n[grid]\nx = [1]\n')
    assert main(["sweep", "--grid", str(grid), "--workers", "0", "--retries", "0", "--out", str(tmp_path / "o")]) == 1
    out = capsys.readouterr().out
    assert "1 failed" in out and "no result written" in out and "results in" not in out


def test_a_refused_scheduler_port_is_reported_at_once(tmp_path, no_cluster):
    """Dask's client retries a refused connection for its whole timeout (30 s); the probe answers at once."""
    import time

    task = SweepTask(key="k", function="json:dumps", kwargs={"obj": 1})
    address = f"tcp://127.0.0.1:{_closed_port()}"
    started = time.perf_counter()
    with pytest.raises(ValueError, match=f"cannot reach the Dask scheduler at {address}: .*refused"):
        run_sweep([task], tmp_path / "out", scheduler=address)
    assert time.perf_counter() - started < 2.0
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("address", ["", "localhost", "tcp://", "tcp://:8786", "tcp://host:port", "tcp://host:0",
                                     "tcp://host:70000", "http://127.0.0.1:8786", "inproc://x", "tcp://host:-1"])
def test_a_malformed_scheduler_address_is_refused(address):
    from codesign.sweep import check_scheduler

    with pytest.raises(ValueError, match=f"scheduler address {address!r}: expected"):
        check_scheduler(address, timeout_s=0.1)


def test_an_unknown_scheduler_host_is_refused_within_the_probe_time():
    import time

    from codesign.sweep import check_scheduler

    started = time.perf_counter()
    with pytest.raises(ValueError, match="cannot reach the Dask scheduler at tcp://no-such-host.invalid:8786"):
        check_scheduler("tcp://no-such-host.invalid:8786", timeout_s=1.0)
    assert time.perf_counter() - started < 5.0


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_the_cli_refuses_an_unreachable_scheduler_before_the_folder(tmp_path, capsys, command):
    import time

    from codesign.cli import main

    grid = tmp_path / "grid.toml"
    grid.write_text('function = "json:dumps"\n[grid]\nobj = [4.0]\n')
    address = f"tcp://127.0.0.1:{_closed_port()}"
    argv = (["sweep", "--grid", str(grid)] if command == "sweep" else ["reproduce", "smd", "--smoke"]) + \
        ["--scheduler", address, "--out", str(tmp_path / "out")]
    started = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - started < 5.0
    err = capsys.readouterr().err
    assert f"cannot reach the Dask scheduler at {address}" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_large_grids_are_checked_in_linear_time_and_too_large_ones_refused_with_their_size():
    import time

    from codesign.sweep import MAX_TASKS, check_sweep, grid_tasks, local_worker_limit

    started = time.perf_counter()
    tasks = grid_tasks("builtins:dict", {"a": list(range(250)), "b": list(range(200))})  # 50,000 points
    check_sweep(tasks, workers=0)
    assert len(tasks) == 50_000 and time.perf_counter() - started < 10  # quadratic bookkeeping took minutes
    with pytest.raises(ValueError, match=r"the grid has 1,000,000 points \(1000 x 1000\); at most 100,000"):
        grid_tasks("builtins:dict", {"a": list(range(1000)), "b": list(range(1000))})
    assert MAX_TASKS == 100_000
    with pytest.raises(ValueError, match=rf"at most {local_worker_limit()} local worker processes"):
        check_sweep(tasks[:2], workers=local_worker_limit() + 1)


def test_a_grid_file_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path):
    import os

    from codesign.sweep import load_grid

    fifo = tmp_path / "grid.toml"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="grid.toml: sweep file: a FIFO, not a regular file"):
        load_grid(fifo)
    with pytest.raises(ValueError, match="/dev/null: sweep file: a device, not a regular file"):
        load_grid(Path("/dev/null"))
