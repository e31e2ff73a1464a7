"""Run a grid of independent tasks (seeds x techniques x configs, PE configs x boards) on Dask.

Why Dask: every task of a sweep is independent, so the same grid runs on a
local cluster of worker processes (the default, one thread each, sized to the
machine) or on an existing cluster given by its scheduler address, with no
change to the tasks. What this module adds to Dask is the bookkeeping a sweep
needs:

* a task is a ``"module:function"`` name and JSON keyword arguments, imported
  and called on the worker; it returns a JSON-serialisable dict;
* each result is written by the client, atomically, to ``results/<key>.json``
  together with the task that made it and what it cost where it ran (wall and
  CPU seconds, :func:`task_costs` sums them), so an interrupted sweep loses at most
  the tasks in flight and a re-run skips every task whose result is there (a
  result file written by a *different* task under the same key is an error,
  never silently reused);
* a failing task is retried ``retries`` times by the scheduler, then reported
  with its error and left without a result, so the next run tries it again;
* a long task may keep its state between sessions: a function with a
  keyword-only ``checkpoint`` parameter is handed a :class:`TaskCheckpoint`
  under ``checkpoints/<key>.pkl``, saves its state there as it goes (say after
  every epoch) and starts from it when the task runs again; the checkpoint is
  removed once the result is written, and the result's cost adds the earlier
  sessions' seconds up to their last save;
* progress is shown as tasks finish.

Bad input (an empty grid axis, a function name that is not ``module:function``
or names nothing importable, arguments the function does not take, duplicate
keys, arguments that are not JSON, a scheduler address where nothing listens)
is refused by :func:`check_sweep` before anything is written or any cluster is
started: within a second for a refused port, where Dask's client would retry
for its whole 30 s connect timeout.
"""

from __future__ import annotations

import importlib
import math
import os
import inspect
import itertools
import json
import logging
import pickle
import re
import socket
import time
import types
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesign.io.atomic import write_bytes_atomic
from codesign.io.jsonfile import load_json, read_text_file
from codesign.io.reports import write_json_atomic

RESULTS_DIR = "results"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_PARAMETER = "checkpoint"  # a task function taking this keyword-only parameter is handed a TaskCheckpoint
CHECKPOINT_VERSION = 1
_FUNCTION = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss")  # Dask's transports over TCP, the ones a socket can probe
SCHEDULER_PROBE_S = 5.0  # how long a scheduler address may take to accept a connection before it is refused


@dataclass(frozen=True, kw_only=True)
class SweepTask:
    """One task: ``function`` (``"module:function"``) called with ``kwargs``; ``key`` names its result file."""

    key: str
    function: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key or _KEY_UNSAFE.search(self.key) or self.key in (".", ".."):
            raise ValueError(f"task key {self.key!r} must be a non-empty file name of letters, digits and ._=,+-")
        if not isinstance(self.function, str) or not _FUNCTION.match(self.function):
            raise ValueError(f"task {self.key}: function {self.function!r} is not 'module:function'")
        try:
            json.dumps(dict(self.kwargs), sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"task {self.key}: keyword arguments are not JSON ({error})") from None

    def to_dict(self) -> dict:
        """As stored beside its result: plain JSON (tuples become lists), so a re-run compares equal."""
        return json.loads(json.dumps({"key": self.key, "function": self.function, "kwargs": dict(self.kwargs)}))


MAX_TASKS = 100_000  # tasks of one sweep: each is a result file in one folder


def local_worker_limit() -> int:
    """The most local worker processes a sweep starts: four a core (tasks that wait on I/O may share one)."""
    return 4 * (os.cpu_count() or 1)


def grid_tasks(function: str, grid: Mapping[str, Sequence], fixed: Mapping[str, Any] | None = None) -> list[SweepTask]:
    """The Cartesian product of ``grid``'s axes (in the given order), each point plus ``fixed``, as tasks.

    Keys read ``axis=value,axis=value``, so results stay readable in the folder.
    """
    fixed = dict(fixed or {})
    if not grid:
        raise ValueError("the grid has no axis")
    for axis, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
            raise ValueError(f"grid axis {axis!r} must be a non-empty list of values, got {values!r}")
        if axis in fixed:
            raise ValueError(f"{axis!r} is both a grid axis and a fixed argument")
    axes = list(grid)
    points = math.prod(len(grid[axis]) for axis in axes)
    if points > MAX_TASKS:
        raise ValueError(f"the grid has {points:,} points ({' x '.join(str(len(grid[a])) for a in axes)}); at most "
                         f"{MAX_TASKS:,} (split it into several sweeps)")
    tasks: dict[str, SweepTask] = {}
    for point in itertools.product(*(grid[axis] for axis in axes)):
        key = ",".join(f"{axis}={_KEY_UNSAFE.sub('_', str(value))}" for axis, value in zip(axes, point))
        if key in tasks:
            raise ValueError(f"two grid points share the result name {key!r} ({tasks[key].kwargs} and "
                             f"{dict(zip(axes, point))}): values that differ only in unsafe characters")
        tasks[key] = SweepTask(key=key, function=function, kwargs={**fixed, **dict(zip(axes, point))})
    return list(tasks.values())


def load_grid(path: Path) -> list[SweepTask]:
    """Tasks from a TOML file: ``function = "module:function"``, a ``[grid]`` table of lists, an optional
    ``[fixed]`` table of arguments every task gets. Every problem, down to a function that cannot take the
    grid's arguments, is a ValueError naming the file."""
    import tomllib

    path = Path(path)
    text = read_text_file(path, what="sweep file")  # names a missing, unreadable or non-UTF-8 file
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"sweep file {path} is not TOML: {error}") from None
    unknown = set(data) - {"function", "grid", "fixed"}
    if unknown:
        raise ValueError(f"sweep file {path}: unknown key(s) {sorted(unknown)}; expected function, grid, fixed")
    if "function" not in data or "grid" not in data:
        raise ValueError(f"sweep file {path} needs 'function' and a [grid] table")
    for key, kind, what in (("function", str, "a 'module:function' string"), ("grid", dict, "a table of lists"),
                            ("fixed", dict, "a table of arguments")):
        if key in data and not isinstance(data[key], kind):
            raise ValueError(f"sweep file {path}: {key} must be {what}, got {data[key]!r}")
    try:
        tasks = grid_tasks(data["function"], data["grid"], data.get("fixed"))
        check_functions(tasks)
    except ValueError as error:
        raise ValueError(f"sweep file {path}: {error}") from None
    return tasks


def resolve_function(function: str) -> Callable:
    """The callable a ``"module:function"`` name names; a ``ValueError`` saying what is missing otherwise."""
    module_name, name = function.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"function {function!r}: cannot import module {module_name!r} ({error})") from None
    target = getattr(module, name, None)
    if not callable(target):
        raise ValueError(f"function {function!r}: module {module_name!r} has no function {name!r}")
    return target


def check_functions(tasks: Sequence[SweepTask]) -> None:
    """Every task's function exists here and takes the task's keyword arguments.

    Checked in the client, before any worker starts: a typo in a function or
    an axis name would otherwise fail on every worker, once per task. The
    client imports what the workers import, as Dask expects of one environment.
    """
    for task in tasks:
        target = resolve_function(task.function)
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):  # no signature to bind the keyword arguments to
            if isinstance(target, types.BuiltinFunctionType):  # a C function without one takes positions only
                raise ValueError(f"function {task.function!r}: a builtin whose parameters cannot be read, so the "
                                 f"task's keyword arguments {sorted(task.kwargs)} cannot be checked; wrap it in a "
                                 "Python function that takes them") from None
            continue  # a class such as dict: it may take keywords, the task will tell
        if CHECKPOINT_PARAMETER in task.kwargs and takes_checkpoint(target):
            raise ValueError(f"task {task.key}: the keyword {CHECKPOINT_PARAMETER!r} of {task.function} is the "
                             "sweep's (its TaskCheckpoint), not a task argument")
        try:
            signature.bind(**task.kwargs, **({CHECKPOINT_PARAMETER: None} if takes_checkpoint(target) else {}))
        except TypeError as error:
            raise ValueError(f"task {task.key}: {task.function} cannot take the arguments "
                             f"{sorted(task.kwargs)}: {error}") from None


def check_scheduler(address: str | None, *, timeout_s: float = SCHEDULER_PROBE_S) -> None:
    """Refuse a scheduler address that is malformed or where nothing accepts a connection within ``timeout_s``.

    One TCP connection, opened and closed: a refused port answers at once,
    where ``dask.distributed.Client`` would keep retrying until its timeout.
    ``None`` (a local cluster) needs no check.
    """
    if address is None:
        return
    expected = f"expected {'|'.join(SCHEDULER_SCHEMES)}://host:port, e.g. tcp://127.0.0.1:8786"
    if not isinstance(address, str) or not address.strip():
        raise ValueError(f"scheduler address {address!r}: {expected}")
    scheme, separator, rest = address.partition("://")
    if not separator:
        scheme, rest = "tcp", address
    host, colon, port = rest.rstrip("/").rpartition(":")
    host = host.strip("[]")  # an IPv6 literal
    if scheme not in SCHEDULER_SCHEMES or not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"scheduler address {address!r}: {expected}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:  # refused, unreachable, unknown host, or no answer in time
        reason = error.strerror or str(error) or type(error).__name__
        raise ValueError(f"cannot reach the Dask scheduler at {address}: {reason} (start one with "
                         "`dask scheduler`, or leave out --scheduler for a local cluster)") from None


class TaskCheckpoint:
    """Where a long task keeps its state between sessions: one pickle, written atomically, stamped with its task.

    The task calls :meth:`load` once at its start (its last saved state, or
    None) and :meth:`save` whenever it has state worth keeping. Each save also
    records what the task has cost so far (wall and CPU seconds, earlier
    sessions included), so the finished result is charged every session's
    work up to its last save; work after the last save of a killed session is
    lost and not charged. The file is a pickle: the sweep loads only the ones
    it wrote in its own folder, so never hand it a folder you did not write.
    """

    def __init__(self, path: Path, task: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.task = json.loads(json.dumps(dict(task)))  # as the stamp compares: plain JSON
        self.earlier = {"wall_s": 0.0, "cpu_s": 0.0}
        self.resumes = 0
        self._loaded = False
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def load(self) -> Any:
        """The state of the last :meth:`save` (None when there is none); a clear error for a file that is not one,
        or that another task wrote."""
        if self._loaded:
            raise RuntimeError("a task loads its checkpoint once, at its start (a second load would count this "
                               "session's seconds twice)")
        self._loaded = True
        if not self.path.is_file():
            return None
        fix = "remove it to run the task from the start"
        try:
            stored = pickle.loads(self.path.read_bytes())
        except Exception as error:  # pickle raises many kinds for a damaged file
            raise ValueError(f"{self.path}: not a readable task checkpoint ({type(error).__name__}: {error}); "
                             f"{fix}") from None
        if not isinstance(stored, dict) or stored.get("version") != CHECKPOINT_VERSION:
            raise ValueError(f"{self.path}: not a version-{CHECKPOINT_VERSION} task checkpoint; {fix}")
        if stored.get("task") != self.task:
            raise ValueError(f"{self.path} was saved by the task {stored.get('task')}, not by {self.task}; {fix}")
        self.earlier, self.resumes = dict(stored["cost"]), int(stored["resumes"]) + 1
        return stored["state"]

    def spent(self) -> dict[str, float]:
        """Wall and CPU seconds (s) the task has cost: earlier sessions up to their last save, and this one."""
        return {"wall_s": self.earlier["wall_s"] + time.perf_counter() - self._wall,
                "cpu_s": self.earlier["cpu_s"] + time.process_time() - self._cpu}

    def save(self, state: Any) -> None:
        """Keep ``state`` (anything pickle takes) in place of the last one."""
        write_bytes_atomic(self.path, pickle.dumps({"version": CHECKPOINT_VERSION, "task": self.task,
                                                    "cost": self.spent(), "resumes": self.resumes,
                                                    "state": state}, protocol=pickle.HIGHEST_PROTOCOL))


def takes_checkpoint(target: Callable) -> bool:
    """Whether a task function takes the sweep's :class:`TaskCheckpoint` (a keyword-only ``checkpoint``)."""
    try:
        parameter = inspect.signature(target).parameters.get(CHECKPOINT_PARAMETER)
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind is inspect.Parameter.KEYWORD_ONLY


def checkpoint_path(out_dir: Path, key: str) -> Path:
    """Where task ``key`` of the sweep folder ``out_dir`` keeps its :class:`TaskCheckpoint`."""
    return Path(out_dir) / CHECKPOINTS_DIR / f"{key}.pkl"


def execute(function: str, kwargs: Mapping[str, Any]) -> dict:
    """Import and call one task's function (this runs on a worker); its result must be a JSON dict."""
    result = resolve_function(function)(**kwargs)
    if not isinstance(result, dict):
        raise TypeError(f"{function} returned {type(result).__name__}, not a dict")
    json.dumps(result, allow_nan=True)  # fails on the worker, where the traceback is most useful
    return result


def execute_timed(function: str, kwargs: Mapping[str, Any], checkpoint: str | None = None
                  ) -> tuple[dict, dict[str, float]]:
    """:func:`execute`, and what the call cost where it ran: wall and CPU seconds of the worker's process.

    Why CPU beside wall: a reproduction resumes across sessions and shares its machine, so the wall time of one
    invocation says little; the tasks' CPU seconds add up to what the reproduction costs on idle cores. With
    ``checkpoint`` (a path) a function that takes one gets a :class:`TaskCheckpoint` there, and the cost adds
    the earlier sessions' seconds and says how often the task resumed.
    """
    saver = None
    if checkpoint is not None and takes_checkpoint(resolve_function(function)):
        saver = TaskCheckpoint(Path(checkpoint), {"function": function, "kwargs": dict(kwargs)})
        kwargs = {**kwargs, CHECKPOINT_PARAMETER: saver}
    wall, cpu = time.perf_counter(), time.process_time()
    result = execute(function, kwargs)
    if saver is None:
        return result, {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    return result, {**saver.spent(), "resumes": saver.resumes}


@dataclass(frozen=True)
class TaskCosts:
    """What the stored results of a sweep folder cost: their count, how many recorded a cost, and the sums (s)."""

    runs: int
    recorded: int
    wall_s: float
    cpu_s: float

    def to_dict(self) -> dict[str, float | int]:
        return {"runs": self.runs, "recorded": self.recorded, "wall_s": self.wall_s, "cpu_s": self.cpu_s}


def task_costs(out_dir: Path) -> TaskCosts:
    """The summed cost of every result stored under ``out_dir`` (results set aside as superseded are not counted).

    A result written before costs were recorded counts in ``runs`` but not in ``recorded`` or the sums.
    """
    runs = recorded = 0
    wall = cpu = 0.0
    for path in sorted((Path(out_dir) / RESULTS_DIR).glob("*.json")):
        if path.name.endswith(".superseded.json"):
            continue
        runs += 1
        cost = load_json(path, what="sweep result").get("cost")
        if isinstance(cost, dict) and {"wall_s", "cpu_s"} <= cost.keys():
            recorded += 1
            wall += float(cost["wall_s"])
            cpu += float(cost["cpu_s"])
    return TaskCosts(runs=runs, recorded=recorded, wall_s=wall, cpu_s=cpu)


@dataclass(frozen=True)
class SweepReport:
    """What a run did: keys computed now, found done, failed (key -> error); wall time (s) and where it ran."""

    done: list[str]
    skipped: list[str]
    failed: dict[str, str]
    wall_s: float
    scheduler: str
    workers: int

    @property
    def passed(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        text = (f"{len(self.done)} done, {len(self.skipped)} already done, {len(self.failed)} failed "
                f"in {self.wall_s:.1f} s on {self.scheduler} ({self.workers} workers)")
        return text + "".join(f"\n  FAILED {key}: {error}" for key, error in self.failed.items())


def result_path(out_dir: Path, key: str) -> Path:
    return Path(out_dir) / RESULTS_DIR / f"{key}.json"


def read_result(out_dir: Path, task: SweepTask) -> dict | None:
    """The stored result of ``task``, None when there is none; an error when another task wrote that key."""
    path = result_path(out_dir, task.key)
    if not path.is_file():
        return None
    stored = load_json(path, what="sweep result (delete it to run the task again)",
                       required={"task": dict, "result": (dict, list, int, float, str, bool, type(None))})
    if stored.get("task") != task.to_dict():
        raise ValueError(f"{path} holds the result of {stored.get('task')}, not of {task.to_dict()}; "
                         "remove it or use another output folder")
    return stored["result"]


def check_sweep(tasks: Sequence[SweepTask], *, scheduler: str | None = None, workers: int = 2,
                retries: int = 1) -> None:
    """Everything :func:`run_sweep` needs, checked before any file or cluster: call it before claiming a folder."""
    if not tasks:
        raise ValueError("the sweep has no task")
    if len(tasks) > MAX_TASKS:
        raise ValueError(f"the sweep has {len(tasks):,} tasks; at most {MAX_TASKS:,} (split the grid)")
    counts = Counter(task.key for task in tasks)  # linear in the tasks: a large grid starts at once
    duplicates = sorted(key for key, count in counts.items() if count > 1)
    if duplicates:
        raise ValueError(f"duplicate task keys: {duplicates[:10]}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an int >= 0 (0: in this process), got {workers!r}")
    most = local_worker_limit()
    if scheduler is None and workers > most:
        raise ValueError(f"workers {workers}: this machine has {os.cpu_count() or 1} cores, so at most {most} local "
                         "worker processes (more only wait for each other), or give a --scheduler's cluster")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an int >= 0, got {retries!r}")
    check_functions(tasks)
    check_scheduler(scheduler)


def run_sweep(tasks: Sequence[SweepTask], out_dir: Path, *, scheduler: str | None = None, workers: int = 2,
              retries: int = 1, progress: bool = True, connect_timeout_s: float = 30.0) -> SweepReport:
    """Run every task without a stored result on Dask; write each result as it arrives.

    Everything is checked first (:func:`check_sweep`). ``scheduler`` is an
    existing cluster's address (``tcp://host:8786``), probed at once and then
    reached within ``connect_timeout_s`` seconds, or refused with a clear error; without
    it a local cluster of ``workers`` processes is started and shut down again.
    ``workers=0`` runs the tasks one after the other in this process, with the
    same result files, skipping and reporting (no cluster to start: quick
    runs and tests).
    """
    tasks = list(tasks)
    check_sweep(tasks, scheduler=scheduler, workers=workers, retries=retries)
    out_dir = Path(out_dir).resolve()  # workers elsewhere resolve a relative checkpoint path against their own folder
    pending = [task for task in tasks if read_result(out_dir, task) is None]
    skipped = [task.key for task in tasks if task not in pending]
    for key in skipped:  # a crash between a result and its checkpoint's removal leaves the checkpoint behind
        checkpoint_path(out_dir, key).unlink(missing_ok=True)
    started = time.perf_counter()
    if not pending:
        return SweepReport([], skipped, {}, time.perf_counter() - started, scheduler or "nothing to run", 0)

    from tqdm import tqdm

    if workers == 0 and scheduler is None:
        return _run_here(pending, out_dir, skipped, started, retries, progress)

    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None if scheduler else LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                  dashboard_address=None, silence_logs=logging.ERROR)
    done: list[str] = []
    failed: dict[str, str] = {}
    try:
        try:
            client = Client(scheduler or cluster, timeout=connect_timeout_s)
        except OSError as error:
            raise ValueError(f"cannot reach the Dask scheduler at {scheduler}: {error}") from None
        with client:
            n_workers = len(client.scheduler_info()["workers"])
            futures = {client.submit(execute_timed, task.function, dict(task.kwargs),
                                     str(checkpoint_path(out_dir, task.key)), key=f"codesign-sweep-{task.key}",
                                     pure=False, retries=retries): task
                       for task in pending}
            bar = tqdm(total=len(futures), desc="sweep", unit="task", disable=not progress)
            for future in as_completed(futures):
                task = futures[future]
                if future.status == "finished":
                    _keep(out_dir, task, *future.result())
                    done.append(task.key)
                else:
                    failed[task.key] = repr(future.exception())
                bar.set_postfix_str(task.key)
                bar.update()
            bar.close()
            where = scheduler or f"local cluster {client.scheduler.address}"
    finally:
        if cluster is not None:
            cluster.close()
    return SweepReport(done, skipped, failed, time.perf_counter() - started, where, n_workers)


def _keep(out_dir: Path, task: SweepTask, result: dict, cost: dict) -> None:
    """Write a finished task's result, then drop its checkpoint (in that order: a crash between keeps both)."""
    write_json_atomic(result_path(out_dir, task.key), {"task": task.to_dict(), "result": result, "cost": cost})
    checkpoint_path(out_dir, task.key).unlink(missing_ok=True)


def _run_here(pending: list[SweepTask], out_dir: Path, skipped: list[str], started: float, retries: int,
              progress: bool) -> SweepReport:
    from tqdm import tqdm

    done: list[str] = []
    failed: dict[str, str] = {}
    for task in tqdm(pending, desc="sweep", unit="task", disable=not progress):
        for attempt in range(retries + 1):
            try:
                result, cost = execute_timed(task.function, dict(task.kwargs), str(checkpoint_path(out_dir, task.key)))
            except Exception as error:  # reported like a worker's failure, after the retries
                if attempt == retries:
                    failed[task.key] = repr(error)
                continue
            _keep(out_dir, task, result, cost)
            done.append(task.key)
            break
    return SweepReport(done, skipped, failed, time.perf_counter() - started, "this process", 0)
