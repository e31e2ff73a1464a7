"""An emulated PYNQ board: a ``pynq.Device`` that runs the generated HLS C++ of each IP where no board is attached.

The same driver code (:mod:`codesign.deploy.driver`, :class:`pynq.MMIO`,
:func:`pynq.allocate`) runs against this device as against a Zynq board:

- **memory map** from design.json: one register file per IP at its base
  address, laid out as the manifest's register map (the Vitis HLS
  s_axilite layout);
- **DDR**: :class:`DdrModel` hands out physical addresses for
  :func:`pynq.allocate` and holds the bytes the IP reads and writes. Buffers
  are *not* coherent, as on a Zynq with cacheable buffers: the host array is
  the CPU's view, and only ``flush()`` copies it to DDR and only
  ``invalidate()`` copies DDR back, so a driver that forgets either gets
  stale data here too;
- **ap_start**: writing 1 to bit 0 of ``CTRL`` runs the IP's generated
  top function (``hls/<ip>/<top>.cpp``, compiled by
  :class:`codesign.hw.bridge.AccelBridge`) on the DDR bytes its ``in`` and
  ``out`` pointer registers address, with its ``n_in``, ``n_out`` and
  ``n_transactions`` registers; then ``ap_done`` and ``ap_idle`` rise and
  ``ap_start`` falls. ``ap_done`` clears when ``CTRL`` is read; ``ap_ready``
  only pulses with ``ap_done`` for one clock in the shell
  (``rtl/accel/accel_ctrl.v``), so a processor read never sees it and here it
  reads 0; ``ISR`` latches the enabled events (``IER``) and toggles on write.
  The code that would be synthesised is the code that runs; nothing is
  re-implemented in Python.

The call runs to completion inside the register write (the emulated PL is
infinitely fast; :attr:`EmulatedIP.last_run_s` records the host seconds), in
a worker process under a watchdog (:mod:`codesign.deploy.kernel_worker`): a
kernel that hangs past ``kernel_timeout_s`` or crashes is cut and named, and
the IP stays busy as the PL would, while the board lives on.

Runs the hardware would not finish. C simulation does not block: a stream
read while empty returns zero and a stream left holding words is only
reported, both by the ap_types ``hls_stream.h`` on standard output. On the
PL either one stalls the DATAFLOW region (the PE waits for words that never
come, or the shell's FIFO of default depth fills), and ``ap_done`` never
rises; the board takes the strict reading even for a leftover a FIFO might
absorb. So the board captures
the C++ output of every run; when it reports either, the IP stays busy, the
reason is kept (:meth:`EmulatedBoard.stall_reason`, which the driver's
time-out message quotes) and an :class:`EmulatedStall` warning is issued.
``stalled`` IPs ignore ``ap_start`` altogether: a fault injected on purpose.
"""

from __future__ import annotations

import bisect
import sys
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from pynq import Device
from pynq.buffer import PynqBuffer

from codesign.deploy.kernel_worker import KernelFailed, KernelWorker, SharedDdr
from codesign.deploy.manifest import LOW_DDR_LIMIT, MANIFEST_FILE, DeployError, load_manifest
from codesign.deploy.register_view import shell_hwh_registers
from codesign.contracts import shell
from codesign.io.project import ProjectDirError, read_project_marker

WORD = np.dtype(np.uint32)
PAGE_BYTES = 4096  # allocation granularity and alignment (bytes), as the kernel's contiguous allocator
CTRL_BIT = {name: 1 << bit for name, bit in shell.CTRL_BITS.items()}
ISR_BIT = {name: 1 << bit for name, bit in shell.ISR_BITS.items()}


class EmulationError(DeployError):
    """The emulated board was driven in a way the hardware would not survive (bad address, unmodelled mode)."""


class EmulatedStall(UserWarning):
    """An IP's generated C++ reported a stream misuse that stalls the hardware: the run never finishes."""


STALL_MARKERS = ("is read while empty", "contains leftover data")  # hls_stream.h's two C-simulation warnings
KERNEL_TIMEOUT_S = 60.0  # the longest an emulated ap_start may take before its kernel is killed as hung (seconds)


# ---------------------------------------------------------------------------- DDR


class DdrModel:
    """Physical memory for contiguous buffers: page-aligned allocations inside ``[base, base + size)`` bytes.

    Each allocation owns its bytes; an address that is not inside one
    allocation is an error (the real IP would read or write whatever lies
    there).
    """

    def __init__(self, *, base: int, size: int) -> None:
        if base % PAGE_BYTES or size <= 0:
            raise ValueError(f"DDR window base {base:#x} must be page aligned and size {size} positive")
        self.base, self.size = base, size
        self.memory = SharedDdr(size)  # the kernels' worker shares it (codesign.deploy.kernel_worker)
        self._starts: list[int] = []  # sorted allocation addresses
        self._blocks: dict[int, np.ndarray] = {}  # address -> uint8 storage, a view of ``memory``

    def allocate(self, nbytes: int) -> tuple[int, np.ndarray]:
        """First fit of ``nbytes`` (rounded up to pages); returns the physical address and its storage."""
        span = max(PAGE_BYTES, -(-int(nbytes) // PAGE_BYTES) * PAGE_BYTES)
        address = self.base
        for start in self._starts:
            if start - address >= span:
                break
            address = start + self._blocks[start].size
            address = -(-address // PAGE_BYTES) * PAGE_BYTES
        if address + span > self.base + self.size:
            raise MemoryError(f"emulated DDR: no {span} free contiguous bytes in the {self.size >> 20} MiB window")
        bisect.insort(self._starts, address)
        block = self.memory.bytes[address - self.base:address - self.base + span]
        block[:] = 0  # a freed buffer's bytes do not show through
        self._blocks[address] = block
        return address, block

    def return_pointer(self, address: int) -> None:
        """Free the allocation at ``address`` (the hook :class:`pynq.buffer.PynqBuffer` calls when freed)."""
        if address in self._blocks:
            del self._blocks[address]
            self._starts.remove(address)

    @property
    def allocations(self) -> int:
        return len(self._starts)

    def bytes_at(self, address: int, nbytes: int) -> np.ndarray:
        """The DDR bytes ``[address, address + nbytes)``, which must lie inside one allocation (a view)."""
        index = bisect.bisect_right(self._starts, address) - 1
        if index >= 0:
            start = self._starts[index]
            block = self._blocks[start]
            if address + nbytes <= start + block.size:
                return block[address - start:address - start + nbytes]
        raise EmulationError(f"emulated DDR: {nbytes} bytes at {address:#x} are not inside one allocated buffer")

    def words_from(self, address: int) -> np.ndarray:
        """The 32-bit words from ``address`` (word aligned) to the end of its allocation, as a writable view."""
        index = bisect.bisect_right(self._starts, address) - 1
        if address % WORD.itemsize or index < 0 \
                or address >= self._starts[index] + self._blocks[self._starts[index]].size:
            raise EmulationError(f"emulated DDR: {address:#x} is not a word inside an allocated buffer")
        start = self._starts[index]
        block = self._blocks[start]
        usable = (block.size - (address - start)) // WORD.itemsize * WORD.itemsize
        return block[address - start:address - start + usable].view(WORD)

    def words_at(self, address: int, count: int) -> np.ndarray:
        """``count`` 32-bit words at ``address`` (word aligned), as a writable uint32 view of DDR."""
        if address % WORD.itemsize:
            raise EmulationError(f"emulated DDR: word address {address:#x} is not 4-byte aligned")
        if count == 0:
            return np.zeros(0, dtype=WORD)
        return self.bytes_at(address, count * WORD.itemsize).view(WORD)


# ---------------------------------------------------------------------------- one IP


class Traffic:
    """What the host did to the PL since the counters were last cleared: bytes flushed to DDR and invalidated
    (read back) by cache maintenance, and 32-bit register writes and reads. The figures a host's share of a
    step is judged by, counted where the driver cannot miss them."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.flushed_bytes = self.invalidated_bytes = self.register_writes = self.register_reads = 0

    def as_dict(self) -> dict:
        return {"flushed_bytes": self.flushed_bytes, "invalidated_bytes": self.invalidated_bytes,
                "register_writes": self.register_writes, "register_reads": self.register_reads}


class EmulatedIP:
    """The s_axilite register file of one accelerator IP, and its top function behind ``ap_start``."""

    def __init__(self, entry: dict, ddr: DdrModel, project_dir: Path, *, stalled: bool = False,
                 bridge_dir: Path | None = None, traffic: Traffic | None = None) -> None:
        from codesign.hw.bridge import AccelBridge

        self.entry, self.ddr, self.stalled = entry, ddr, stalled
        self.traffic = traffic if traffic is not None else Traffic()
        self.name = entry["name"]
        self.base, self.span = entry["base_address"], entry["address_range"]
        self.offsets = entry["registers"]
        self._check_project(Path(project_dir))
        self.bridge = AccelBridge(Path(project_dir), build_dir=bridge_dir)
        if self.bridge.top != entry["top"]:
            raise EmulationError(f"IP {self.name}: {project_dir} implements {self.bridge.top!r}, "
                                 f"design.json says {entry['top']!r}")
        self.words = np.zeros(self.span // WORD.itemsize, dtype=WORD)
        self.runs, self.last_run_s = 0, 0.0
        self.run_s = 0.0  # the host seconds of every run: what the PL would have computed beside the host
        self._printed: list[str] = []  # what the running call's C++ printed
        self.stall: str | None = None
        self.reset()

    def _check_project(self, project_dir: Path) -> None:
        """The HLS project must be the one design.json describes: same PE, spec and top (not a stale render)."""
        if not project_dir.is_dir():
            raise EmulationError(f"IP {self.name}: no HLS project at {project_dir}; the emulated board runs the "
                                 "generated C++ of every IP, so the build folder must hold hls/<ip>/")
        try:
            project = read_project_marker(project_dir)
        except ProjectDirError as error:
            raise EmulationError(f"IP {self.name}: {error}") from None
        if project is None:
            raise EmulationError(f"IP {self.name}: {project_dir} is not a codesign HLS project")
        found = (project.get("pe"), project.get("spec"), (project.get("target") or {}).get("top"))
        wanted = (self.entry["pe"], self.entry["spec"], self.entry["top"])
        if found != wanted:
            raise EmulationError(f"IP {self.name}: {project_dir} was generated for PE {found[0]!r}, top {found[2]!r}, "
                                 f"spec {found[1]}; design.json says PE {wanted[0]!r}, top {wanted[2]!r}, "
                                 f"spec {wanted[1]}: regenerate the build folder")

    def reset(self) -> None:
        self.stall = None
        self.words[:] = 0
        self.words[self.offsets["CTRL"] // 4] = CTRL_BIT["ap_idle"]

    def _reg(self, name: str, words: int = 1) -> int:
        index = self.offsets[name] // 4
        return sum(int(self.words[index + i]) << (32 * i) for i in range(words))

    def read(self, offset: int) -> int:
        self.traffic.register_reads += 1
        value = int(self.words[offset // 4])
        if offset == self.offsets["CTRL"]:  # ap_done clears on read
            self.words[offset // 4] = value & ~CTRL_BIT["ap_done"]
        return value

    def write(self, offset: int, value: int) -> None:
        self.traffic.register_writes += 1
        value = int(value) & 0xFFFF_FFFF
        index = offset // 4
        if offset == self.offsets["CTRL"]:
            if value & CTRL_BIT["auto_restart"]:
                raise EmulationError(f"IP {self.name}: auto_restart is not modelled by the emulated board")
            ctrl = int(self.words[index])
            if value & CTRL_BIT["ap_start"] and ctrl & CTRL_BIT["ap_idle"]:
                self.words[index] = (ctrl & ~CTRL_BIT["ap_idle"]) | CTRL_BIT["ap_start"]
                if not self.stalled:
                    self._run()
            return  # the status bits are read-only
        if offset == self.offsets["ISR"]:  # toggle on write
            self.words[index] ^= np.uint32(value & 0x3)
            return
        self.words[index] = value

    def _work(self, counts: dict):
        """What one ap_start does to DDR: the direct call, or the call list over the arena ``in`` (= ``out``)
        reaches, from its address to the end of its allocation."""
        if counts["n_calls"]:
            if counts["in"] != counts["out"]:
                raise EmulationError(f"IP {self.name}: a call list runs on one arena; in={counts['in']:#x} and "
                                     f"out={counts['out']:#x} differ")
            from codesign.contracts.calls import DESCRIPTOR_WORDS

            arena = self.ddr.words_from(counts["in"])
            descriptors = np.array(self.ddr.words_at(counts["calls"], counts["n_calls"] * DESCRIPTOR_WORDS))
            bits = int(self.entry.get("spec", {}).get("stream_bits", 32))
            return lambda: self.bridge.run_list(arena, descriptors, counts["n_calls"], stream_bits=bits)
        in_words = self.ddr.words_at(counts["in"], counts["n_in"])
        out_words = self.ddr.words_at(counts["out"], counts["n_out"])
        return lambda: self.bridge.run(np.ascontiguousarray(in_words), out_words, counts["n_in"], counts["n_out"],
                                       counts["n_transactions"])

    def _run(self) -> None:
        pointer_words = -(-shell.POINTER_BITS // 32)
        counts = {arg.name: self._reg(arg.name, pointer_words if arg.kind == "pointer" else 1)
                  for arg in shell.SHELL_ARGS}
        work = self._work(counts)
        started, self._printed = time.perf_counter(), []
        try:
            work()
        except KernelFailed as failure:
            self.runs += 1
            self._stalled(f"{failure} ({self._described(counts)}); the emulated board lives on, but on the PL this "
                          "run would never raise ap_done")
            return
        finally:
            self.last_run_s = time.perf_counter() - started
            self.run_s += self.last_run_s
        self.runs += 1
        printed = "".join(self._printed)
        stalls = sorted({line.strip() for line in printed.splitlines() if any(m in line for m in STALL_MARKERS)})
        if stalls:
            self._stalled(f"reported {'; '.join(stalls)} ({self._described(counts)}): on the PL this run stalls and "
                          "never raises ap_done")
            return  # busy for good, as the hardware would be
        if printed:
            sys.stdout.write(printed)
        ctrl_index = self.offsets["CTRL"] // 4
        self.words[ctrl_index] = CTRL_BIT["ap_done"] | CTRL_BIT["ap_idle"]  # ap_ready pulsed with ap_done
        isr_index, ier = self.offsets["ISR"] // 4, int(self.words[self.offsets["IER"] // 4])
        self.words[isr_index] |= np.uint32(ier & (ISR_BIT["ap_done"] | ISR_BIT["ap_ready"]))

    def _stalled(self, what: str) -> None:
        self.stall = f"the generated C++ of IP {self.name} {what}"
        warnings.warn(self.stall, EmulatedStall, stacklevel=3)

    @staticmethod
    def _described(counts: dict) -> str:
        if counts["n_calls"]:
            return f"a list of {counts['n_calls']} calls"
        return f"n_in={counts['n_in']}, n_out={counts['n_out']}, n_transactions={counts['n_transactions']}"

    def run_in(self, kernels: KernelWorker) -> None:
        """Run this IP's top function in ``kernels``' worker process, under its watchdog."""
        self.bridge.invoke = lambda args: self._printed.append(kernels.call(self.name, args))


class RegisterWindow(np.ndarray):
    """The uint32 array :class:`pynq.MMIO` indexes: integer reads and writes go to the IP's register file."""

    _ip: EmulatedIP
    _first: int

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, np.integer)) and hasattr(self, "_ip"):
            return np.uint32(self._ip.read((self._first + self._index(key)) * 4))
        return super().__getitem__(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, (int, np.integer)) and hasattr(self, "_ip"):
            self._ip.write((self._first + self._index(key)) * 4, int(value))
            return
        raise EmulationError("registers of the emulated board are written one 32-bit word at a time")

    def _index(self, key) -> int:
        index = int(key) + (len(self) if key < 0 else 0)
        if not 0 <= index < len(self):
            raise IndexError(f"register word {key} outside the {len(self)}-word window")
        return index


# ---------------------------------------------------------------------------- the device


class EmulatedMetadata:
    """What PYNQ's HWH parser would give for the design, built from design.json (no .hwh exists here)."""

    def __init__(self, manifest: dict, ddr: DdrModel) -> None:
        self.ip_dict = {ip["name"]: {"fullpath": ip["name"], "type": ip["vlnv"], "phys_addr": ip["base_address"],
                                     "addr_range": ip["address_range"], "state": None, "gpio": {},
                                     "interrupts": {}, "parameters": {}, "mem_id": "s_axi_control",
                                     "registers": shell_hwh_registers()}  # what the IP decodes, not design.json
                        for ip in manifest["ips"]}
        self.mem_dict = {"PSDDR": {"base_address": ddr.base, "size": ddr.size, "type": "DDR", "used": 0,
                                   "raw_type": None, "streaming": False}}
        self.gpio_dict, self.interrupt_pins, self.interrupt_controllers = {}, {}, {}
        self.hierarchy_dict, self.clock_dict = {}, {}
        self.systemgraph = None


class EmulatedBoard(Device):
    """A ``pynq.Device`` for the build folder ``build_dir`` (design.json + hls/<ip>/), with no board attached.

    Use it through :class:`codesign.deploy.CodesignOverlay` (``emulate=True``,
    or automatically off-board), or directly: ``EmulatedBoard(dir).activate()``
    makes it ``pynq.Device.active_device`` so :class:`pynq.MMIO` and
    :func:`pynq.allocate` reach it. ``stalled`` names IPs that never finish.
    """

    runs_generated_cpp = True  # every IP is its generated C++ (list mode included, whatever the IP route)

    def __init__(self, build_dir: Path, *, stalled: Iterable[str] = (), bridge_dir: Path | None = None,
                 kernel_timeout_s: float = KERNEL_TIMEOUT_S) -> None:
        self.build_dir = Path(build_dir)
        self.manifest = load_manifest(self.build_dir)
        super().__init__(f"emulated_{self.manifest['design']}")
        self.name = f"emulated {self.manifest['board']}"
        self.capabilities = {"MEMORY_MAPPED": True}
        # contiguous buffers come from the upper half of the low DDR (below the PL windows at 0x8000_0000 on a
        # Zynq UltraScale+ with more than 2 GiB, whose rest lies at 0x8_0000_0000), as a CMA pool does
        low_ddr = min(self.manifest["board_facts"]["ddr_mib"] << 20, LOW_DDR_LIMIT)
        self.ddr = DdrModel(base=low_ddr // 2, size=low_ddr // 2)
        names = {ip["name"] for ip in self.manifest["ips"]}
        unknown = sorted(set(stalled) - names)
        if unknown:
            raise EmulationError(f"stalled IP(s) {unknown} are not in design {self.manifest['design']!r}")
        self.traffic = Traffic()
        self.ips = {ip["name"]: EmulatedIP(ip, self.ddr, self.build_dir / ip.get("hls_project", f"hls/{ip['name']}"),
                                           stalled=ip["name"] in set(stalled), bridge_dir=bridge_dir,
                                           traffic=self.traffic)
                    for ip in self.manifest["ips"]}
        self.kernels = KernelWorker({name: ip.bridge.entry for name, ip in self.ips.items()}, self.ddr.memory,
                                    timeout_s=kernel_timeout_s)
        for ip in self.ips.values():
            ip.run_in(self.kernels)
        self.manifest_path = (self.build_dir / MANIFEST_FILE).resolve()
        self.bitfile_name = str(self.manifest_path)  # PYNQ's set_bitfile_name overwrites this one
        self.timestamp = ""

    def stall_reason(self, ip_name: str) -> str | None:
        """Why IP ``ip_name`` is stuck (its C++ reported a stalling stream misuse), or None."""
        return self.ips[ip_name].stall

    def activate(self) -> EmulatedBoard:
        """Make this the device PYNQ uses when none is named (MMIO, allocate, Overlay)."""
        Device.active_device = self
        return self

    # -- metadata and download (the manifest stands in for the bitstream)

    def get_bitfile_metadata(self, bitfile_name: str, partial: bool = False) -> EmulatedMetadata:
        if partial:
            raise EmulationError("partial reconfiguration is not modelled by the emulated board")
        if Path(bitfile_name).resolve() != self.manifest_path:
            raise EmulationError(f"the emulated board holds design {self.manifest['design']!r} "
                                 f"({self.manifest_path}); it cannot load {bitfile_name}")
        return EmulatedMetadata(self.manifest, self.ddr)

    def download(self, bitstream, parser=None) -> None:
        for ip in self.ips.values():
            ip.reset()
        self.post_download(bitstream, parser or self.get_bitfile_metadata(bitstream.bitfile_name), self.name)

    # -- memory map

    def mmap(self, base_addr: int, length: int) -> np.ndarray:
        for ip in self.ips.values():
            if ip.base <= base_addr and base_addr + length <= ip.base + ip.span:
                if (base_addr - ip.base) % 4:
                    raise EmulationError(f"MMIO base {base_addr:#x} is not word aligned")
                window = np.zeros(length // 4, dtype=WORD).view(RegisterWindow)
                window._ip, window._first = ip, (base_addr - ip.base) // 4
                return window
        try:
            return self.ddr.bytes_at(base_addr, length).view(WORD)
        except EmulationError:
            raise EmulationError(f"nothing at {base_addr:#x}..{base_addr + length - 1:#x} on the emulated board: "
                                 f"no IP of design {self.manifest['design']!r} and no allocated buffer") from None

    # -- buffers

    def allocate(self, shape, dtype, **kwargs) -> PynqBuffer:
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        address, _ = self.ddr.allocate(nbytes)
        host = np.zeros(max(nbytes, 1), dtype=np.uint8)  # the CPU's (cached) view
        buffer = PynqBuffer(shape, dtype, buffer=host, device_address=address, bo=address, device=self,
                            coherent=False)
        # PynqBuffer.freebuffer returns `pointer` to `return_to`; `freed` keeps it off the munmap path
        buffer.memory, buffer.pointer, buffer.return_to, buffer.freed = self.ddr, address, self.ddr, True
        return buffer

    def _sync(self, bo: int, offset: int, vaddr: int, nbytes: int, *, to_ddr: bool) -> None:
        if nbytes == 0:
            return
        ddr = self.ddr.bytes_at(bo + offset, nbytes)
        host = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * nbytes).from_address(vaddr))
        if to_ddr:
            ddr[:] = host
        else:
            host[:] = ddr

    def flush(self, bo, offset, vaddr, nbytes) -> None:
        """CPU cache -> DDR (``PynqBuffer.flush``)."""
        self.traffic.flushed_bytes += int(nbytes)
        self._sync(bo, offset, vaddr, nbytes, to_ddr=True)

    def invalidate(self, bo, offset, vaddr, nbytes) -> None:
        """DDR -> CPU view (``PynqBuffer.invalidate``)."""
        self.traffic.invalidated_bytes += int(nbytes)
        self._sync(bo, offset, vaddr, nbytes, to_ddr=False)
