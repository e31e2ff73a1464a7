"""A list shell's side of the board: which overlays run call lists, and a shell's caches of device buffers (their
eviction order, and nothing freed while an IP may still read it)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from codesign.deploy import list_shell
from codesign.deploy.list_shell import ListShell, one_ip_route, runs_lists
from codesign.deploy.manifest import DeployError


def _overlay(routes, *, emulated: bool = False):
    device = SimpleNamespace(runs_generated_cpp=True) if emulated else SimpleNamespace()
    ips = [{"name": f"csb_{i}", "pe": "csb", **({} if route is None else {"ip_route": route})}
           for i, route in enumerate(routes)]
    return SimpleNamespace(device=device, manifest={"design": "d", "ips": ips + [{"name": "tt1_0", "pe": "tt1"}]})


@pytest.mark.parametrize("routes, emulated, expected", [
    (["rtl"], False, True), (["rtl", "rtl"], False, True),
    (["hls"], False, False), ([None], False, False), (["rtl", "hls"], False, False), ([], False, False),
    (["hls"], True, True), ([None], True, True),  # the emulated board runs the generated C++ of either route
])
def test_lists_run_on_rtl_route_ips_or_the_emulated_board(routes, emulated, expected):
    assert runs_lists(_overlay(routes, emulated=emulated), "csb") is expected


class _Buffer(np.ndarray):
    freed = False

    def freebuffer(self):
        self.freed = True


class _Ip:
    """start_list / finish_list, recording which descriptor buffers were live when each list ran."""

    def __init__(self, name: str) -> None:
        self.ip_name, self.started = name, []

    def start_list(self, arena, descriptors, n_calls, *, flush=True, clear_end=True):
        assert not flush and not clear_end and not descriptors.freed  # the shell cleared every list's end
        self.started.append(descriptors)

    def finish_list(self):
        assert not any(buffer.freed for buffer in self.started)  # nothing an IP reads is freed before its done


def _allocate(shape, dtype, target=None):
    return np.zeros(shape, dtype).view(_Buffer)


def test_descriptors_are_freed_after_the_phase_and_arenas_least_recently_used_first(monkeypatch):
    import pynq

    monkeypatch.setattr(pynq, "allocate", _allocate)
    monkeypatch.setattr(list_shell, "encode_list", lambda calls: np.arange(4 * len(calls), dtype=np.uint32))
    monkeypatch.setattr(list_shell, "flush_words", lambda *args: None)
    monkeypatch.setattr(list_shell, "clear_list_ends", lambda arena, lists: None)
    monkeypatch.setattr(list_shell, "KEPT_ENCODINGS", 1)
    monkeypatch.setattr(list_shell, "KEPT_ARENAS", 2)
    ips = {"tt1_0": _Ip("tt1_0"), "tt1_1": _Ip("tt1_1")}
    overlay = SimpleNamespace(device=None, accelerator=ips.get,
                              manifest={"design": "d", "ips": [{"name": n, "pe": "tt1"} for n in ips]})
    shell = ListShell(overlay, {"tt1": None})
    lists = SimpleNamespace(arena=np.zeros(8, np.uint32))
    arenas = [shell.arena(lists, key) for key in ("a", "b", "c")]
    first, second = ("x",), ("y", "z")
    shell.run_phase([("tt1", first), ("tt1", second)], arenas[0])  # the first list's buffer goes while both run
    assert ips["tt1_0"].started[0].freed and not ips["tt1_1"].started[0].freed and shell.lists == 2
    assert shell.arena(lists, "a") is arenas[0]  # "a" used again: "b" is now the least recently used
    shell.arena(lists, "d")  # a fourth arena: past KEPT_ARENAS, the least recently used half goes
    assert arenas[1].freed and not arenas[0].freed


def test_the_stage_log_charges_each_phase_its_busiest_port_from_design_json(monkeypatch):
    """Each IP's port is design.json's ``hp_port``; a phase's lists are priced with the words of the port its IPs
    load most, as the desktop's list step models count them."""
    import pynq

    monkeypatch.setattr(pynq, "allocate", _allocate)
    monkeypatch.setattr(list_shell, "encode_list", lambda calls: np.arange(4 * len(calls), dtype=np.uint32))
    monkeypatch.setattr(list_shell, "flush_words", lambda *args: None)
    monkeypatch.setattr(list_shell, "clear_list_ends", lambda arena, lists: None)
    monkeypatch.setattr(list_shell, "phase_cycles", lambda phase, specs, arena, ddr: (100, 30, 12))
    seen = []
    monkeypatch.setattr(list_shell, "phase_port_words", lambda phase, ports: seen.append(ports) or (20, 8))
    ips = {name: _Ip(name) for name in ("tt1_0", "tt1_1", "tt2_0")}
    overlay = SimpleNamespace(device=None, accelerator=ips.get, manifest={"design": "d", "ips": [
        {"name": "tt1_0", "pe": "tt1", "hp_port": 0}, {"name": "tt1_1", "pe": "tt1", "hp_port": 1},
        {"name": "tt2_0", "pe": "tt2", "hp_port": 1}]})
    shell = ListShell(overlay, {"tt1": None, "tt2": None})
    arena = shell.arena(SimpleNamespace(arena=np.zeros(8, np.uint32)), "a")
    shell.run_phase([("tt1", ("x",)), ("tt1", ("y", "z")), ("tt2", ("u", "v", "w"))], arena)  # lengths apart
    assert shell.stage_log().stages == [(100, 30, 12, 20, 8)]
    assert seen == [{"tt1": [0, 1], "tt2": [1]}]


def _logging_shell(monkeypatch, log: list) -> ListShell:
    import pynq

    class Ip(_Ip):
        def start_list(self, arena, descriptors, n_calls, *, flush=True, clear_end=True):
            log.append(("start", self.ip_name))

        def finish_list(self):
            log.append(("wait", self.ip_name))

    monkeypatch.setattr(pynq, "allocate", _allocate)
    monkeypatch.setattr(list_shell, "encode_list", lambda calls: np.arange(4 * len(calls), dtype=np.uint32))
    monkeypatch.setattr(list_shell, "flush_words", lambda *args: None)
    # every list's end cleared once, before the first IP starts (a cache line written back while an IP runs could
    # cover its record)
    monkeypatch.setattr(list_shell, "clear_list_ends", lambda arena, lists: log.append(("clear", len(lists))))
    ips = {"tt1_0": Ip("tt1_0"), "tt2_0": Ip("tt2_0")}
    overlay = SimpleNamespace(device=None, accelerator=ips.get,
                              manifest={"design": "d", "ips": [{"name": "tt1_0", "pe": "tt1"},
                                                               {"name": "tt2_0", "pe": "tt2"}]})
    return ListShell(overlay, {"tt1": None, "tt2": None})


def test_the_host_works_beside_a_phase_between_the_ips_starts_and_the_wait(monkeypatch):
    log: list = []
    shell = _logging_shell(monkeypatch, log)
    arena = shell.arena(SimpleNamespace(arena=np.zeros(8, np.uint32)), "a")
    shell.run_phase([("tt1", ("x",)), ("tt2", ("y", "z"))], arena, beside=lambda: log.append(("host", None)))
    assert log == [("clear", 2), ("start", "tt1_0"), ("start", "tt2_0"), ("host", None), ("wait", "tt1_0"), ("wait", "tt2_0")]


def test_started_ips_are_waited_for_when_the_host_s_work_beside_them_fails(monkeypatch):
    log: list = []
    shell = _logging_shell(monkeypatch, log)
    arena = shell.arena(SimpleNamespace(arena=np.zeros(8, np.uint32)), "a")

    def fails():
        raise RuntimeError("the host's work failed")
    with pytest.raises(RuntimeError, match="the host's work failed"):
        shell.run_phase([("tt1", ("x",)), ("tt2", ("y", "z"))], arena, beside=fails)
    assert log == [("clear", 2), ("start", "tt1_0"), ("start", "tt2_0"), ("wait", "tt1_0"), ("wait", "tt2_0")]


def test_an_ip_that_fails_to_start_or_to_finish_leaves_no_other_ip_running(monkeypatch):
    """A start that fails: the IPs started before it are waited for. A wait that fails: the other IPs are still
    waited for, and the first failure is raised."""
    log: list = []
    shell = _logging_shell(monkeypatch, log)
    arena = shell.arena(SimpleNamespace(arena=np.zeros(8, np.uint32)), "a")
    tt2 = shell.ips["tt2"][0]

    def refuse(*args, **kwargs):
        raise RuntimeError("tt2 refused the list")
    monkeypatch.setattr(tt2, "start_list", refuse)
    with pytest.raises(RuntimeError, match="tt2 refused the list"):
        shell.run_phase([("tt1", ("x",)), ("tt2", ("y", "z"))], arena, beside=lambda: log.append(("host", None)))
    assert log == [("clear", 2), ("start", "tt1_0"), ("wait", "tt1_0")]
    monkeypatch.undo()
    log.clear()
    shell = _logging_shell(monkeypatch, log)
    arena = shell.arena(SimpleNamespace(arena=np.zeros(8, np.uint32)), "a")

    def times_out():
        log.append(("wait", "tt1_0"))
        raise TimeoutError("tt1 timed out")
    monkeypatch.setattr(shell.ips["tt1"][0], "finish_list", times_out)
    with pytest.raises(TimeoutError, match="tt1 timed out"):
        shell.run_phase([("tt1", ("x",)), ("tt2", ("y", "z"))], arena)
    assert log == [("clear", 2), ("start", "tt1_0"), ("start", "tt2_0"), ("wait", "tt1_0"), ("wait", "tt2_0")]


def test_neighbouring_ranges_are_flushed_in_one_call_and_no_word_more():
    from codesign.deploy.list_shell import coalesced

    ranges = [(40, 8), (0, 16), (16, 8), (30, 4), (34, 0), (44, 2), (10, 3)]
    assert coalesced(ranges) == [(0, 24), (30, 4), (40, 8)]  # touching merged, overlaps inside, empty dropped
    words = {w for start, n in ranges for w in range(start, start + n)}
    assert words == {w for start, n in coalesced(ranges) for w in range(start, start + n)}
    assert coalesced([]) == []


def test_a_route_of_one_ip_refuses_copies_naming_them():
    """Only call lists share a step: an overlay of two csb IPs that cannot run lists is refused before anything
    runs; one IP passes."""
    with pytest.raises(DeployError, match="'d': 2 csb IPs share a step as call lists only.*an HLS export"):
        one_ip_route(_overlay(["hls", "hls"]), "csb", "an HLS export")
    one_ip_route(_overlay(["hls"]), "csb", "an HLS export")
